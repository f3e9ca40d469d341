"""A response whose body is all there at its headers: a flow loaded from a file (``mitmdump -r``, mitmweb's
File > Open) or one an addon answered before it went upstream (``--server-replay``, a mock). No stream
callable sees it: the addon reads it whole, as the CLI reads a dump's flow, and leaves its body as it is.

Before, the addon opened a watch on it as on a live stream; the watch saw no byte, and its empty record
took the body's place: the agent behind a server replay got an empty response, a loaded dump lost its
bodies, and the result said "no calls, truncated"."""

from __future__ import annotations

import copy
import json

import fake_provider
import pytest
from chat_flows import chat_stream, follow_up
from mitmproxy import eventsequence, http
from mitmproxy.test import tflow
from mitmproxy.websocket import WebSocketMessage
from schemas import check_result
from streams import DATA
from websocket_turns import response_events, ws_flow
from wsproto.frame_protocol import Opcode

from accumulator import analyze
from accumulator.report import format_view
from accumulator.rewrite import StreamRewriter

PRODUCTION = (DATA / "production_interleaved.sse").read_bytes()
REQUEST = json.loads((DATA / "production_request.json").read_text())


def lifecycle(lens, flow) -> None:
    """The hooks mitmproxy runs for a flow it loads (``master.load_flow``), in its order."""
    for event in eventsequence.iterate(flow):
        lens.tctx.master.addons.invoke_addon_sync(lens, event)


def whole_flow(format: str, body: bytes, request: bytes, *, live: bool, path: str | None = None):
    """A flow whose response carries its whole body: loaded from a file (``live`` False) or answered by an
    addon (``live``)."""
    flow = tflow.tflow(resp=True, live=live)
    flow.request.method, flow.request.host = "POST", "api.example.com"
    flow.request.path = path or fake_provider.path(format, "interleaved")
    flow.request.content = request
    flow.response = http.Response.make(200, body, {"content-type": fake_provider.content_type(format)})
    return flow


def calls(result: dict) -> list[tuple]:
    return [(c["id"], c["name"], c["arguments"]) for ch in result["choices"] for c in ch["tool_calls"]]


@pytest.mark.parametrize("format", fake_provider.FORMATS)
def test_a_flow_loaded_from_a_file_is_read_whole_and_keeps_its_body(lens, format):
    body = fake_provider.body(format, "interleaved")
    flow = whole_flow(format, body, fake_provider.request_body(format, "interleaved"), live=False)
    lifecycle(lens, flow)
    assert flow.response.raw_content == body  # not the empty record of a watch that saw nothing
    assert not callable(flow.response.stream)
    result = flow.metadata["toolcall_lens"]
    check_result(result)
    expected = fake_provider.expected_calls("interleaved", format)
    got = result["choices"][0]["tool_calls"]
    assert [(c["name"], json.loads(c["arguments"])) for c in got] == [
        (c["name"], json.loads(c["arguments"])) for c in expected
    ]
    assert result["complete"] is True
    assert result["source"]["read"] == "whole: loaded from a file"
    assert flow.comment.startswith(result["format"])


def test_a_response_an_addon_answered_goes_out_as_it_came_and_is_read_whole(lens):
    flow = whole_flow("openai-chat", PRODUCTION, json.dumps(REQUEST).encode(), live=True)
    flow.response.headers["content-length"] = str(len(PRODUCTION))
    before = flow.response.get_state()
    lens.request(flow)
    lens.responseheaders(flow)  # mitmproxy runs it for an answered response too
    assert not callable(flow.response.stream)
    lens.response(flow)
    # What mitmproxy then sends the client: the response as the addon (server replay) set it.
    assert flow.response.get_state() == before
    result = flow.metadata["toolcall_lens"]
    check_result(result)
    core = analyze(PRODUCTION, request=REQUEST)
    assert calls(result) == calls(core)
    assert [w["code"] for w in result["warnings"]] == ["recency-misroute"]
    assert flow.marked
    assert result["source"]["read"] == "whole: answered by an addon"
    assert "flow's timestamps" in result["source"]["timing"]
    # What mitmweb's toolcall-lens view and toolcall.report say of it.
    assert "read whole: answered by an addon, from its stored body" in format_view(result)


def test_a_loaded_flow_the_addon_recorded_live_keeps_the_timing_it_measured(lens):
    recorded_flow = whole_flow("openai-chat", PRODUCTION, json.dumps(REQUEST).encode(), live=False)
    lifecycle(lens, recorded_flow)
    record = copy.deepcopy(recorded_flow.metadata["toolcall_lens"])
    record["timing"] = {**record["timing"], "time_to_first_token": 0.25, "longest_gap": 1.5}
    for call in record["choices"][0]["tool_calls"]:
        call["first_at"], call["last_at"] = 0.3, 0.9
    loaded = whole_flow("openai-chat", PRODUCTION, json.dumps(REQUEST).encode(), live=False)
    loaded.metadata["toolcall_lens"] = record
    lifecycle(lens, loaded)
    result = loaded.metadata["toolcall_lens"]
    assert result["timing"]["time_to_first_token"] == 0.25 and result["timing"]["longest_gap"] == 1.5
    assert {(c["first_at"], c["last_at"]) for c in result["choices"][0]["tool_calls"]} == {(0.3, 0.9)}
    assert result["source"]["timing"].startswith("recorded live by the addon")


def test_a_loaded_stream_stored_without_its_body_keeps_its_record(lens):
    flow = whole_flow("openai-chat", PRODUCTION, json.dumps(REQUEST).encode(), live=False)
    lifecycle(lens, flow)
    record, comment = copy.deepcopy(flow.metadata["toolcall_lens"]), flow.comment
    stored = whole_flow("openai-chat", b"", json.dumps(REQUEST).encode(), live=False)
    stored.response.raw_content = None  # recorded by a mitmdump that kept no streamed body
    stored.metadata["toolcall_lens"], stored.comment = copy.deepcopy(record), comment
    lifecycle(lens, stored)
    assert stored.response.raw_content is None
    assert stored.metadata["toolcall_lens"] == record and stored.comment == comment


def test_loaded_turns_are_placed_in_their_session_as_live_ones(lens):
    turn1 = [("call_1", "get_weather", '{"city": "Paris"}')]
    first = whole_flow(
        "openai-chat", chat_stream(turn1), json.dumps(follow_up([])).encode(), live=False,
        path="/v1/chat/completions",
    )  # fmt: skip
    second = whole_flow(
        "openai-chat", chat_stream([]), json.dumps(follow_up([turn1])).encode(), live=False,
        path="/v1/chat/completions",
    )  # fmt: skip
    lifecycle(lens, first)
    lifecycle(lens, second)
    one, two = first.metadata["toolcall_lens"], second.metadata["toolcall_lens"]
    assert two["session"]["id"] == one["session"]["id"]
    assert (one["session"]["turn"], two["session"]["turn"]) == (1, 2)
    assert [r["id"] for r in two["session"]["tool_results"]] == ["call_1"]


def test_a_loaded_websocket_flow_keeps_every_message_and_is_never_rewritten(lens):
    lens.tctx.configure(lens, toolcall_lens_websocket_keep=2, toolcall_lens_inject=["interleave"])
    flow = ws_flow()
    flow.live = False
    for rid in ("r1", "r2", "r3"):
        flow.websocket.messages.append(_message(True, {"type": "response.create", "model": "m"}))
        for event in response_events(rid, 2):
            flow.websocket.messages.append(_message(False, event))
    before = [(m.from_client, m.content) for m in flow.websocket.messages]
    lifecycle(lens, flow)  # no inject.websocket command here: a rewrite would have failed loudly
    assert [(m.from_client, m.content) for m in flow.websocket.messages] == before
    record = flow.metadata["toolcall_lens"]
    assert [len(calls(r)) for r in record["responses"]] == [2, 2, 2]
    assert "rewrite" not in record and not record.get("connection", {}).get("trimmed")


def _message(from_client: bool, obj: dict) -> WebSocketMessage:
    return WebSocketMessage(Opcode.TEXT, from_client, json.dumps(obj).encode())


def test_a_replayed_response_is_rewritten_whole_before_it_goes_out_as_its_stream_would_be(lens):
    # `mitmdump --server-replay session.flows --set toolcall_lens_inject=interleave`: the recorded session
    # played to the agent with the hostile shape, no provider needed.
    lens.tctx.configure(lens, toolcall_lens_inject=["interleave"])
    body = fake_provider.body("openai-chat", "sequential")
    flow = whole_flow("openai-chat", body, fake_provider.request_body("openai-chat", "sequential"), live=True)
    flow.response.headers["content-length"] = str(len(body))
    lens.request(flow)
    lens.responseheaders(flow)
    lens.response(flow)
    rewriter = StreamRewriter("openai-chat", inject=["interleave"])
    expected = b"".join([*rewriter.feed(body), *rewriter.finish()])
    assert flow.response.raw_content == expected != body  # what mitmproxy sends the client next
    assert "content-length" not in flow.response.headers  # fitted: the length changed
    result = flow.metadata["toolcall_lens"]
    check_result(result)
    assert (
        result["rewrite"]["inject"] == ["interleave"] and result["rewrite"]["upstream"]["calls_same"] is True
    )
    assert result["compatibility"]["recency"]["verdict"] == "breaks"  # the client's side: interleaved


def test_a_replayed_response_a_rewrite_does_not_fit_goes_out_as_it_came_and_says_why(lens):
    lens.tctx.configure(lens, toolcall_lens_inject=["split-names"])  # Gemini sends each name whole
    body = fake_provider.body("gemini", "interleaved")
    flow = whole_flow("gemini", body, fake_provider.request_body("gemini", "interleaved"), live=True)
    lens.responseheaders(flow)
    lens.response(flow)
    assert flow.response.raw_content == body
    (skipped,) = flow.metadata["toolcall_lens"]["rewrite"]["skipped"]
    assert skipped["name"] == "split-names" and skipped["reason"]


def test_a_flow_loaded_from_a_file_is_never_rewritten(lens):
    lens.tctx.configure(lens, toolcall_lens_inject=["interleave"])
    body = fake_provider.body("openai-chat", "sequential")
    flow = whole_flow(
        "openai-chat", body, fake_provider.request_body("openai-chat", "sequential"), live=False
    )
    lifecycle(lens, flow)
    assert flow.response.raw_content == body
    assert "rewrite" not in flow.metadata["toolcall_lens"]


@pytest.mark.parametrize("inject", [["rechunk"], ["interleave", "rechunk"]])
def test_rechunk_has_no_writes_to_cut_in_a_replayed_response_and_its_result_says_so(lens, inject):
    lens.tctx.configure(lens, toolcall_lens_inject=inject)
    body = fake_provider.body("openai-chat", "sequential")
    flow = whole_flow("openai-chat", body, fake_provider.request_body("openai-chat", "sequential"), live=True)
    lens.responseheaders(flow)
    lens.response(flow)
    rest = [name for name in inject if name != "rechunk"]
    rewriter = StreamRewriter("openai-chat", inject=rest)
    assert flow.response.raw_content == b"".join([*rewriter.feed(body), *rewriter.finish()])
    rewrite = flow.metadata["toolcall_lens"]["rewrite"]
    assert rewrite["inject"] == rest
    (rechunk,) = [entry for entry in rewrite["skipped"] if entry["name"] == "rechunk"]
    assert "goes out in one piece" in rechunk["reason"]
    check_result(flow.metadata["toolcall_lens"])
    assert not lens.whole_skips


def test_the_proxys_end_forgets_a_replayed_responses_skipped_rewrite_whose_end_never_came(lens):
    lens.tctx.configure(lens, toolcall_lens_inject=["rechunk"])
    body = fake_provider.body("openai-chat", "sequential")
    flow = whole_flow("openai-chat", body, fake_provider.request_body("openai-chat", "sequential"), live=True)
    lens.responseheaders(flow)  # the proxy stops before its response hook
    assert list(lens.whole_skips) == [flow.id]
    lens.done()
    assert not lens.whole_skips
