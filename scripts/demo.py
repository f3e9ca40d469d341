"""The one-command demo: an agent's streamed tool calls through mitmdump with the addon, all local.

    .venv/bin/python scripts/demo.py            (live: fake provider + mitmdump + the official openai SDK)
    .venv/bin/python scripts/demo.py --offline  (the core alone, no processes)

Live, it starts scripts/fake_provider and `mitmdump -s addon.py` in reverse mode on free ports, runs the
openai SDK with stream=True and two tools through the proxy against the production incident's stream,
prints what the SDK got and what the addon recorded, then stops everything it started.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from lab import start_fake_provider, start_mitmdump

from accumulator import StreamAccumulator
from accumulator.report import format_report

TOOLS = [
    {"type": "function", "function": {"name": "search_circulars", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "get_user_profile", "parameters": {"type": "object"}}},
]


def live() -> int:
    try:
        import openai
    except ImportError:  # the base install is the proxy and the CLI; the SDK comes with the `demo` extra
        print("The live demo runs the openai SDK: .venv/bin/pip install -e '.[demo]'", file=sys.stderr)
        print("(.venv/bin/python scripts/demo.py --offline runs the core alone.)", file=sys.stderr)
        return 2
    from mitmproxy import io as mitmproxy_io

    with tempfile.TemporaryDirectory() as tmp:
        dump = Path(tmp) / "demo.flows"
        provider, provider_port = start_fake_provider(delay=0.05)
        with provider:
            proxy, proxy_port = start_mitmdump(provider_port, dump)
            with proxy:
                print(f"fake provider on :{provider_port}; mitmdump -s addon.py (reverse) on :{proxy_port}\n")
                client = openai.OpenAI(
                    base_url=f"http://127.0.0.1:{proxy_port}/v1", api_key="demo", max_retries=0
                )
                print("The agent (openai SDK, stream=True) receives, event by event:")
                with client.chat.completions.stream(
                    model="interleaved",
                    messages=[{"role": "user", "content": "Find the RBI circulars and my profile."}],
                    tools=TOOLS,
                ) as stream:
                    for event in stream:
                        if event.type == "tool_calls.function.arguments.delta":
                            print(f"  call #{event.index} arguments += {event.arguments_delta!r}")
                    final = stream.get_final_completion()
                print("\nThe SDK's final tool calls (it routes by index, so they are right):")
                for call in final.choices[0].message.tool_calls:
                    print(f"  {call.function.name}({call.function.arguments})  id={call.id}")
                proxy.stop()  # closes the dump file
                log = [line for line in proxy.lines if "toolcall-lens" in line]
            with open(dump, "rb") as f:
                flows = list(mitmproxy_io.FlowReader(f).stream())
    flow = flows[0]
    print("\nmitmdump's log line:\n  " + (log[0] if log else "(none)"))
    print(f"\nWhat the addon recorded on the flow ({flow.request.pretty_url}):")
    print(f"  comment: {flow.comment}")
    print(f"  marked:  {flow.marked}")
    print()
    print(format_report(flow.metadata["toolcall_lens"], "flow.metadata['toolcall_lens']"))
    print(
        "\nA gateway that appends each fragment to the most recent call would have built the"
        " 'would build' calls above.\nPut the addon in front of your own agent: see README, 'In front of a real agent'."
    )
    return 0


DELTAS = [
    {
        "index": 0,
        "id": "call_abc",
        "type": "function",
        "function": {"name": "search_circulars", "arguments": ""},
    },
    {
        "index": 1,
        "id": "call_xyz",
        "type": "function",
        "function": {"name": "get_user_profile", "arguments": ""},
    },
    {"index": 0, "function": {"arguments": '{"query": "RBI'}},
    {"index": 1, "function": {"arguments": '{"user_id": "u'}},
    {"index": 0, "function": {"arguments": ' circulars"}'}},
    {"index": 1, "function": {"arguments": '123"}'}},
]


def offline() -> int:
    def event(choice: dict) -> bytes:
        chunk = {
            "id": "chatcmpl-demo",
            "object": "chat.completion.chunk",
            "model": "gpt-demo",
            "choices": [choice],
        }
        return b"data: " + json.dumps(chunk).encode() + b"\n\n"

    body = b"".join(event({"index": 0, "delta": {"tool_calls": [d]}, "finish_reason": None}) for d in DELTAS)
    body += event({"index": 0, "delta": {}, "finish_reason": "tool_calls"}) + b"data: [DONE]\n\n"
    accumulator = StreamAccumulator("openai-chat")
    for start in range(0, len(body), 37):  # cut mid-event, as TCP reads do
        accumulator.feed(body[start : start + 37])
    print("The stream (one tool-call delta per event, fragments of two calls interleaved):")
    for n, delta in enumerate(DELTAS, 1):
        print(f"  event {n}: {json.dumps(delta)}")
    print()
    print(format_report(accumulator.finish(), "what toolcall-lens rebuilt"))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--offline", action="store_true", help="run the core alone, start no processes")
    args = parser.parse_args(argv)
    return offline() if args.offline else live()


if __name__ == "__main__":
    sys.exit(main())
