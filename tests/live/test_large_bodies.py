"""mitmproxy's ``stream_large_bodies`` under a real mitmdump with the addon, the official openai SDK and
scripts/fake_provider: messages (``stream=False``) over the limit, and requests, are streamed by mitmproxy
itself and kept by none. An agent's request is kept by the addon as it passes, and read. One with a Content-Length over it is read from the body the addon keeps as it passes; one
sent in chunks, which grows past it as it comes, is said not read (``body-not-kept``, info, and how to
keep it); with ``store_streamed_bodies=true`` that one is read too. The SDK gets its calls every time.
Before, each such message had "malformed-event, truncated-stream", no calls and a marker."""

from __future__ import annotations

import json

import openai
import pytest
from lab import proxy_argv, start_fake_provider, start_proxy
from mitmproxy import io as mio

TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("search_circulars", "get_user_profile")
]
MESSAGES = [{"role": "user", "content": "Find the RBI circulars and my profile."}]
CALLED = ["search_circulars", "get_user_profile"]
CASES = {"length": {}, "chunked": {"x-fake-framing": "chunked"}}


@pytest.fixture(scope="module")
def provider():
    process, port = start_fake_provider(delay=0.0)
    yield port
    process.stop()


def through(provider, tmp_path, *options) -> dict:
    """Each case's message through a mitmdump with these options: {case: (the SDK's calls, the record)}."""
    dump, jsonl = tmp_path / "large.flows", tmp_path / "large.jsonl"
    argv = proxy_argv(
        provider, "stream_large_bodies=100", f"toolcall_lens_jsonl={jsonl}", *options, dump=dump
    )
    proxy, port = start_proxy(argv)
    got = {}
    try:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="test-key", max_retries=0)
        for case, headers in CASES.items():
            reply = client.chat.completions.create(
                model="interleaved",
                messages=MESSAGES,
                tools=TOOLS,
                extra_headers={"x-test-case": case, **headers},
            )
            got[case] = [c.function.name for c in reply.choices[0].message.tool_calls]
        stream = client.chat.completions.create(
            model="interleaved",
            messages=MESSAGES,
            tools=TOOLS[:1],  # one of the two tools it calls: the other is undeclared, if the request is read
            stream=True,
            extra_headers={"x-test-case": "sse"},
        )
        deltas = [t for c in stream for choice in c.choices for t in choice.delta.tool_calls or ()]
        got["sse"] = [t.function.name for t in deltas if t.function and t.function.name]
    finally:
        proxy.stop()
    # mitmproxy streamed the two messages itself, as the stream (one line each); and every request, each
    # over the limit (not logged)
    assert "\n".join(proxy.lines).count("Streaming response") == 3
    with open(dump, "rb") as f:
        flows = {flow.request.headers["x-test-case"]: flow for flow in mio.FlowReader(f).stream()}
    records = [json.loads(line) for line in jsonl.read_bytes().splitlines()]
    assert len(records) == len(flows) == 3
    return {case: (got[case], flow) for case, flow in flows.items()}


def test_messages_mitmproxy_streams_are_read_or_said_unread(provider, tmp_path):
    found = through(provider, tmp_path)
    assert {case: calls for case, (calls, _) in found.items()} == dict.fromkeys(
        ("length", "chunked", "sse"), CALLED
    )
    _, length = found["length"]
    result = length.metadata["toolcall_lens"]  # before: no calls, malformed-event, truncated-stream
    assert [c["name"] for c in result["choices"][0]["tool_calls"]] == CALLED and result["warnings"] == []
    assert not length.marked and json.loads(length.response.content)["id"]  # its body kept in the dump
    _, chunked = found["chunked"]
    result = chunked.metadata["toolcall_lens"]
    assert [w["code"] for w in result["warnings"]] == ["body-not-kept"] and not chunked.marked
    assert chunked.comment.startswith(
        "openai-chat (not streamed): not read, no body kept (stream_large_bodies=100)"
    )
    _, sse = found["sse"]
    result = sse.metadata["toolcall_lens"]
    assert [c["name"] for c in result["choices"][0]["tool_calls"]] == CALLED
    # Its request, streamed by mitmproxy too, was kept and read (in the worker): before, it was not.
    assert [w["name"] for w in result["warnings"] if w["code"] == "undeclared-tool"] == ["get_user_profile"]
    assert json.loads(sse.request.content)["tools"] == TOOLS[:1]  # kept in the dump


def test_with_store_streamed_bodies_a_message_that_grew_past_the_limit_is_read(provider, tmp_path):
    found = through(provider, tmp_path, "store_streamed_bodies=true")
    for case in ("length", "chunked"):
        calls, flow = found[case]
        result = flow.metadata["toolcall_lens"]
        assert calls == CALLED and [c["name"] for c in result["choices"][0]["tool_calls"]] == CALLED
        assert result["warnings"] == [] and not flow.marked
