"""Another addon that sets ``flow.response.stream`` after this one did (loaded after it: ``-s addon.py -s
theirs.py``; a common script sets ``True`` on every event stream so that mitmproxy does not buffer it)
takes the addon's watch's place: no byte reaches the watch. Before, the addon then read nothing as an
empty stream ("truncated-stream", marked) and put an empty body in the flow. Now the flow says the stream
passed unseen and why (``stream-not-seen``), its body is left as mitmproxy has it, and with
``store_streamed_bodies`` it is read from the body mitmproxy kept. An addon that calls the callable it
finds is no replacement: the stream is read as usual."""

from __future__ import annotations

import json

import pytest
from chat_flows import stream_flow
from mitmproxy.addons.proxyserver import Proxyserver
from schemas import check_result
from streams import DATA, chat_message

PRODUCTION = (DATA / "production_interleaved.sse").read_bytes()
REQUEST = json.loads((DATA / "production_request.json").read_text())
CALLED = ["search_circulars", "get_user_profile"]


@pytest.fixture
def lens(lens):
    """The addon beside mitmproxy's proxy server addon (its stream options declared; not started)."""
    lens.tctx.master.addons.add(Proxyserver())
    return lens


def pieces(body: bytes) -> list[bytes]:
    return [body[i : i + 41] for i in range(0, len(body), 41)]


def through(lens, flow, theirs, body: bytes = PRODUCTION) -> dict | None:
    """The addon's headers hook, then the later addon's (``theirs``: what it sets), then the body as
    mitmproxy passes it: to the callable in place at the end of the hooks, if any. The flow's result."""
    lens.responseheaders(flow)
    flow.response.stream = theirs(flow.response.stream)
    stream = flow.response.stream
    if callable(stream):
        for piece in pieces(body):
            stream(piece)
        stream(b"")
    lens.response(flow)
    return flow.metadata.get("toolcall_lens")


def names(result) -> list[str]:
    return [c["name"] for c in result["choices"][0]["tool_calls"]]


@pytest.mark.parametrize("theirs", ["True", "its own callable"])
def test_a_stream_whose_watch_another_addon_replaced_says_it_passed_unseen(lens, theirs):
    flow = stream_flow(REQUEST)
    result = through(lens, flow, lambda ours: True if theirs == "True" else (lambda chunk: chunk))
    check_result(result)
    (warning,) = result["warnings"]  # before: truncated-stream, as if the provider had cut it
    assert warning["code"] == "stream-not-seen" and warning["severity"] == "warning"
    assert "-s theirs.py -s addon.py" in warning["message"]
    assert result["choices"] == [] and result["complete"] is False
    assert flow.comment == (
        "openai-chat: not seen, its stream callable replaced by another addon | warning: stream-not-seen"
    )
    assert flow.marked == ":warning:"
    assert flow.response.raw_content is None  # before: b"", the watch's empty record put in its place
    assert lens.watches == {}


def test_an_addon_that_calls_the_callable_it_finds_replaces_nothing(lens):
    seen = []

    def chaining(ours):
        def theirs(chunk):
            seen.append(chunk)
            return ours(chunk)

        return theirs

    flow = stream_flow(REQUEST)
    result = through(lens, flow, chaining)
    assert names(result) == CALLED and [w["code"] for w in result["warnings"]] == ["recency-misroute"]
    assert flow.response.raw_content == PRODUCTION and len(seen) == len(pieces(PRODUCTION)) + 1


def test_with_store_streamed_bodies_a_replaced_watchs_stream_is_read_from_the_body_mitmproxy_kept(lens):
    lens.tctx.options.store_streamed_bodies = True
    flow = stream_flow(REQUEST)
    lens.responseheaders(flow)
    flow.response.stream = True
    flow.response.raw_content = PRODUCTION  # what mitmproxy stores at the end, with that option
    lens.response(flow)
    result = flow.metadata["toolcall_lens"]
    check_result(result)
    assert names(result) == CALLED and [w["code"] for w in result["warnings"]] == ["recency-misroute"]
    assert result["source"]["read"] == "whole: its stream callable replaced by another addon"
    assert flow.response.raw_content == PRODUCTION


def test_a_rewrite_whose_watch_another_addon_replaced_says_it_passed_unseen(lens):
    lens.tctx.configure(lens, toolcall_lens_inject=["interleave"])
    flow = stream_flow(REQUEST)
    result = through(lens, flow, lambda ours: True)
    assert [w["code"] for w in result["warnings"]] == ["stream-not-seen"]  # nothing was rewritten either


def test_a_message_whose_watch_another_addon_replaced_says_it_passed_unseen(lens):
    lens.tctx.options.stream_large_bodies = "100"
    message = chat_message([("c1", "search", "{}")], model="gpt-4.1")
    flow = stream_flow(REQUEST)
    flow.request.content = json.dumps({**REQUEST, "stream": False}).encode()
    flow.response.headers["content-type"] = "application/json"
    flow.response.headers["content-length"] = str(len(message))
    flow.response.stream = True  # mitmproxy's own, for its length
    result = through(lens, flow, lambda ours: lambda chunk: chunk, message)
    check_result(result)
    assert [w["code"] for w in result["warnings"]] == ["stream-not-seen"] and result["streamed"] is False
    assert flow.comment.startswith("openai-chat (not streamed): not seen, its stream callable replaced")


def test_a_message_another_addon_streams_after_the_addons_hook_says_it_passed_unseen(lens):
    flow = stream_flow(REQUEST)
    flow.request.content = json.dumps({**REQUEST, "stream": False}).encode()
    flow.response.headers["content-type"] = "application/json"
    lens.responseheaders(flow)  # buffered as far as the addon can tell: no watch
    flow.response.stream = True  # then a later addon streams it, without stream_large_bodies
    lens.response(flow)
    result = flow.metadata["toolcall_lens"]
    assert [w["code"] for w in result["warnings"]] == ["stream-not-seen"]
