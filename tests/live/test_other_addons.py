"""The addon beside a user's own script that streams every event stream (``flow.response.stream = True``
in its ``responseheaders``: a common way to stop mitmproxy buffering an agent's streams), under a real
mitmdump with the official openai SDK and scripts/fake_provider. Loaded before that script, the addon's
watch is replaced and sees nothing: the flow says so (``stream-not-seen``) instead of the false
"truncated-stream" and the empty body it had before; loaded after it, the addon reads the stream. The SDK
gets its calls either way."""

from __future__ import annotations

import json

import openai
import pytest
from lab import ROOT, proxy_argv, start_fake_provider, start_proxy
from mitmproxy import io as mio

THEIRS = """
def responseheaders(flow):
    if "event-stream" in flow.response.headers.get("content-type", ""):
        flow.response.stream = True
"""
TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("search_circulars", "get_user_profile")
]
CALLED = ["search_circulars", "get_user_profile"]


@pytest.fixture(scope="module")
def provider():
    process, port = start_fake_provider(delay=0.0)
    yield port
    process.stop()


@pytest.mark.parametrize("order", ["addon first", "theirs first"])
def test_a_script_that_streams_event_streams_itself(provider, tmp_path, order):
    theirs = tmp_path / "theirs.py"
    theirs.write_text(THEIRS)
    scripts = (ROOT / "addon.py", theirs) if order == "addon first" else (theirs, ROOT / "addon.py")
    dump, jsonl = tmp_path / "flows", tmp_path / "llm.jsonl"
    proxy, port = start_proxy(
        proxy_argv(provider, f"toolcall_lens_jsonl={jsonl}", scripts=scripts, dump=dump)
    )
    try:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="test-key", max_retries=0)
        messages = [{"role": "user", "content": "Find the RBI circulars and my profile."}]
        stream = client.chat.completions.create(
            model="interleaved", messages=messages, tools=TOOLS, stream=True
        )
        deltas = [t for c in stream for choice in c.choices for t in choice.delta.tool_calls or ()]
        assert [t.function.name for t in deltas if t.function and t.function.name] == CALLED
    finally:
        proxy.stop()
    (record,) = [json.loads(line)["result"] for line in jsonl.read_bytes().splitlines()]
    with open(dump, "rb") as f:
        (flow,) = mio.FlowReader(f).stream()
    if order == "theirs first":  # the addon's watch is set last, over their True: it reads the stream
        assert [c["name"] for c in record["choices"][0]["tool_calls"]] == CALLED
        assert flow.response.raw_content.endswith(b"data: [DONE]\n\n")
    else:  # before: truncated-stream, marked, an empty body in the dump
        assert [w["code"] for w in record["warnings"]] == ["stream-not-seen"]
        assert flow.marked and flow.response.raw_content is None
