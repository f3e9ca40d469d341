"""The addon's side of rewriting (toolcall_lens_inject / _repair), with mitmproxy's taddons and tflow: off
by default, LLM streams only, the headers fitted to the new body, the flow's result being what the client
got with the upstream's stream compared."""

from __future__ import annotations

import gzip
import json

import fake_provider
import pytest
from chat_flows import at_headers
from faults import Failing
from mitmproxy import exceptions
from mitmproxy.test import taddons
from schemas import check_result
from websocket_turns import InjectWebSocket, a_turn, answer, response_events, send, ws_flow

import addon as addon_module
from accumulator import analyze
from accumulator.report import format_view
from accumulator.rewrite import StreamRewriter


def stream_flow(fmt: str = "openai-chat", scenario: str = "sequential", **headers):
    flow = at_headers()
    flow.request.path = fake_provider.path(fmt, scenario)
    flow.request.content = fake_provider.request_body(fmt, scenario)
    flow.response.headers["content-type"] = fake_provider.content_type(fmt)
    for name, value in headers.items():
        flow.response.headers[name.replace("_", "-")] = value
    return flow


def run(lens, flow, body: bytes, size: int = 37) -> list[bytes]:
    """Feed ``body`` through the flow's callable in ``size``-byte chunks, then the end; what went out."""
    lens.responseheaders(flow)
    out: list[bytes] = []
    for start in range(0, len(body), size):
        got = flow.response.stream(body[start : start + size])
        out += [got] if isinstance(got, bytes) else got
    got = flow.response.stream(b"")
    out += [got] if isinstance(got, bytes) else got
    lens.response(flow)
    return [piece for piece in out if piece]


def test_off_by_default_the_stream_is_only_watched():
    lens = addon_module.ToolcallLens()
    body = fake_provider.body("openai-chat", "sequential")
    with taddons.context(lens):
        flow = stream_flow()
        out = run(lens, flow, body)
    assert isinstance(flow.response.stream, addon_module.StreamWatch)
    assert b"".join(out) == body
    assert "rewrite" not in flow.metadata["toolcall_lens"]


@pytest.mark.parametrize("option", ["toolcall_lens_inject", "toolcall_lens_repair"])
def test_unknown_transformations_are_refused(option):
    lens = addon_module.ToolcallLens()
    with taddons.context(lens) as tctx, pytest.raises(exceptions.OptionsError, match=option):
        tctx.configure(lens, **{option: ["shuffle"]})


def test_interleave_sends_the_rewriter_output_and_the_flow_tells_both_sides():
    lens = addon_module.ToolcallLens()
    body = fake_provider.body("openai-chat", "sequential")
    with taddons.context(lens) as tctx:
        tctx.configure(lens, toolcall_lens_inject=["interleave"])
        flow = stream_flow()
        out = run(lens, flow, body)
    rewriter = StreamRewriter("openai-chat", inject=["interleave"])
    expected = b"".join([*rewriter.feed(body), *rewriter.finish()])
    assert b"".join(out) == expected != body
    result = flow.metadata["toolcall_lens"]
    # The result is the client's stream: interleaved, so recency breaks; the upstream's was sequential.
    assert result["compatibility"]["recency"]["verdict"] == "breaks"
    rewrite = result["rewrite"]
    assert rewrite["inject"] == ["interleave"] and rewrite["repair"] == []
    assert rewrite["upstream"]["calls_same"] is True
    assert rewrite["upstream"]["compatibility"]["recency"] == "ok"
    assert "rewritten: interleave" in flow.comment
    view = format_view(result)  # what mitmweb's toolcall-lens view shows
    assert "rewritten: injected interleave" in view and "the upstream sent: the same calls" in view
    assert flow.response.raw_content == expected  # the body kept is the one the client got


def test_both_sides_of_a_rewritten_stream_obey_the_call_and_argument_caps():
    lens = addon_module.ToolcallLens()
    with taddons.context(lens) as tctx:
        tctx.configure(
            lens, toolcall_lens_inject=["interleave"], toolcall_lens_max_calls=1, toolcall_lens_argument_cap=5
        )
        flow = stream_flow()
        run(lens, flow, fake_provider.body("openai-chat", "sequential"))
    result = flow.metadata["toolcall_lens"]
    # The client's side: one call of two kept, its arguments cut at 5 characters.
    assert [
        (c["name"], c["arguments"], c["arguments_truncated"]) for c in result["choices"][0]["tool_calls"]
    ] == [("get_weather", '{"cit', True)]
    assert {"calls-cap", "arguments-cap"} <= {w["code"] for w in result["warnings"]}
    # The upstream's side, under the same caps: the same call kept, so the same calls.
    upstream = result["rewrite"]["upstream"]
    assert {"calls-cap", "arguments-cap"} <= set(upstream["warnings"])
    assert upstream["calls_same"] is True
    # Past its call cap the rewriting stopped, and the rest passed as it came: said, not only recorded.
    stopped = result["rewrite"]["stopped"]
    assert stopped["reason"] == "more than 1 tool calls: the rest passes as it is"
    assert flow.comment.endswith("rewritten: interleave (STOPPED)")
    assert f"; STOPPED after {stopped['after_events']} events: more than 1 tool calls" in format_view(result)
    check_result(result)


# toolcall_lens_rewrite_filter: one proxy on both sides of a gateway rewrites only what its provider sends it.
GATEWAY_FILTER = "~d api.anthropic.com"


@pytest.mark.parametrize(
    ("host", "rewritten"), [("api.anthropic.com", True), ("127.0.0.1", False)], ids=["matches", "does-not"]
)
def test_the_rewrite_filter_picks_the_flows_rewritten_and_leaves_the_rest_watched(host, rewritten):
    lens = addon_module.ToolcallLens()
    body = fake_provider.body("anthropic-messages", "sequential")
    with taddons.context(lens) as tctx:
        tctx.configure(lens, toolcall_lens_inject=["interleave"], toolcall_lens_rewrite_filter=GATEWAY_FILTER)
        flow = stream_flow("anthropic-messages")
        flow.request.host = host
        out = run(lens, flow, body)
    result = flow.metadata["toolcall_lens"]
    assert (b"".join(out) != body) is rewritten
    assert isinstance(flow.response.stream, addon_module.RewriteWatch) is rewritten
    # A flow the filter leaves out is only watched: no rewrite, and no note of one skipped either.
    assert ("rewrite" in result) is rewritten
    assert (result["compatibility"]["recency"]["verdict"] == "breaks") is rewritten
    assert ("rewritten: interleave" in flow.comment) is rewritten


@pytest.mark.parametrize(("host", "rewritten"), [("api.openai.com", True), ("gateway.local", False)])
def test_the_rewrite_filter_picks_the_connections_rewritten(host, rewritten):
    lens = addon_module.ToolcallLens()
    injector = InjectWebSocket(lens)
    with taddons.context(lens, injector) as tctx:
        tctx.configure(lens, toolcall_lens_inject=["interleave"], toolcall_lens_rewrite_filter="~d openai")
        flow = ws_flow(host=host)
        lens.websocket_start(flow)
        a_turn(lens, flow, calls=2)
        send(lens, flow, True, answer("r1", 2))
        lens.websocket_end(flow)
    assert bool(injector.flows) is rewritten
    assert any(m.dropped for m in flow.websocket.messages) is rewritten
    assert ("rewrite" in flow.metadata["toolcall_lens"]) is rewritten


@pytest.mark.parametrize("expression", ["~d", "~q ~~", "(~d x"])
def test_a_rewrite_filter_that_does_not_parse_is_refused(expression):
    lens = addon_module.ToolcallLens()
    with taddons.context(lens) as tctx, pytest.raises(exceptions.OptionsError, match="rewrite_filter"):
        tctx.configure(lens, toolcall_lens_rewrite_filter=expression)


def test_interleave_then_serialize_gives_a_stream_recency_reads_right():
    lens = addon_module.ToolcallLens()
    with taddons.context(lens) as tctx:
        tctx.configure(lens, toolcall_lens_inject=["interleave"], toolcall_lens_repair=["serialize"])
        flow = stream_flow()
        run(lens, flow, fake_provider.body("openai-chat", "sequential"))
    result = flow.metadata["toolcall_lens"]
    assert result["compatibility"]["recency"]["verdict"] == "ok"
    assert result["rewrite"]["repair"] == ["serialize"]


@pytest.mark.parametrize("inject", [[], ["interleave"]], ids=["watched", "rewritten"])
def test_a_stream_callable_set_before_ours_sees_the_upstreams_bytes_and_is_honoured(inject):
    # Another addon's callable, set before ours, renames a tool: it must see what the provider sent,
    # and what it returns is what we analyse, rewrite and send on.
    lens = addon_module.ToolcallLens()
    body = fake_provider.body("openai-chat", "sequential")
    seen: list[bytes] = []

    def rename(data: bytes) -> bytes:
        seen.append(data)
        return data.replace(b"get_weather", b"get_WEATHER")

    with taddons.context(lens) as tctx:
        tctx.configure(lens, toolcall_lens_inject=inject)
        flow = stream_flow()
        flow.response.stream = rename
        out = run(lens, flow, body, size=len(body))  # one chunk: the rename cannot fall across two
    assert b"".join(seen) == body
    assert b"get_WEATHER" in b"".join(out) and b"get_weather" not in b"".join(out)
    result = flow.metadata["toolcall_lens"]
    assert [c["name"] for c in result["choices"][0]["tool_calls"]] == ["get_WEATHER", "get_time"]
    if inject:
        assert result["rewrite"]["inject"] == inject and result["rewrite"]["upstream"]["calls_same"] is True


def test_a_compressed_stream_goes_out_encoded_again_and_its_headers_fit():
    lens = addon_module.ToolcallLens()
    body = fake_provider.body("openai-chat", "sequential")
    with taddons.context(lens) as tctx:
        tctx.configure(lens, toolcall_lens_inject=["split-names"])
        flow = stream_flow(content_encoding="gzip", content_length=str(len(gzip.compress(body))))
        flow.request.http_version = "HTTP/1.1"
        out = run(lens, flow, gzip.compress(body), size=64)
    headers = flow.response.headers
    # Encoded again the same way, each write flushed; only the length, which changed, is gone.
    assert headers["content-encoding"] == "gzip" and "content-length" not in headers
    assert headers["transfer-encoding"] == "chunked"
    client = analyze(gzip.decompress(b"".join(out)), "openai-chat")
    assert [(c["id"], c["name"], c["arguments"]) for c in client["choices"][0]["tool_calls"]] == [
        (c["id"], c["name"], c["arguments"]) for c in fake_provider.expected_calls("sequential")
    ]
    result = flow.metadata["toolcall_lens"]
    assert result["rewrite"]["decoded"] == "gzip" and result["rewrite"]["reencoded"]
    assert "name-split" in [w["code"] for w in result["warnings"]]  # the client's stream, decoded to read it
    assert flow.response.raw_content == b"".join(out)  # kept as sent: encoded


def test_streams_it_cannot_rewrite_are_only_watched():
    lens = addon_module.ToolcallLens()
    with taddons.context(lens) as tctx:
        tctx.configure(lens, toolcall_lens_inject=["interleave", "split-names"])
        # Gemini sends whole calls: nothing to interleave or split.
        gemini = stream_flow("gemini")
        lens.responseheaders(gemini)
        # An encoding the core cannot decode: the body could not be rewritten without breaking it.
        odd = stream_flow(content_encoding="compress")
        lens.responseheaders(odd)
    assert isinstance(gemini.response.stream, addon_module.StreamWatch)
    assert isinstance(odd.response.stream, addon_module.StreamWatch)
    assert odd.response.headers["content-encoding"] == "compress"


def test_rechunk_sends_many_writes_that_join_to_the_same_bytes():
    lens = addon_module.ToolcallLens()
    body = fake_provider.body("anthropic-messages", "unicode")
    with taddons.context(lens) as tctx:
        tctx.configure(lens, toolcall_lens_inject=["rechunk"])
        flow = stream_flow("anthropic-messages", "unicode")
        out = run(lens, flow, body, size=len(body))  # one chunk in ...
    assert b"".join(out) == body and len(out) > 50  # ... many writes out
    assert flow.metadata["toolcall_lens"]["rewrite"]["upstream"]["calls_same"] is True


def test_a_failing_rewriter_lets_the_bytes_through():
    lens = addon_module.ToolcallLens()
    body = fake_provider.body("openai-chat", "sequential")
    with taddons.context(lens) as tctx:
        tctx.configure(lens, toolcall_lens_inject=["interleave"])
        flow = stream_flow()
        lens.responseheaders(flow)
        watch = flow.response.stream

        class Broken:
            def feed(self, data):
                raise RuntimeError("boom")

            finish = feed

            def report(self):
                return {"inject": [], "repair": [], "skipped": []}

        watch.rewriter = Broken()
        assert watch(body) == [body]
        assert watch(b"") == []
        lens.response(flow)
    result = flow.metadata["toolcall_lens"]
    assert "RuntimeError: boom" in result["rewrite"]["failure"]

    # The client got the stream as it came, and the result reads it (not an empty, cut-short stream).
    def calls(r):
        return [(c["id"], c["name"], c["arguments"]) for c in r["choices"][0]["tool_calls"]]

    assert result["complete"] and calls(result) == calls(analyze(body, "openai-chat")) != []
    # Said where a person looks: the comment and the report.
    assert flow.comment.endswith("rewritten: nothing applied (FAILED)")  # the stand-in applied nothing
    assert "; FAILED: RuntimeError: boom (the rest passed as it came)" in format_view(result)
    check_result(result)


def test_a_rewriter_whose_report_fails_leaves_a_rewrite_entry_that_says_so():
    lens = addon_module.ToolcallLens()
    body = fake_provider.body("openai-chat", "sequential")
    with taddons.context(lens) as tctx:
        tctx.configure(lens, toolcall_lens_inject=["interleave"])
        flow = stream_flow()
        lens.responseheaders(flow)
        watch = flow.response.stream
        watch.rewriter = Failing(watch.rewriter, "report", RuntimeError("no report"))
        watch(body)
        watch(b"")
        lens.response(flow)
    result = flow.metadata["toolcall_lens"]
    assert result["rewrite"] == {
        "inject": [],
        "repair": [],
        "skipped": [],
        "failure": "RuntimeError: no report",
    }
    check_result(result)  # the entry has what the schema asks of every rewrite entry
    assert flow.comment.endswith("rewritten: nothing applied (FAILED)")


def test_a_failing_upstream_analysis_does_not_stop_the_rewriting():
    # Held fragments must still leave in order: only the comparison with the upstream is lost.
    lens = addon_module.ToolcallLens()
    body = fake_provider.body("openai-chat", "sequential")
    with taddons.context(lens) as tctx:
        tctx.configure(lens, toolcall_lens_inject=["interleave"])
        flow = stream_flow()
        lens.responseheaders(flow)
        watch = flow.response.stream
        watch.upstream = Failing(watch.upstream, "feed", RuntimeError("boom"))
        out = [piece for start in range(0, len(body), 50) for piece in watch(body[start : start + 50])]
        out += watch(b"")
        lens.response(flow)
    rewriter = StreamRewriter("openai-chat", inject=["interleave"])
    assert b"".join(out) == b"".join([*rewriter.feed(body), *rewriter.finish()])
    rewrite = flow.metadata["toolcall_lens"]["rewrite"]
    assert "RuntimeError: boom" in rewrite["upstream_failure"] and "upstream" not in rewrite
    assert "the upstream's own stream could not be analysed: RuntimeError: boom" in format_view(
        flow.metadata["toolcall_lens"]
    )


def test_a_rewrite_that_does_not_apply_says_so_on_the_flow_and_in_the_log(caplog):
    lens = addon_module.ToolcallLens()
    body = fake_provider.body("gemini", "interleaved")
    with taddons.context(lens) as tctx, caplog.at_level("INFO", logger="toolcall_lens"):
        tctx.configure(lens, toolcall_lens_inject=["interleave"])
        flow = stream_flow("gemini", "interleaved")
        out = run(lens, flow, body)
    assert b"".join(out) == body  # untouched
    rewrite = flow.metadata["toolcall_lens"]["rewrite"]
    assert (rewrite["inject"], rewrite["repair"]) == ([], [])
    assert [entry["name"] for entry in rewrite["skipped"]] == ["interleave"]
    assert "whole" in rewrite["skipped"][0]["reason"]
    assert "rewritten: nothing applied" in flow.comment
    assert any("not rewriting" in r.getMessage() and "interleave" in r.getMessage() for r in caplog.records)


def test_rechunk_on_a_whole_call_format_counts_the_events_that_passed():
    lens = addon_module.ToolcallLens()
    body = fake_provider.body("gemini", "interleaved")
    with taddons.context(lens) as tctx:
        tctx.configure(lens, toolcall_lens_inject=["rechunk"])
        flow = stream_flow("gemini", "interleaved")
        out = run(lens, flow, body, size=len(body))
    rewrite = flow.metadata["toolcall_lens"]["rewrite"]
    events = flow.metadata["toolcall_lens"]["stats"]["events"]
    assert b"".join(out) == body and len(out) > 1
    assert rewrite["events_in"] == rewrite["events_out"] == events > 0


def test_a_websocket_message_the_rewriter_fails_on_still_reaches_the_client_and_the_rest_pass_as_they_come():
    # Every server message of a rewritten connection is dropped and the rewriter's output injected in its
    # place: a message it failed on must be injected as it came, and the ones after it not dropped at all.
    lens = addon_module.ToolcallLens()
    injector = InjectWebSocket(lens)
    with taddons.context(lens, injector) as tctx:
        tctx.configure(lens, toolcall_lens_inject=["interleave"])
        flow = ws_flow()
        lens.websocket_start(flow)
        send(lens, flow, True, {"type": "response.create", "model": "m"})
        events = response_events("r1", 2)
        send(lens, flow, False, events[0])
        watch = lens.sockets[flow.id]
        watch.rewriter = Failing(watch.rewriter, "feed", RuntimeError("boom"))
        failed_on = send(lens, flow, False, events[1])
        rest = [send(lens, flow, False, event) for event in events[2:]]
        lens.websocket_end(flow)
    assert failed_on.dropped and [m.content for m in flow.websocket.messages if m.injected][-1:] == [
        failed_on.content
    ]
    assert not any(m.dropped for m in rest)
    # What the client got: every server message once, in order.
    got = [m.content for m in flow.websocket.messages if not m.from_client and (m.injected or not m.dropped)]
    assert got == [json.dumps(e).encode() for e in events]
    record = flow.metadata["toolcall_lens"]
    assert "RuntimeError: boom" in json.dumps(record)
