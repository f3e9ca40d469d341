"""LLM messages that mitmproxy streams itself, with its ``stream_large_bodies`` option (set to keep a proxy's
memory down), in the order its HTTP layer runs the hooks: a message whose ``content-length`` is over the
limit is streamed from its headers' hook on (``flow.response.stream`` already True there), one that grows
past it as it comes is switched to streaming with no hook between, and neither keeps a body. Before, the
addon read such a message's absent body as an empty stream: "malformed-event, truncated-stream", marked,
no calls. Now the first is read from the body the addon keeps as it passes, the second says it was not
read and why, and every chunk still passes as it came."""

from __future__ import annotations

import json

import pytest
from chat_flows import at_headers
from mitmproxy.addons.proxyserver import Proxyserver
from schemas import check_result
from streams import DATA, chat_message

MESSAGE = chat_message([("c1", "search", '{"q": "rbi"}'), ("c2", "get_user", '{"id": 7}')], model="gpt-4.1")
REQUEST = {
    "model": "gpt-4.1",
    "stream": False,
    "tools": [{"type": "function", "function": {"name": name}} for name in ("search", "get_user")],
}
CALLS = [("c1", "search", '{"q": "rbi"}'), ("c2", "get_user", '{"id": 7}')]


@pytest.fixture
def lens(lens):
    """The addon beside mitmproxy's proxy server addon, which declares stream_large_bodies (not started)."""
    lens.tctx.master.addons.add(Proxyserver())
    return lens


def message_flow(status: int = 200, content_type: str = "application/json"):
    """A non-streamed Chat Completions exchange at its response headers, its body not come yet."""
    flow = at_headers()
    flow.request.method, flow.request.url = "POST", "https://api.openai.com/v1/chat/completions"
    flow.request.content = json.dumps(REQUEST).encode()
    flow.response.status_code = status
    flow.response.headers["content-type"] = content_type
    return flow


def pieces(body: bytes, size: int = 64) -> list[bytes]:
    return [body[i : i + size] for i in range(0, len(body), size)]


def streamed_by_mitmproxy(lens, flow, body: bytes) -> dict:
    """Its content-length over stream_large_bodies: mitmproxy sets ``stream`` before the headers' hook,
    then hands each chunk to the callable the hook left there, and keeps no body. The flow's result."""
    flow.response.headers["content-length"] = str(len(body))
    flow.response.stream = True
    lens.responseheaders(flow)
    assert callable(flow.response.stream)
    sent = pieces(body)
    passed = [flow.response.stream(piece) for piece in sent]
    assert all(a is b for a, b in zip(passed, sent, strict=True))  # every chunk as it came
    assert flow.response.stream(b"") == b""
    lens.response(flow)
    result = flow.metadata["toolcall_lens"]
    check_result(result)
    return result


def calls(result) -> list[tuple]:
    return [(c["id"], c["name"], c["arguments"]) for c in result["choices"][0]["tool_calls"]]


def test_a_message_mitmproxy_streams_for_its_length_is_read_from_the_body_it_passes(lens):
    lens.tctx.configure(lens, toolcall_lens_worker=False)
    lens.tctx.options.stream_large_bodies = "100"
    flow = message_flow()
    result = streamed_by_mitmproxy(lens, flow, MESSAGE)  # before: no calls, malformed-event, truncated-stream
    assert result["streamed"] is False and result["complete"] is True
    assert calls(result) == CALLS and result["warnings"] == []
    assert flow.comment == "openai-chat gpt-4.1 (not streamed): 2 calls: search, get_user"
    assert not flow.marked
    assert flow.response.raw_content == MESSAGE  # kept for mitmweb and the dump, as a buffered one is
    assert lens.watches == {}


def test_a_callable_another_addon_set_on_a_message_is_still_honoured(lens):
    seen = []

    def other(chunk: bytes):
        seen.append(chunk)
        return [chunk[:10], chunk[10:]] if chunk else chunk  # in two pieces: the client gets both

    flow = message_flow()
    flow.response.stream = other
    lens.responseheaders(flow)
    sent = pieces(MESSAGE)
    passed = [flow.response.stream(piece) for piece in sent]
    flow.response.stream(b"")
    lens.response(flow)
    assert seen == [*sent, b""]
    assert passed == [[piece[:10], piece[10:]] for piece in sent]
    assert calls(flow.metadata["toolcall_lens"]) == CALLS  # read from what the client got


def test_a_message_that_grew_past_stream_large_bodies_as_it_came_says_it_was_not_read(lens):
    lens.tctx.options.stream_large_bodies = "100"
    flow = message_flow()
    lens.responseheaders(flow)  # chunked, its length unknown: buffered as far as its headers go
    assert not flow.response.stream
    flow.response.stream = True  # then past the limit: mitmproxy streams the rest, with no hook between
    lens.response(flow)  # and keeps no body
    result = flow.metadata["toolcall_lens"]
    check_result(result)
    (warning,) = result["warnings"]  # before: malformed-event and truncated-stream, the flow marked
    assert warning["code"] == "body-not-kept" and warning["severity"] == "info"
    assert warning["option"] == "stream_large_bodies" and warning["limit"] == "100"
    assert "store_streamed_bodies=true" in warning["message"]
    assert result["choices"] == [] and result["streamed"] is False
    assert flow.comment == (
        "openai-chat (not streamed): not read, no body kept (stream_large_bodies=100) | info: body-not-kept"
    )
    assert not flow.marked and flow.response.raw_content is None


def test_with_store_streamed_bodies_mitmproxy_keeps_the_message_and_it_is_read(lens):
    lens.tctx.options.stream_large_bodies = "100"
    lens.tctx.options.store_streamed_bodies = True
    flow = message_flow()
    lens.responseheaders(flow)
    flow.response.stream = True
    flow.response.raw_content = MESSAGE  # what mitmproxy stores at the end, with that option
    lens.response(flow)
    assert calls(flow.metadata["toolcall_lens"]) == CALLS


def test_a_message_over_the_body_cap_keeps_its_first_bytes_and_says_so(lens):
    lens.tctx.configure(lens, toolcall_lens_body_cap=100)
    flow = message_flow()
    result = streamed_by_mitmproxy(lens, flow, MESSAGE)
    truncated = [w for w in result["warnings"] if w["code"] == "body-truncated"]
    assert [(w["kept"], w["seen"]) for w in truncated] == [(100, len(MESSAGE))]
    assert flow.response.raw_content == MESSAGE[:100]


def test_with_no_body_cap_a_streamed_message_is_not_kept_and_says_why(lens):
    lens.tctx.configure(lens, toolcall_lens_body_cap=0)
    flow = message_flow()
    result = streamed_by_mitmproxy(lens, flow, MESSAGE)
    (warning,) = result["warnings"]
    assert (warning["code"], warning["option"], warning["limit"]) == (
        "body-not-kept",
        "toolcall_lens_body_cap",
        0,
    )
    assert flow.response.raw_content is None


def test_an_error_page_mitmproxy_streams_is_read_with_what_it_said(lens):
    page = b"<html><head><title>502 Bad Gateway</title></head><body>upstream gone</body></html>"
    flow = message_flow(502, "text/html")
    flow.request.content = json.dumps({**REQUEST, "stream": True}).encode()
    result = streamed_by_mitmproxy(lens, flow, page)
    (warning,) = result["warnings"]
    assert warning["code"] == "http-error" and "upstream gone" in warning["body"]  # before: an empty body


def test_a_message_cut_by_an_error_is_not_read_and_leaves_nothing_behind(lens):
    flow = message_flow()
    flow.response.stream = True
    lens.responseheaders(flow)
    flow.response.stream(MESSAGE[:50])
    lens.error(flow)  # as a buffered message cut short: no result
    assert "toolcall_lens" not in flow.metadata and lens.watches == {}


def test_a_message_loaded_from_a_file_without_its_body_keeps_what_was_recorded(lens):
    lens.tctx.options.stream_large_bodies = "100"
    flow = message_flow()
    flow.live = False  # as mitmdump -r, mitmweb's File > Open load it: a dump recorded without the addon
    flow.metadata["toolcall_lens"] = recorded = {"recorded": "live"}
    lens.responseheaders(flow)
    lens.response(flow)
    assert flow.metadata["toolcall_lens"] is recorded and flow.response.raw_content is None


PRODUCTION = (DATA / "production_interleaved.sse").read_bytes()
# An agent's request over the limit, declaring one of the two tools its stream calls.
AGENT = json.dumps(
    {
        "model": "gpt-test",
        "stream": True,
        "messages": [{"role": "system", "content": "x" * 5000}, {"role": "user", "content": "go"}],
        "tools": [{"type": "function", "function": {"name": "search_circulars"}}],
    }
).encode()


def streamed_request(lens, body: bytes = AGENT, path: str = "/v1/chat/completions"):
    """A request whose content-length is over stream_large_bodies, as mitmproxy streams it: ``stream`` set
    before the headers' hook, each chunk to the callable left there, no body kept, then the request hook."""
    flow = at_headers()
    flow.request.method, flow.request.url = "POST", f"https://api.openai.com{path}"
    flow.request.content = body
    flow.request.raw_content = None  # mitmproxy keeps none
    flow.request.stream = True
    lens.requestheaders(flow)
    stream = flow.request.stream
    if callable(stream):
        sent = pieces(body, 1000)
        assert all(stream(piece) is piece for piece in sent) and stream(b"") == b""
    lens.request(flow)
    return flow


def test_an_agents_request_mitmproxy_streams_for_its_length_is_kept_and_read(lens):
    lens.tctx.options.stream_large_bodies = "1k"
    flow = streamed_request(lens)
    assert flow.request.raw_content == AGENT  # kept for the checks and the dump, as mitmproxy would have
    del flow.response.headers["content-length"]
    flow.response.headers["content-type"] = "text/event-stream"
    lens.responseheaders(flow)
    for piece in pieces(PRODUCTION):
        flow.response.stream(piece)
    flow.response.stream(b"")
    lens.response(flow)
    result = flow.metadata["toolcall_lens"]
    # The declared tools were read: before, the request was not, and the undeclared call went unsaid.
    undeclared = [w for w in result["warnings"] if w["code"] == "undeclared-tool"]
    assert [w["name"] for w in undeclared] == ["get_user_profile"]


def test_a_request_too_long_for_the_body_cap_is_not_kept_and_its_evidence_says_so(lens):
    lens.tctx.options.stream_large_bodies = "1k"
    lens.tctx.configure(lens, toolcall_lens_body_cap=1000)
    flow = streamed_request(lens)
    assert flow.request.raw_content is None
    del flow.response.headers["content-length"]
    flow.response.headers["content-type"] = "text/event-stream"
    lens.responseheaders(flow)
    flow.response.stream(PRODUCTION)
    flow.response.stream(b"")
    lens.response(flow)
    evidence = flow.metadata["toolcall_lens"]["evidence"]
    # Before: "the request echoes no tool call and answers none", as if it had been read.
    assert (
        evidence["reason"]
        == "the request's body is not there (mitmproxy streamed it on, its stream_large_bodies; or it was stored without it)"
    )


def test_a_request_on_no_llm_path_is_left_to_mitmproxy(lens):
    flow = streamed_request(lens, b"x" * 5000, "/upload")
    assert flow.request.stream is True and flow.request.raw_content is None


def test_once_a_streamed_request_has_gone_what_stood_before_the_watch_is_back_for_a_replay(lens):
    from toolcall_lens.watch import BodyWatch

    lens.tctx.options.stream_large_bodies = "1k"
    flow = streamed_request(lens)
    assert flow.request.stream is True  # mitmproxy's, as it set it
    # A replay (mitmweb's): mitmproxy streams the request again as its stream says, through one new watch
    # keeping this replay's copy, not through the old one (a second copy, and a third at the next).
    flow.is_replay, flow.response = "request", None
    lens.requestheaders(flow)
    watch = flow.request.stream
    assert type(watch) is BodyWatch and watch.inner is None and watch.unseen()
    # Another addon's callable set before the watch is what goes back.
    theirs = lambda chunk: chunk
    flow = at_headers()
    flow.request.method, flow.request.url = "POST", "https://api.openai.com/v1/chat/completions"
    flow.request.raw_content, flow.request.stream = None, theirs
    lens.requestheaders(flow)
    flow.request.stream(AGENT)
    lens.request(flow)
    assert flow.request.stream is theirs and flow.request.raw_content == AGENT
