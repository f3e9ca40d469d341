"""Chat Completions turns of an agent, for the tests of sessions, cost and the OpenTelemetry export: a
stream making some calls (then its usage), the follow-up request carrying the conversation, and one flow
of them through the addon's hooks as mitmproxy calls them."""

from __future__ import annotations

import json

from mitmproxy.test import tflow
from streams import call, chunk, sse, tool_chunk

USAGE = {
    "prompt_tokens": 1200,
    "completion_tokens": 80,
    "total_tokens": 1280,
    "prompt_tokens_details": {"cached_tokens": 1000},
}
Call = tuple[str, str, str]  # id, name, arguments


def chat_stream(calls: list[Call], *, model: str = "gpt-4o", usage: dict | None = USAGE) -> bytes:
    """A Chat stream making these calls, each whole in one delta, then its usage chunk (unless None)."""
    events = [
        {**tool_chunk(call(n, i, name, args)), "model": model} for n, (i, name, args) in enumerate(calls)
    ]
    finish = "tool_calls" if calls else "stop"
    events.append({**chunk({"index": 0, "delta": {}, "finish_reason": finish}), "model": model})
    if usage is not None:
        events.append({**chunk(), "choices": [], "usage": usage, "model": model})
    return sse(*events)


def follow_up(
    turns: list[list[Call]], *, answers: dict[str, str] | None = None, model: str = "gpt-4o"
) -> dict:
    """A request carrying the conversation: each earlier turn's calls, then their results ("ok", or the
    answer ``answers`` gives; with ``answers``, the calls it leaves out are not answered)."""
    messages: list[dict] = [{"role": "user", "content": "go"}]
    for calls in turns:
        messages.append(
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": i, "type": "function", "function": {"name": name, "arguments": args}}
                    for i, name, args in calls
                ],
            }
        )
        for i, _, _ in calls:
            if answers is None or i in answers:
                messages.append({"role": "tool", "tool_call_id": i, "content": (answers or {}).get(i, "ok")})
    return {"model": model, "stream": True, "stream_options": {"include_usage": True}, "messages": messages}


def at_headers():
    """A flow as mitmproxy holds it at a server's response headers: the body not come yet. (A response
    whose body is there at its headers is one an addon answered, or loaded from a file: read whole.)"""
    flow = tflow.tflow(resp=True)
    flow.response.raw_content = None
    return flow


def stream_flow(request: dict, url: str = "https://api.openai.com/v1/chat/completions"):
    """An LLM stream's flow at its response headers (``at_headers``): ``request`` POSTed as JSON, its
    response an event stream of no stated length."""
    flow = at_headers()
    flow.request.method, flow.request.url = "POST", url
    flow.request.content = json.dumps(request).encode()
    del flow.response.headers["content-length"]
    flow.response.headers["content-type"] = "text/event-stream"
    return flow


def through_addon(
    lens,
    body: bytes,
    request: dict,
    headers: dict | None = None,
    *,
    url: str = "https://api.openai.com/v1/chat/completions",
    start: float | None = None,
):
    """One streamed flow to ``url`` (asked at ``start``, if given) through the addon's hooks; every chunk
    must pass unchanged."""
    flow = at_headers()
    flow.request.method, flow.request.url = "POST", url
    if start is not None:
        flow.request.timestamp_start = start
    flow.request.content = json.dumps(request).encode()
    for name, value in (headers or {}).items():
        flow.request.headers[name] = value
    del flow.response.headers["content-length"]
    flow.response.headers["content-type"] = "text/event-stream"
    lens.request(flow)
    lens.responseheaders(flow)
    sent = [body[i : i + 50] for i in range(0, len(body), 50)]
    passed = [flow.response.stream(piece) for piece in sent]
    assert all(a is b for a, b in zip(passed, sent, strict=True))
    flow.response.stream(b"")
    flow.response.raw_content = body
    lens.response(flow)
    return flow
