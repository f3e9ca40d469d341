"""The addon's script reloaded under a real mitmdump while an agent's stream passes: the official openai
SDK streaming through mitmdump (a copy of addon.py, the analysis worker on) from scripts/fake_provider,
its script touched mid-stream, as an edit, a ``git checkout`` or an editor's save does. mitmproxy reloads
it; the stream goes on to the SDK untouched, and is annotated at its end with its body kept in the dump;
the agent's next turn lands in the same session; the worker is the same process throughout, and gone
after the proxy stops. Before, the stream in flight ended with no result and "content missing" in the
dump, the worker was started again, and the session began anew. The same for a Responses WebSocket
connection open across a reload: before, it was never annotated."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from contextlib import contextmanager

import openai
from lab import ROOT, proxy_argv, start_fake_provider, start_proxy
from mitmproxy import io as mio
from websockets.sync.client import connect

TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("search_circulars", "get_user_profile")
]
MESSAGES = [{"role": "user", "content": "Find the RBI circulars and my profile."}]
SESSION = {"x-session-id": "run-1"}
CALLED = ["search_circulars", "get_user_profile"]
WS_TOOLS = [{"type": "function", "name": name, "parameters": {"type": "object"}} for name in CALLED]


def until_completed(ws) -> dict:
    """A Responses WebSocket turn's messages, up to its ``response.completed``: that response."""
    while True:
        event = json.loads(ws.recv(timeout=20))
        assert event["type"] != "error", event
        if event["type"] == "response.completed":
            return event["response"]


def names(chunks) -> list[str]:
    deltas = [t for c in chunks for choice in c.choices for t in choice.delta.tool_calls or ()]
    return [t.function.name for t in deltas if t.function and t.function.name]


def provider_done(proxy) -> bool:
    return any("toolcall-lens POST" in line for line in proxy.lines)


def reload(proxy, script) -> None:
    """The script touched, as a save does; back once mitmdump has loaded it again."""
    later = time.time() + 10
    os.utime(script, (later, later))  # mitmproxy looks at the file's time once a second
    deadline = time.monotonic() + 10
    while sum("Loading script" in line for line in proxy.lines) < 2:
        assert time.monotonic() < deadline, "mitmdump did not reload the script"
        time.sleep(0.05)


def read(dump) -> list:
    with open(dump, "rb") as f:
        return list(mio.FlowReader(f).stream())


@contextmanager
def proxy_with_a_script(tmp_path, *options: str):
    """A mitmdump running a copy of addon.py in front of the fake provider: (its process, its port, the
    copy). On the way out it is stopped; its one worker must be gone with it."""
    script = tmp_path / "addon.py"
    shutil.copy(ROOT / "addon.py", script)
    provider, provider_port = start_fake_provider(delay=0.0)
    try:
        argv = proxy_argv(provider_port, *options, scripts=(script,), dump=tmp_path / "session.flows")
        proxy, port = start_proxy(argv)
        try:
            yield proxy, port, script
            worker = int(proxy.wait_for(r"analysis worker started \(pid (\d+)\)").group(1))
        finally:
            proxy.stop()
    finally:
        provider.stop()
    assert "\n".join(proxy.lines).count("analysis worker started") == 1  # before: a second one
    deadline = time.monotonic() + 5
    while os.path.exists(f"/proc/{worker}"):  # stopped with the proxy, not left behind
        assert time.monotonic() < deadline, f"the worker {worker} outlived the proxy"
        time.sleep(0.05)


def test_a_reload_mid_stream_loses_nothing(tmp_path):
    jsonl = tmp_path / "llm.jsonl"
    with proxy_with_a_script(tmp_path, f"toolcall_lens_jsonl={jsonl}") as (proxy, port, script):
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="test-key", max_retries=0)
        slow = {**SESSION, "x-fake-delay": "0.5"}  # ~4 s of events: the reload comes in the middle
        stream = client.chat.completions.create(
            model="interleaved", messages=MESSAGES, tools=TOOLS, stream=True, extra_headers=slow
        )
        chunks = [next(stream)]
        reload(proxy, script)
        assert not provider_done(proxy), "the stream ended before the reload: nothing was in flight"
        chunks += list(stream)
        assert names(chunks) == CALLED
        second = client.chat.completions.create(
            model="interleaved", messages=MESSAGES, tools=TOOLS, stream=True, extra_headers=SESSION
        )
        assert names(list(second)) == CALLED
    log = "\n".join(proxy.lines)
    assert log.count("Loading script") == 2 and "error" not in log.lower()
    flows = read(tmp_path / "session.flows")
    assert len(flows) == 2
    for flow in flows:
        result = flow.metadata["toolcall_lens"]  # before: none on the first, its body "content missing"
        assert [c["name"] for c in result["choices"][0]["tool_calls"]] == CALLED
        assert [w["code"] for w in result["warnings"]] == ["recency-misroute"]
        body = flow.response.raw_content
        assert body == flows[1].response.raw_content and body.endswith(b"data: [DONE]\n\n")
    assert [f.metadata["toolcall_lens"]["session"]["turn"] for f in flows] == [1, 2]  # before: [1, 1]
    records = [json.loads(line)["result"] for line in jsonl.read_bytes().splitlines()]
    assert [(r["session"]["id"], r["session"]["turn"]) for r in records] == [("run-1", 1), ("run-1", 2)]
    assert re.search(r"script reloaded; 1 stream\(s\) and 0 connection\(s\) in flight carry on", log)


def test_a_websocket_connection_open_across_a_reload_is_read_to_its_close(tmp_path):
    """Codex's Responses WebSocket mode: a turn of interleaved calls, the script reloaded, the client's
    answer and a turn of text on the same connection, read by the worker throughout."""
    with (
        proxy_with_a_script(tmp_path) as (proxy, port, script),
        connect(f"ws://127.0.0.1:{port}/v1/responses") as ws,
    ):
        ws.send(json.dumps({"type": "response.create", "model": "interleaved", "tools": WS_TOOLS}))
        completed = until_completed(ws)
        reload(proxy, script)
        first = next(item for item in completed["output"] if item["type"] == "function_call")
        answer = [{"type": "function_call_output", "call_id": first["call_id"], "output": "ok"}]
        create = {"type": "response.create", "model": "text", "input": answer}
        ws.send(json.dumps({**create, "previous_response_id": completed["id"]}))
        until_completed(ws)
    log = "\n".join(proxy.lines)
    (flow,) = read(tmp_path / "session.flows")
    record = flow.metadata["toolcall_lens"]  # before: none, or the first turn alone
    calls_turn, answer_turn = record["responses"]
    assert [c["name"] for c in calls_turn["choices"][0]["tool_calls"]] == CALLED
    # Its evidence came after the reload: the second call was not answered (a dropped call).
    assert "unanswered-call" in [w["code"] for w in calls_turn["warnings"]]
    assert answer_turn["complete"] and answer_turn["choices"][0]["text"]
    assert record["connection"]["closed"]["by_client"] is True
    assert "script reloaded; 0 stream(s) and 1 connection(s) in flight carry on" in log
