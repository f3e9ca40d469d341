"""The addon's hooks and the rewriter: what a mutation run found untested (the logic survivors of ``addon.py``
and ``accumulator/rewrite/``; see docs/mutation.md). Each test was checked by applying the mutation it
guards against to the source by hand and seeing it fail."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from chat_flows import at_headers, chat_stream, follow_up, through_addon
from faults import Failing
from mitmproxy import exceptions
from mitmproxy import flow as mflow
from mitmproxy.test import taddons, tflow
from streams import chat_message
from websocket_turns import InjectWebSocket, a_turn, answer, response_events, send, ws_flow

import addon as addon_module
from accumulator import analyze
from accumulator.rewrite import StreamRewriter, reorder
from accumulator.rewrite.formats import skip_reason
from accumulator.rewrite.messages import MessageRewriter

SEARCH = ("call_1", "search", '{"q": "rbi"}')


def lens_records(caplog) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "toolcall_lens"]


def json_flow(request: dict, body: bytes, path: str = "/v1/chat/completions"):
    """A buffered (not streamed) Chat Completions exchange, as mitmproxy hands it to ``response``."""
    flow = tflow.tflow(resp=True)
    flow.request.method, flow.request.host, flow.request.path = "POST", "api.openai.com", path
    flow.request.content = json.dumps(request).encode()
    flow.response.headers["content-type"] = "application/json"
    flow.response.content = body
    return flow


MESSAGE = chat_message([("call_1", "search", "{}")], model="gpt-4o")


# --- request: the echo check (request_3, _6, _13, _16, _17, _18, _21) --------------------------------------


def test_a_request_on_a_path_no_format_owns_is_not_checked_and_logs_nothing(lens, caplog):
    caplog.set_level(logging.INFO, logger="toolcall_lens")
    flow = tflow.tflow()
    flow.request.path = "/health"
    lens.request(flow)
    assert lens_records(caplog) == []


def test_the_echo_check_honours_the_host_filter(lens):
    lens.tctx.configure(lens, toolcall_lens_hosts=["api.openai.com"])
    flow = through_addon(lens, chat_stream([]), follow_up([[SEARCH]]))
    assert flow.metadata["toolcall_lens"]["evidence"]["checked"] == 2  # the echoed call and its result


def test_a_request_whose_content_encoding_lies_is_still_read_as_it_came(lens):
    # Content-Encoding says gzip, the body is plain JSON: mitmproxy's lenient read passes it as it is.
    earlier = through_addon(lens, chat_stream([SEARCH]), follow_up([]))
    flow = at_headers()
    flow.request.method, flow.request.host, flow.request.path = (
        "POST",
        "api.openai.com",
        "/v1/chat/completions",
    )
    flow.request.content = json.dumps(follow_up([[SEARCH]])).encode()
    flow.request.headers["content-encoding"] = "gzip"
    del flow.response.headers["content-length"]
    flow.response.headers["content-type"] = "text/event-stream"
    lens.request(flow)
    lens.responseheaders(flow)
    body = chat_stream([])
    flow.response.stream(body)
    flow.response.stream(b"")
    lens.response(flow)
    evidence = flow.metadata["toolcall_lens"]["evidence"]
    assert evidence["checked"] == 2 and evidence["matched"] == 1 and earlier.id in evidence["earlier_flows"]
    # A buffered response reads the same request the same way.
    buffered = json_flow(follow_up([[SEARCH]]), MESSAGE)
    buffered.request.headers["content-encoding"] = "gzip"
    lens.request(buffered)
    lens.response(buffered)
    result = buffered.metadata["toolcall_lens"]
    assert [c["name"] for c in result["choices"][0]["tool_calls"]] == ["search"]
    assert result["evidence"]["checked"] == 2


def test_a_failed_echo_check_logs_one_warning_naming_the_error(lens, monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="toolcall_lens")
    monkeypatch.setattr(lens, "observed", Failing(lens.observed, "examine", RecursionError("too deep")))
    flow = tflow.tflow()
    flow.request.method, flow.request.host, flow.request.path = (
        "POST",
        "api.openai.com",
        "/v1/chat/completions",
    )
    flow.request.content = json.dumps(follow_up([[SEARCH]])).encode()
    lens.request(flow)
    assert lens_records(caplog) == [
        (logging.WARNING, "toolcall-lens: echo check failed: RecursionError: too deep")
    ]


# --- response: a buffered message whose analysis raised (response_44 .. _52) --------------------------------


def test_a_message_whose_analysis_raises_gets_a_failure_result_naming_the_error(lens, monkeypatch):
    def broken(*_args, **_kwargs):
        raise RuntimeError("core bug")

    monkeypatch.setattr(addon_module, "analyze_exchange", broken)  # addon.py is never compiled
    flow = json_flow({"model": "gpt-4o", "messages": []}, MESSAGE)
    lens.response(flow)
    result = flow.metadata["toolcall_lens"]
    assert (result["format"], result["streamed"]) == ("openai-chat", False)
    (warning,) = result["warnings"]
    assert warning["code"] == "internal-error" and warning["error"] == "RuntimeError: core bug"
    assert flow.marked


# --- error: credentials of a flow that got no response (error_1) -------------------------------------------


def test_redact_off_keeps_the_key_of_a_flow_that_failed_before_any_response(lens):
    lens.tctx.configure(lens, toolcall_lens_redact=False)
    flow = tflow.tflow()
    flow.request.headers["authorization"] = "Bearer sk-SENTINEL0123456789"
    flow.error = mflow.Error("connection refused")
    lens.error(flow)
    assert flow.request.headers["authorization"] == "Bearer sk-SENTINEL0123456789"


# --- the JSONL export: reconfigured off, and a failing append (_open_export_2, _5; _annotate_54 .. _59) -----


def test_the_jsonl_file_turned_off_while_running_is_no_longer_written(lens, tmp_path):
    path = tmp_path / "llm.jsonl"
    lens.tctx.configure(lens, toolcall_lens_jsonl=str(path))
    through_addon(lens, chat_stream([SEARCH]), follow_up([]))
    lens.tctx.configure(lens, toolcall_lens_jsonl="")
    flow = through_addon(lens, chat_stream([SEARCH]), follow_up([]))
    assert "toolcall_lens" in flow.metadata
    assert len(path.read_text().splitlines()) == 1


def test_a_jsonl_file_that_cannot_be_opened_is_refused_with_its_path(lens, tmp_path):
    path = tmp_path / "missing" / "llm.jsonl"
    with pytest.raises(exceptions.OptionsError, match=f"toolcall_lens_jsonl: cannot open {path}: "):
        lens.tctx.configure(lens, toolcall_lens_jsonl=str(path))


def test_a_failing_append_is_logged_with_the_file_and_the_error(lens, tmp_path, monkeypatch, caplog):
    path = tmp_path / "llm.jsonl"
    lens.tctx.configure(lens, toolcall_lens_jsonl=str(path))
    monkeypatch.setattr(lens, "jsonl", Failing(lens.jsonl, "append", OSError(28, "No space left on device")))
    caplog.set_level(logging.WARNING, logger="toolcall_lens")
    flow = through_addon(lens, chat_stream([]), follow_up([]))
    assert "toolcall_lens" in flow.metadata
    assert lens_records(caplog) == [
        (logging.WARNING, f"toolcall-lens: cannot append to {path}: [Errno 28] No space left on device")
    ]


# --- _annotate: the flow's log line (_annotate_36) ---------------------------------------------------------


def test_the_log_line_names_the_method_and_the_url(lens, caplog):
    caplog.set_level(logging.INFO, logger="toolcall_lens")
    flow = through_addon(lens, chat_stream([SEARCH]), follow_up([]))
    assert lens_records(caplog) == [
        (logging.INFO, f"toolcall-lens POST {flow.request.pretty_url}: openai-chat gpt-4o: 1 call: search")
    ]


# --- WebSocket flows -----------------------------------------------------------------------------------------


# websocket_start: the connection's path and limits (websocket_start_11, _12)


def test_a_connection_records_its_path_and_obeys_the_call_cap(lens):
    lens.tctx.configure(lens, toolcall_lens_max_calls=1)
    flow = ws_flow()
    lens.websocket_start(flow)
    a_turn(lens, flow, calls=2)
    lens.websocket_end(flow)
    record = flow.metadata["toolcall_lens"]
    assert record["connection"]["path"] == "/v1/responses"
    (result,) = record["responses"]
    assert "more than 1 tool calls" in " ".join(w["message"] for w in result["warnings"])
    assert [c["name"] for c in result["choices"][0]["tool_calls"]] == ["tool_0"]


# websocket_start and _rewrite_socket: the server's messages rewritten (websocket_start_13 .. _22)


def test_a_connection_asked_to_inject_gets_its_server_messages_rewritten():
    lens = addon_module.ToolcallLens()
    injector = InjectWebSocket(lens)
    with taddons.context(lens, injector) as tctx:
        tctx.configure(lens, toolcall_lens_inject=["interleave"])
        flow = ws_flow()
        lens.websocket_start(flow)
        a_turn(lens, flow, calls=2)
        send(lens, flow, True, answer("r1", 2))
        lens.websocket_end(flow)
    upstream = [m for m in flow.websocket.messages if not m.from_client and not m.injected]
    client = [m for m in flow.websocket.messages if m.injected]
    assert all(m.dropped for m in upstream) and sorted(m.content for m in client) == sorted(
        m.content for m in upstream
    )
    deltas = [json.loads(m.content) for m in client]
    assert [e["output_index"] for e in deltas if e["type"].endswith("arguments.delta")] == [0, 1, 0, 1]
    assert injector.flows and all(f is flow for f in injector.flows)
    rewrite = flow.metadata["toolcall_lens"]["rewrite"]
    assert (rewrite["format"], rewrite["inject"], rewrite["responses"]) == (
        "openai-responses",
        ["interleave"],
        2,
    )
    assert rewrite["upstream"][0]["calls_same"] is True


GEMINI_LIVE = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        # _rewrite_socket_2 .. _15: the format comes from the messages, after the rewriting had to be decided
        (
            "/proxy/socket",
            "the connection's format was told by its messages, not its path: it is watched, never rewritten",
        ),
        # _rewrite_socket_36: a format the message rewriter has nothing to do for
        (GEMINI_LIVE, "gemini-live sends every call whole in one message: nothing to rewrite"),
    ],
)
def test_a_connection_that_is_not_rewritten_says_why_and_is_still_trimmed(path, reason):
    lens = addon_module.ToolcallLens()
    injector = InjectWebSocket(lens)
    with taddons.context(lens, injector) as tctx:
        tctx.configure(lens, toolcall_lens_inject=["interleave"], toolcall_lens_websocket_keep=2)
        flow = ws_flow(path=path)
        lens.websocket_start(flow)
        a_turn(lens, flow, calls=2)
        lens.websocket_end(flow)
    assert not injector.flows and not any(m.dropped for m in flow.websocket.messages)  # passed as they came
    rewrite = flow.metadata["toolcall_lens"]["rewrite"]
    assert (rewrite["inject"], rewrite["repair"]) == ([], [])
    assert rewrite["skipped"] == [{"name": "interleave", "reason": reason}]
    assert len(flow.websocket.messages) < 2 * 2  # the keep option holds for it too


def test_a_rewritten_connection_obeys_the_options_and_injects_text_as_text():
    # _rewrite_socket_28, _32 (the call cap), _48 (the upstream's limits), _53, _58 (text frames), _63 (keep)
    lens = addon_module.ToolcallLens()
    injector = InjectWebSocket(lens)
    with taddons.context(lens, injector) as tctx:
        tctx.configure(
            lens,
            toolcall_lens_inject=["interleave"],
            toolcall_lens_websocket_keep=3,
            toolcall_lens_strategies=["recency"],
        )
        flow = ws_flow()
        lens.websocket_start(flow)
        a_turn(lens, flow, calls=2)
        send(lens, flow, True, answer("r1", 2))
        lens.websocket_end(flow)
    assert injector.flows and all(m.is_text for m in flow.websocket.messages if m.injected)
    assert len(flow.websocket.messages) < 2 * 3
    record = flow.metadata["toolcall_lens"]
    assert set(record["rewrite"]["upstream"][0]["compatibility"]) == {"recency"}  # this run's strategies


def test_a_rewritten_connection_obeys_the_call_cap():
    # _rewrite_socket_28, _32: past toolcall_lens_max_calls the rewriter stops and the rest passes as it is
    lens = addon_module.ToolcallLens()
    injector = InjectWebSocket(lens)
    with taddons.context(lens, injector) as tctx:
        tctx.configure(lens, toolcall_lens_inject=["interleave"], toolcall_lens_max_calls=1)
        flow = ws_flow()
        lens.websocket_start(flow)
        a_turn(lens, flow, calls=2)
        lens.websocket_end(flow)
    rewrite = flow.metadata["toolcall_lens"]["rewrite"]
    order = lambda messages: [
        e["output_index"]
        for e in map(json.loads, (m.content for m in messages))
        if e["type"].endswith("arguments.delta")
    ]
    upstream = [m for m in flow.websocket.messages if not m.from_client and not m.injected]
    client = [m for m in flow.websocket.messages if m.injected]
    assert order(client) == order(upstream) == [0, 0, 1, 1]  # two calls, over the cap of one: not interleaved
    assert rewrite["messages_in"] == rewrite["messages_out"] == 10
    assert "calls-cap" in rewrite["upstream"][0]["warnings"]


# _socket_watch: on mitmproxy's event loop, messages are held and fed after the hooks (_socket_watch_6 ..
# _34, websocket_start_24)


def on_a_loop(steps):
    """Run ``steps`` (the hooks) inside a running event loop, then let the loop run its timers. (The
    tests that use it configure the analysis in the proxy: tests/live/test_worker.py has the worker's.)"""

    async def main():
        steps()
        await asyncio.sleep(0.3)  # past FEED_AFTER: the held messages are fed

    asyncio.run(main())


class Updates:
    def __init__(self) -> None:
        self.flows: list = []

    def update(self, flows) -> None:
        self.flows += flows


def test_on_an_event_loop_messages_are_fed_after_the_hooks_and_mitmweb_told(caplog):
    caplog.set_level(logging.WARNING, logger="toolcall_lens")
    lens, updates = addon_module.ToolcallLens(), Updates()
    with taddons.context(lens, updates) as tctx:
        tctx.configure(
            lens, toolcall_lens_live_updates=0, toolcall_lens_websocket_keep=4, toolcall_lens_worker=False
        )
        flow = ws_flow()
        seen = {}

        def steps():
            lens.websocket_start(flow)
            a_turn(lens, flow, calls=1)
            send(lens, flow, True, answer("r1", 1))
            seen["in the hooks"] = "toolcall_lens" in flow.metadata

        on_a_loop(steps)
    assert seen == {"in the hooks": False}
    record = flow.metadata["toolcall_lens"]
    assert [r["websocket"]["position"] for r in record["responses"]] == [1]
    assert flow.comment.startswith("openai-responses websocket: 2 responses, calls: tool_0")
    assert updates.flows == [flow] and lens_records(caplog) == []
    assert len(flow.websocket.messages) < 8  # trimmed to the keep option (the last message stays)


def test_on_an_event_loop_a_failed_annotation_is_logged_and_the_traffic_goes_on(monkeypatch, caplog):
    caplog.set_level(logging.WARNING, logger="toolcall_lens")
    lens = addon_module.ToolcallLens()
    with taddons.context(lens) as tctx:
        tctx.configure(lens, toolcall_lens_live_updates=0, toolcall_lens_worker=False)
        monkeypatch.setattr(lens, "observed", Failing(lens.observed, "record", RuntimeError("core bug")))
        flow = ws_flow()

        def steps():
            lens.websocket_start(flow)
            a_turn(lens, flow, calls=1)
            send(lens, flow, True, answer("r1", 1))

        on_a_loop(steps)
    assert lens_records(caplog) == [
        (logging.WARNING, "toolcall-lens: WebSocket annotation failed: RuntimeError: core bug")
    ]


# websocket_message: a live update feeds what is held first (websocket_message_18, _21 .. _27)


def test_a_live_update_feeds_the_held_messages_and_annotates_what_they_settle(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(addon_module.time, "time", lambda: now[0])
    lens = addon_module.ToolcallLens()
    with taddons.context(lens) as tctx:
        tctx.configure(lens, toolcall_lens_live_updates=2, toolcall_lens_worker=False)  # every 0.5 s
        flow = ws_flow()
        seen = []

        def steps():
            lens.websocket_start(flow)
            a_turn(lens, flow, calls=1)  # the first message updated; the rest are held
            seen.append(flow.comment)
            now[0] += 0.5  # exactly one interval later: due
            send(lens, flow, True, answer("r1", 1))
            seen.append(flow.comment)

        on_a_loop(steps)
    assert seen == [
        "openai-responses websocket: 0 response(s) done, 1 running",
        "openai-responses websocket: 2 responses, calls: tool_0",  # the answer asked for the next
    ]


# websocket_end: the end's time finishes what still runs (websocket_end_15)


def test_a_response_cut_short_by_the_end_of_the_connection_ends_at_its_close(lens):
    flow = ws_flow()
    lens.websocket_start(flow)
    send(lens, flow, True, {"type": "response.create", "model": "m"})
    events = response_events("r1", 1)[:4]
    for event in events:
        send(lens, flow, False, event)
    last = flow.websocket.messages[-1].timestamp
    flow.websocket.timestamp_end = last + 30
    lens.websocket_end(flow)
    (result,) = flow.metadata["toolcall_lens"]["responses"]
    assert result["timing"]["duration"] == pytest.approx(30, abs=1)


# _annotate_connection: each response's log line, JSONL record and calls remembered for echo checks
# (_annotate_connection_13 .. _56)


def test_each_settled_response_of_a_connection_is_logged_at_its_level(lens, caplog):
    from accumulator.report import summary_line

    caplog.set_level(logging.INFO, logger="toolcall_lens")
    flow = ws_flow()
    lens.websocket_start(flow)
    a_turn(lens, flow, "r1", calls=1)
    send(lens, flow, True, answer("r1", 1))
    send(lens, flow, False, response_events("r2", 1)[0])  # cut short by the end: a warning
    lens.websocket_end(flow)
    first, second = flow.metadata["toolcall_lens"]["responses"]
    url = flow.request.pretty_url
    assert lens_records(caplog) == [
        (logging.INFO, f"toolcall-lens WebSocket {url} response 1: {summary_line(first)}"),
        (logging.WARNING, f"toolcall-lens WebSocket {url} response 2: {summary_line(second)}"),
    ]


def test_responses_settled_together_share_a_record_per_run_of_one_level_each_its_own_line(lens, caplog):
    # At the end four responses settle at once: one log record per run of the same level, in order.
    from accumulator.report import summary_line

    caplog.set_level(logging.INFO, logger="toolcall_lens")
    flow = ws_flow()
    lens.websocket_start(flow)
    for rid in ("r1", "r2"):
        a_turn(lens, flow, rid, calls=1)  # a call each, its evidence awaited until the end
    send(lens, flow, True, {"type": "response.create", "model": "m"})
    send(lens, flow, False, response_events("r3", 1)[0])  # cut short by the end: a warning
    caplog.clear()
    lens.websocket_end(flow)
    results = flow.metadata["toolcall_lens"]["responses"]
    url = flow.request.pretty_url
    lines = [
        f"toolcall-lens WebSocket {url} response {n}: {summary_line(r)}" for n, r in enumerate(results, 1)
    ]
    assert lens_records(caplog) == [(logging.INFO, "\n".join(lines[:2])), (logging.WARNING, lines[2])]


def test_each_settled_response_of_a_connection_gets_its_jsonl_record(lens, tmp_path):
    path = tmp_path / "llm.jsonl"
    lens.tctx.configure(lens, toolcall_lens_jsonl=str(path))
    flow = ws_flow()
    lens.websocket_start(flow)
    a_turn(lens, flow, calls=1)
    lens.websocket_end(flow)
    (line,) = path.read_text().splitlines()
    record = json.loads(line)
    assert record["flow_id"] == flow.id
    assert record["result"] == flow.metadata["toolcall_lens"]["responses"][0]


def test_a_failing_append_of_a_connections_record_is_logged(lens, tmp_path, monkeypatch, caplog):
    path = tmp_path / "llm.jsonl"
    lens.tctx.configure(lens, toolcall_lens_jsonl=str(path))
    monkeypatch.setattr(lens, "jsonl", Failing(lens.jsonl, "append", OSError(28, "No space left on device")))
    caplog.set_level(logging.WARNING, logger="toolcall_lens")
    flow = ws_flow()
    lens.websocket_start(flow)
    a_turn(lens, flow, calls=1)
    lens.websocket_end(flow)
    assert [line for _, line in lens_records(caplog) if "append" in line] == [
        f"toolcall-lens: cannot append to {path}: [Errno 28] No space left on device"
    ]


def test_an_http_request_echoing_a_websocket_call_names_the_connection_as_its_earlier_flow(lens):
    connection = ws_flow()
    lens.websocket_start(connection)
    a_turn(lens, connection, calls=1)
    lens.websocket_end(connection)
    request = {
        "model": "m",
        "input": [
            {"type": "function_call", "call_id": "r1_c0", "name": "tool_0", "arguments": '{"n": 0}'},
            {"type": "function_call_output", "call_id": "r1_c0", "output": "ok"},
        ],
    }
    body = json.dumps({"id": "r2", "object": "response", "model": "m", "status": "completed", "output": []})
    flow = json_flow(request, body.encode(), path="/v1/responses")
    lens.request(flow)
    lens.response(flow)
    evidence = flow.metadata["toolcall_lens"]["evidence"]
    assert evidence["matched"] == 1 and evidence["earlier_flows"] == [connection.id]


# _connection_progress: a response asked for and not started yet (_connection_progress_13, _15, _27)


def test_a_live_update_before_the_server_answers_says_one_running_and_no_calls(lens):
    flow = ws_flow()
    lens.websocket_start(flow)
    send(lens, flow, True, {"type": "response.create", "model": "m"})
    assert flow.comment == "openai-responses websocket: 0 response(s) done, 1 running"


# --- responseheaders: the log line of a rewrite that does not apply (responseheaders_35, _36) ------------


def test_a_rewrite_that_does_not_apply_logs_the_url_and_each_name_with_its_reason(lens, caplog):
    import fake_provider

    caplog.set_level(logging.INFO, logger="toolcall_lens")
    lens.tctx.configure(lens, toolcall_lens_inject=["interleave"])
    flow = at_headers()
    flow.request.path = fake_provider.path("gemini", "interleaved")
    flow.request.content = fake_provider.request_body("gemini", "interleaved")
    flow.response.headers["content-type"] = fake_provider.content_type("gemini")
    lens.responseheaders(flow)
    reason = skip_reason("gemini", "interleave")
    assert lens_records(caplog) == [
        (logging.INFO, f"toolcall-lens: not rewriting {flow.request.pretty_url}: interleave: {reason}")
    ]


# --- accumulator/rewrite/messages.py: MessageRewriter (__init___6, start_response_2, finish_3) --------------


def test_a_message_rewriter_for_a_format_without_websocket_support_skips_everything():
    rewriter = MessageRewriter("anthropic-messages", inject=["interleave"])
    assert not rewriter.applies
    assert rewriter.report()["skipped"] == [
        {
            "name": "interleave",
            "reason": "anthropic-messages sends every call whole in one message: nothing to rewrite",
        }
    ]


def test_a_message_rewriter_with_nothing_to_apply_counts_no_response():
    rewriter = MessageRewriter("openai-responses")
    assert rewriter.start_response() == []
    assert rewriter.feed(b'{"type": "response.created"}') == [b'{"type": "response.created"}']
    assert rewriter.report()["responses"] == 0


def test_messages_held_until_the_end_are_counted_out_when_released():
    rewriter = MessageRewriter("openai-responses", inject=["interleave"])
    messages = [json.dumps(e).encode() for e in response_events("r1", 2)[:-3]]  # cut before the items end
    out = rewriter.start_response()
    for message in messages:
        out += rewriter.feed(message)
    out += rewriter.finish()
    assert sorted(out) == sorted(messages)
    report = rewriter.report()
    assert report["messages_in"] == report["messages_out"] == len(messages)


# --- accumulator/rewrite: the hold cap (Reorderer.drain, StreamRewriter._drain) -------------------------------


@pytest.mark.parametrize(
    "fmt,scenario,inject,repair",
    [
        ("anthropic-messages", "interleaved", ["interleave"], []),
        ("openai-chat", "sequential", ["interleave", "split-names"], ["serialize"]),  # an edit between
    ],
)
def test_a_hold_cap_releases_what_is_held_and_holding_goes_on_after_it(fmt, scenario, inject, repair):
    import fake_provider

    body = fake_provider.body(fmt, scenario)
    uncapped = StreamRewriter(fmt, inject=inject, repair=repair)
    uncapped.feed(body)
    uncapped.finish()
    cap = uncapped.report()["held_bytes_max"] // 2
    rewriter = StreamRewriter(fmt, inject=inject, repair=repair, max_held_bytes=cap)
    out = b"".join(rewriter.feed(body) + rewriter.finish())
    report = rewriter.report()
    assert report["stopped"] is None and report["released_early"] is True
    assert report["held_bytes_max"] > cap
    assert [c["name"] for c in analyze(out, fmt)["choices"][0]["tool_calls"]] == [
        c["name"] for c in analyze(body, fmt)["choices"][0]["tool_calls"]
    ]
    if scenario == "interleaved":  # held again after the cap released the first units: interleaved anew
        assert out != body and report["calls_reordered"] == 2


def test_an_exception_inside_the_rewriter_is_named_in_its_stop_reason(monkeypatch):
    import fake_provider

    def broken(self, unit, role, key):
        raise ZeroDivisionError("1 / 0")

    monkeypatch.setattr(reorder.Interleaver, "_add", broken)
    body = fake_provider.body("openai-chat", "sequential")
    rewriter = StreamRewriter("openai-chat", inject=["interleave"])
    assert b"".join(rewriter.feed(body) + rewriter.finish()) == body
    assert rewriter.report()["stopped"]["reason"] == (
        "internal error (ZeroDivisionError: 1 / 0): the rest passes as it is"
    )


# --- accumulator/rewrite/reorder.py: the serializer's held totals, and a block index used again --------------


class Piece:
    """A unit as the reorderers see it: its role and key (read by ``classify``) and its size."""

    def __init__(self, role: int, key: str, size: int = 10) -> None:
        self.role, self.key, self.size = role, key, size


def test_the_serializer_counts_what_it_still_holds_after_releasing_an_ended_calls_followers():
    serializer = reorder.Serializer(lambda piece: (piece.role, piece.key))
    serializer.push(Piece(reorder.START, "a"))  # streams live
    for piece in (Piece(reorder.START, "b"), Piece(reorder.FRAGMENT, "b", 7)):
        assert serializer.push(piece) == []  # held behind a
    assert (serializer.held_events, serializer.held_bytes) == (2, 17)
    assert len(serializer.push(Piece(reorder.END, "a"))) == 3  # a's end, then b's units
    assert (serializer.held_events, serializer.held_bytes) == (0, 0)
    serializer.push(Piece(reorder.START, "c", 5))  # behind b, still open
    assert (serializer.held_events, serializer.held_bytes) == (1, 5)


def test_a_block_index_that_starts_again_as_text_is_no_longer_a_tool_call():
    keys = reorder.ContentBlockKeys(
        start="start",
        delta="delta",
        stop="stop",
        is_tool=lambda event: event.get("tool", False),
        index_field="index",
        kind_of=lambda unit, event: event["kind"],
    )

    class Event:
        quiet = False

        def __init__(self, **obj) -> None:
            self.obj = obj

    assert keys(Event(kind="start", index=0, tool=True)) == (reorder.START, 0)
    assert keys(Event(kind="delta", index=0)) == (reorder.FRAGMENT, 0)
    assert keys(Event(kind="start", index=0)) == (reorder.BOUNDARY, None)
    assert keys(Event(kind="delta", index=0)) == (reorder.BOUNDARY, None)


# --- response: an HTTP error without a content type (response_38, _40) --------------------------------------


def test_an_http_error_without_a_content_type_is_reported_as_such(lens):
    flow = json_flow({"model": "gpt-4o", "messages": [], "stream": True}, b"upstream exploded")
    flow.response.status_code = 502
    del flow.response.headers["content-type"]
    lens.response(flow)
    result = flow.metadata["toolcall_lens"]
    assert [w["code"] for w in result["warnings"]] == ["http-error"]
    assert "no content type" in result["warnings"][0]["message"]
