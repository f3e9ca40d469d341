"""The OpenTelemetry export (toolcall_lens/otel.py) into a real OTLP/HTTP receiver (tests/otlp_receiver.py:
protobuf, gzip, parsed with opentelemetry-proto), from the addon under mitmproxy's test harness and from
the CLI: the spans, their attributes, their parents and their times, for HTTP and WebSocket flows; a
collector that is down, refusing or slow costs the traffic nothing."""

from __future__ import annotations

import json
import sys

import pytest
from chat_flows import chat_stream, follow_up, through_addon
from mitmproxy import exceptions
from otlp_receiver import Receiver
from schemas import check_result
from streams import call, chunk, sse, tool_chunk
from websocket_turns import send, ws_flow

from accumulator.cli import main
from toolcall_lens.otel import FlowFacts, span_of, traces_url

SEARCH = ("call_1", "search", '{"q": "rbi"}')
PROFILE = ("call_2", "get_user", '{"id": 7}')


def test_each_response_is_a_genai_client_span_and_the_session_its_trace(lens):
    with Receiver() as receiver:
        lens.tctx.configure(
            lens,
            toolcall_lens_otlp_endpoint=receiver.url,
            toolcall_lens_otlp_headers=["authorization=Basic abc"],
        )
        headers = {"session-id": "codex-1"}
        first = through_addon(lens, chat_stream([SEARCH, PROFILE]), follow_up([]), headers)
        second = through_addon(lens, chat_stream([]), follow_up([[SEARCH, PROFILE]]), headers)
        lens.done()  # the session's span goes at shutdown
        spans = receiver.wait_for(3)
    assert receiver.paths == ["/v1/traces"] * receiver.requests
    assert all(
        h["content-encoding"] == "gzip" and h["authorization"] == "Basic abc" for h in receiver.headers
    )
    turns = sorted(
        (s for s in spans if s["name"].startswith("chat ")),
        key=lambda s: s["attributes"]["toolcall_lens.session.turn"],
    )
    (session,) = [s for s in spans if s["name"] == "invoke_agent codex-1"]
    assert [s["kind"] for s in turns] == ["SPAN_KIND_CLIENT"] * 2
    assert {s["traceId"] for s in spans} == {session["traceId"]}
    assert [s["parentSpanId"] for s in turns] == [session["spanId"]] * 2 and session["parentSpanId"] == ""
    for span, flow in zip(turns, (first, second), strict=True):
        assert span["startTimeUnixNano"] == int(flow.request.timestamp_start * 1e9)
        assert span["endTimeUnixNano"] == int(flow.response.timestamp_end * 1e9)
    assert session["startTimeUnixNano"] == turns[0]["startTimeUnixNano"]
    assert session["endTimeUnixNano"] == turns[1]["endTimeUnixNano"]
    attributes = turns[0]["attributes"]
    assert turns[0]["name"] == "chat gpt-4o" and turns[0]["resource"]["service.name"] == "toolcall-lens"
    assert {
        k: attributes[k]
        for k in (
            "gen_ai.operation.name",
            "gen_ai.provider.name",
            "gen_ai.request.model",
            "gen_ai.response.model",
            "gen_ai.request.stream",
            "gen_ai.usage.input_tokens",
            "gen_ai.usage.output_tokens",
            "gen_ai.usage.cache_read.input_tokens",
            "server.address",
            "server.port",
            "gen_ai.conversation.id",
            "gen_ai.response.finish_reasons",
        )
    } == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.response.model": "gpt-4o",
        "gen_ai.request.stream": True,
        "gen_ai.usage.input_tokens": 1200,
        "gen_ai.usage.output_tokens": 80,
        "gen_ai.usage.cache_read.input_tokens": 1000,
        "server.address": "api.openai.com",
        "server.port": 443,
        "gen_ai.conversation.id": "codex-1",
        "gen_ai.response.finish_reasons": ["tool_calls"],
    }
    assert attributes["gen_ai.usage.cost"] == first.metadata["toolcall_lens"]["cost"]["total"]
    assert (
        attributes["toolcall_lens.compatibility.recency"]
        == first.metadata["toolcall_lens"]["compatibility"]["recency"]["verdict"]
    )
    # Content off: ids and names, no arguments.
    (message,) = json.loads(attributes["gen_ai.output.messages"])
    assert [(p["type"], p["id"], p["name"], "arguments" in p) for p in message["parts"]] == [
        ("tool_call", "call_1", "search", False),
        ("tool_call", "call_2", "get_user", False),
    ]
    assert json.loads(turns[1]["attributes"]["toolcall_lens.evidence"])["matched"] == 2
    assert "toolcall.otlp" not in lens.otlp_status() and "no OTLP export" in lens.otlp_status()


def test_warnings_are_attributes_and_events_and_content_is_opt_in(lens):
    misrouted = sse(
        tool_chunk(call(0, "call_a", "search", "")),
        tool_chunk(call(1, "call_b", "get_user", "")),
        tool_chunk(call(0, None, None, '{"q": 1}')),
        tool_chunk(call(1, None, None, '{"id": 2}')),
        chunk({"index": 0, "delta": {}, "finish_reason": "tool_calls"}),
    )
    with Receiver() as receiver:
        lens.tctx.configure(lens, toolcall_lens_otlp_endpoint=receiver.url, toolcall_lens_otlp_content=True)
        flow = through_addon(lens, misrouted, follow_up([]))
        lens.done()
        (span,) = [s for s in receiver.wait_for(2) if s["name"].startswith("chat")]
    result = flow.metadata["toolcall_lens"]
    codes = [w["code"] for w in result["warnings"]]
    assert "recency-misroute" in codes and span["attributes"]["toolcall_lens.warnings"] == codes
    assert [e["attributes"]["code"] for e in span["events"] if e["name"] == "toolcall_lens.warning"] == codes
    assert span["attributes"]["toolcall_lens.compatibility.recency"] == "breaks"
    (message,) = json.loads(span["attributes"]["gen_ai.output.messages"])
    assert [p.get("arguments") for p in message["parts"]] == [{"q": 1}, {"id": 2}]


def test_a_websocket_response_is_a_span_at_its_messages_times(lens):
    flow = ws_flow()
    with Receiver() as receiver:
        lens.tctx.configure(lens, toolcall_lens_otlp_endpoint=receiver.url)
        lens.websocket_start(flow)
        times = []
        for from_client, obj in (
            (True, {"type": "response.create", "model": "gpt-4o"}),
            (False, {"type": "response.created", "response": {"id": "r1", "model": "gpt-4o"}}),
            (
                False,
                {
                    "type": "response.completed",
                    "response": {"id": "r1", "model": "gpt-4o", "status": "completed"},
                },
            ),
        ):
            times.append(send(lens, flow, from_client, obj).timestamp)
        lens.websocket_end(flow)
        lens.done()
        spans = receiver.wait_for(2)
    (span,) = [s for s in spans if s["name"] == "chat gpt-4o"]
    assert span["attributes"]["gen_ai.response.id"] == "r1"
    assert span["startTimeUnixNano"] == int(times[0] * 1e9) and span["endTimeUnixNano"] == int(
        times[-1] * 1e9
    )
    assert span["attributes"]["gen_ai.conversation.id"] == flow.id


@pytest.mark.parametrize("collector", ["down", "refusing", "slow"])
def test_a_collector_down_refusing_or_slow_costs_the_traffic_nothing(lens, collector, caplog):
    with Receiver(
        delay=3.0 if collector == "slow" else 0.0, status=503 if collector == "refusing" else 200
    ) as receiver:
        url = "http://127.0.0.1:9" if collector == "down" else receiver.url  # port 9: nothing listens
        lens.tctx.configure(lens, toolcall_lens_otlp_endpoint=url)
        flows = [through_addon(lens, chat_stream([SEARCH]), follow_up([])) for _ in range(3)]
        # Annotated at once, before any export was answered (the SDK sends them on its own thread).
        assert all(check_result(f.metadata["toolcall_lens"]) is None for f in flows)
        assert receiver.requests == 0
        lens.otlp.provider.force_flush(15_000)
        status = lens.otlp_status()
        # The loss is logged by the next flow, once: not again within the minute.
        for _ in range(2):
            through_addon(lens, chat_stream([]), follow_up([]))
    logged = [r.getMessage() for r in caplog.records if "OTLP export to" in r.getMessage()]
    if collector == "slow":
        assert "3 sent, 0 lost" in status and logged == []
    else:
        assert "0 sent, 3 lost" in status and "last failure" in status
        assert len(logged) == 1 and "3 lost" in logged[0], logged


def test_the_export_never_goes_through_a_proxy_the_environment_names(lens, monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # often this very proxy
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    with Receiver() as receiver:
        lens.tctx.configure(lens, toolcall_lens_otlp_endpoint=receiver.url)
        through_addon(lens, chat_stream([]), follow_up([]))
        lens.done()
        assert len(receiver.wait_for(2)) == 2  # the response's span and its session's


def test_asking_for_an_export_without_the_extra_is_a_clear_error(lens, monkeypatch):
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # as if the extra were not installed
    with pytest.raises(exceptions.OptionsError, match=r"pip install -e '\.\[otel\]'"):
        lens.tctx.configure(lens, toolcall_lens_otlp_endpoint="http://127.0.0.1:4318")
    with pytest.raises(exceptions.OptionsError, match="is no http"):
        lens.tctx.configure(lens, toolcall_lens_otlp_endpoint="127.0.0.1:4318")
    with pytest.raises(exceptions.OptionsError, match="not name=value"):
        lens.tctx.configure(lens, toolcall_lens_otlp_headers=["authorization"])


def test_the_cli_sends_a_dumps_spans_at_the_flows_own_times(lens, tmp_path, capsys):
    from mitmproxy import io as mio

    headers = {"x-session-id": "ses_9"}
    flows = [
        through_addon(lens, chat_stream([SEARCH]), follow_up([]), headers),
        through_addon(lens, chat_stream([]), follow_up([[SEARCH]]), headers),
    ]
    dump = tmp_path / "run.flows"
    with dump.open("wb") as file:
        writer = mio.FlowWriter(file)
        for flow in flows:
            writer.add(flow)
    with Receiver() as receiver:
        assert main([str(dump), "--json", "--otlp", receiver.url]) == 0
        spans = receiver.wait_for(3)
    assert "2 span(s) made, 3 sent, 0 lost" in capsys.readouterr().err
    turns = sorted((s for s in spans if s["name"] == "chat gpt-4o"), key=lambda s: s["startTimeUnixNano"])
    assert [s["startTimeUnixNano"] for s in turns] == [int(f.request.timestamp_start * 1e9) for f in flows]
    assert [s["attributes"]["gen_ai.conversation.id"] for s in turns] == ["ses_9", "ses_9"]
    assert main([str(dump), "--otlp", "127.0.0.1:4318"]) == 2


def test_the_cli_starts_the_span_of_a_response_whose_messages_were_trimmed_at_the_connections_start(
    tmp_path, capsys
):
    # _response_times: no stored message tells when response 1 began; the connection's start does.
    from mitmproxy import io as mio
    from websocket_messages import recorded_flow

    ws = recorded_flow(12, keep=slice(12, None))
    ws.request.timestamp_start = 946684700.0
    dump = tmp_path / "trimmed.flows"
    with dump.open("wb") as file:
        mio.FlowWriter(file).add(ws)
    with Receiver() as receiver:
        assert main([str(dump), "--json", "--otlp", receiver.url]) == 1
        spans = receiver.wait_for(3)
    capsys.readouterr()
    starts = sorted(s["startTimeUnixNano"] for s in spans if s["name"].startswith("chat"))
    assert starts[0] == int(946684700.0 * 1e9)  # response 1: the connection's start, not the export's
    assert starts[-1] == int((946684800.0 + 12) * 1e9)  # response 3: message 13, the first one kept


def test_the_mapping_without_a_session_a_usage_or_a_model():
    from accumulator import analyze

    result = analyze(
        sse(chunk({"index": 0, "delta": {"content": "hi"}, "finish_reason": None}), done=False), "openai-chat"
    )
    data = span_of(result, FlowFacts(start=10.0, end=9.0, host=None))  # an end before the start: clamped
    assert data.name == "chat gpt-test" and (data.start_ns, data.end_ns) == (10 * 10**9, 10 * 10**9)
    assert "gen_ai.usage.input_tokens" not in data.attributes and "server.address" not in data.attributes
    assert data.error == "truncated-stream" and data.attributes["error.type"] == "truncated-stream"
    assert traces_url("http://h:4318/") == "http://h:4318/v1/traces" == traces_url("http://h:4318/v1/traces")
