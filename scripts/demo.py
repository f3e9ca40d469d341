"""Offline demo: the production stream that started this project, through the core, cut as a wire cuts it.

    .venv/bin/python scripts/demo.py

Two parallel tool calls whose argument fragments arrive interleaved. The identity-routed result is the
truth; the warning shows what a gateway that appends each fragment to "the most recent call" built.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from accumulator import StreamAccumulator
from accumulator.report import format_report

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


def stream() -> bytes:
    def event(choice: dict) -> bytes:
        chunk = {
            "id": "chatcmpl-demo",
            "object": "chat.completion.chunk",
            "model": "gpt-demo",
            "choices": [choice],
        }
        return b"data: " + json.dumps(chunk).encode() + b"\n\n"

    body = b"".join(event({"index": 0, "delta": {"tool_calls": [d]}, "finish_reason": None}) for d in DELTAS)
    body += event({"index": 0, "delta": {}, "finish_reason": "tool_calls"})
    return body + b"data: [DONE]\n\n"


def main() -> int:
    body = stream()
    accumulator = StreamAccumulator("openai-chat")
    for start in range(0, len(body), 37):  # cut mid-event, as TCP reads do
        accumulator.feed(body[start : start + 37])
    result = accumulator.finish()
    print("The stream (one tool-call delta per event, fragments of two calls interleaved):")
    for n, delta in enumerate(DELTAS, 1):
        print(f"  event {n}: {json.dumps(delta)}")
    print()
    print(format_report(result, "what toolcall-lens rebuilt"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
