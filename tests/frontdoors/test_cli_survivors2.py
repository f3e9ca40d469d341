"""The command line's newer parts: what a mutation run found untested (the logic survivors of
``accumulator/cli.py`` in its options' help, ``sessions``, ``--prices``, ``--loop-after``, ``--otlp`` and the
dump flows' facts they read; see docs/mutation.md). Each test was checked by applying the mutation it guards
against to the source by hand and seeing it fail."""

from __future__ import annotations

import gzip
import json
import sys
from datetime import UTC, datetime

import pytest
from chat_flows import chat_stream, follow_up
from mitmproxy import websocket
from mitmproxy.test import tflow
from otlp_receiver import Receiver
from streams import DATA
from test_cli_survivors import dump as dump_of
from websocket_messages import capture, recorded_flow, websocket_flow
from wsproto.frame_protocol import Opcode

from accumulator.cli import main

SEARCH = ("call_1", "search", '{"q": "rbi"}')
START = 1_700_000_000.0  # 2023-11-14T22:13:20Z


def http_flow(
    body: bytes,
    request: dict,
    *,
    url: str = "https://api.openai.com/v1/chat/completions",
    headers: dict | None = None,
    start: float = START,
    encoding: str | None = None,
):
    """A streamed HTTP flow as a dump holds it when mitmdump ran without the addon."""
    flow = tflow.tflow(resp=True)
    flow.request.method = "POST"
    flow.request.url = url
    flow.request.content = json.dumps(request).encode()
    for name, value in (headers or {}).items():
        flow.request.headers[name] = value
    flow.response.headers["content-type"] = "text/event-stream"
    if encoding is not None:
        flow.response.headers["content-encoding"] = encoding
    flow.response.raw_content = body
    flow.request.timestamp_start, flow.request.timestamp_end = start, start + 0.1
    flow.response.timestamp_start, flow.response.timestamp_end = start + 0.5, start + 2.0
    return flow


def results(capsys) -> list[dict]:
    return json.loads(capsys.readouterr().out)["results"]


# --- main: --help (mutants 6-8, 21-182: the description, the program's name, each option's metavar and help)


def test_help_names_each_option_with_its_argument_and_says_what_it_does(capsys):
    with pytest.raises(SystemExit) as exit:
        main(["--help"])
    assert exit.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert text.startswith("usage: toolcall-lens [-h]")
    assert "Rebuild the tool calls of captured LLM responses by identity" in text
    for shown in (
        "FILE a raw response body as captured, a mitmproxy dump (-w), a HAR file or a WebSocket capture",
        "--json print {",
        "--request REQUEST.json the request body",
        "--format {anthropic-messages,",
        "the wire format of raw bodies",
        "--strategies NAME,... hazard strategies to replay",
        "--inject NAME,... rewrite the stream with these hostile shapes",
        "--repair NAME,... rewrite the stream with these repairs",
        "--output OUT where --inject/--repair write",
        "--prices PRICES.json a price file",
        "--loop-after N a session making the same call N times",
        "--otlp URL also send one OpenTelemetry span per response",
        "--otlp-content with --otlp: put call arguments and text into the spans",
    ):
        assert shown in text
    with pytest.raises(SystemExit):
        main(["--help"], sessions_view=True)
    assert capsys.readouterr().out.startswith("usage: toolcall-lens sessions [-h]")


# --- main: --loop-after and the options that go together (149, 154, 191, 193, 201)


def test_loop_after_is_a_number_of_at_least_2_and_sets_when_a_repeated_call_is_a_loop(tmp_path, capsys):
    session = {"x-session-id": "ses_1"}
    dump = dump_of(
        tmp_path / "run.flows",
        http_flow(chat_stream([SEARCH]), follow_up([]), headers=session),
        http_flow(chat_stream([SEARCH]), follow_up([[SEARCH]]), headers=session, start=START + 10),
    )
    assert main([dump, "--json"]) == 0  # made twice: no loop at the default of 3
    assert [w["code"] for r in results(capsys) for w in r["warnings"]] == []
    assert main([dump, "--json", "--loop-after", "2"]) == 1
    assert [[w["code"] for w in r["warnings"]] for r in results(capsys)] == [[], ["tool-call-loop"]]
    with pytest.raises(SystemExit) as exit:
        main([dump, "--loop-after", "1"])
    assert exit.value.code == 2
    assert "toolcall-lens: error: --loop-after must be at least 2" in capsys.readouterr().err


def test_inject_without_output_is_a_usage_error_saying_they_go_together(capsys):
    with pytest.raises(SystemExit) as exit:
        main([str(DATA / "openai_chat_parallel.sse"), "--inject", "interleave"])
    assert exit.value.code == 2
    assert "error: --inject/--repair and --output go together" in capsys.readouterr().err


# --- main, _span_export, _send_spans: --otlp and --otlp-content (178, 181, 216, 288, 354; _span_export 10,
# 12; _send_spans 1-41: each span's times, server address and port, and the model its request asked for)


def test_otlp_spans_carry_each_flows_times_address_port_and_requested_model_and_content_when_asked(
    tmp_path, capsys
):
    https = http_flow(chat_stream([SEARCH]), follow_up([], model="gpt-4o-mini"))
    plain = http_flow(
        chat_stream([]), follow_up([]), url="http://llm.internal/v1/chat/completions", start=START + 5
    )
    ws = websocket_flow("openai-responses", start=START + 20)
    dump = dump_of(tmp_path / "run.flows", https, plain, ws)
    raw = tmp_path / "body.sse"
    raw.write_bytes(chat_stream([]))
    with Receiver() as receiver:
        assert main([dump, str(raw), "--json", "--otlp", receiver.url, "--otlp-content"]) == 1
        spans = receiver.wait_for(8)  # six responses, two sessions
    assert "6 span(s) made" in capsys.readouterr().err
    chats = [s for s in spans if not s["name"].startswith("invoke_agent")]
    by_start = sorted(chats, key=lambda s: s["startTimeUnixNano"])
    first, second, *on_ws, unflowed = by_start
    facts = [
        (s["name"], s["attributes"].get("server.address"), s["attributes"].get("server.port"))
        for s in by_start
    ]
    assert facts == [
        ("chat gpt-4o-mini", "api.openai.com", 443),  # the request's model, the scheme's port
        ("chat gpt-4o", "llm.internal", 80),
        *[("chat gpt-ws", "example.com", 80)] * 3,
        ("chat gpt-4o", None, None),  # a raw body: no address, the time of the run
    ]
    assert first["attributes"]["gen_ai.request.model"] == "gpt-4o-mini"
    for span, flow in ((first, https), (second, plain)):
        assert span["startTimeUnixNano"] == int(flow.request.timestamp_start * 1e9)
        assert span["endTimeUnixNano"] == int(flow.response.timestamp_end * 1e9)
    messages = ws.websocket.messages
    assert [(s["startTimeUnixNano"], s["endTimeUnixNano"]) for s in on_ws] == [
        (int(messages[n].timestamp * 1e9), int(messages[m].timestamp * 1e9))
        for n, m in ((0, 2), (3, 11), (12, 15))
    ]
    assert unflowed["startTimeUnixNano"] == unflowed["endTimeUnixNano"] > int(START * 1e9)
    (message,) = json.loads(first["attributes"]["gen_ai.output.messages"])
    assert [p.get("arguments") for p in message["parts"]] == [{"q": "rbi"}]  # --otlp-content


# --- sessions: the exit status, no sessions, failures (main 394; _print_sessions 15-18, 30)


def test_the_sessions_view_exits_0_when_quiet_says_when_there_are_none_and_2_on_a_failure(tmp_path, capsys):
    dump = dump_of(tmp_path / "one.flows", http_flow(chat_stream([SEARCH]), follow_up([])))
    assert main([dump], sessions_view=True) == 0  # one turn, nothing looping or left unanswered
    assert "== session " in capsys.readouterr().out
    raw = tmp_path / "body.sse"
    raw.write_bytes(chat_stream([SEARCH]))
    assert main([str(raw)], sessions_view=True) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "toolcall-lens: no agent sessions: sessions are read from mitmproxy dumps and HAR files\n"
    missing = str(tmp_path / "absent.flows")
    assert main([dump, missing, "--json"], sessions_view=True) == 2
    doc = json.loads(capsys.readouterr().out)
    assert [s["totals"]["turns"] for s in doc["sessions"]] == [1]
    assert [(f["source"], f["error"].startswith("cannot read")) for f in doc["failures"]] == [
        ({"file": missing}, True)
    ]


# --- main: a dump's WebSocket flow in its session (309-319; _websocket_flow_job 34, 43, 44, 64)


@pytest.mark.parametrize("header", [{"X-Session-Id": "ses_ws"}, {}], ids=["header", "connection"])
def test_a_websocket_flows_responses_are_turns_of_one_session_at_the_flows_request_time(
    header, tmp_path, capsys
):
    ws = websocket_flow("openai-responses", start=START + 1)
    ws.request.timestamp_start = START
    for name, value in header.items():
        ws.request.headers[name] = value
    dump = dump_of(tmp_path / "ws.flows", ws)
    main([dump, "--json"])
    by = "header x-session-id" if header else "websocket connection"
    assert [(r["session"]["id"], r["session"]["turn"], r["session"]["by"]) for r in results(capsys)] == [
        (header.get("X-Session-Id", ws.id), turn, by) for turn in (1, 2, 3)
    ]
    main([dump, "--json"], sessions_view=True)
    (session,) = json.loads(capsys.readouterr().out)["sessions"]
    assert [turn["time"] for turn in session["turns"]] == [START] * 3


# --- main: a dump's HTTP flows in their sessions: chained by previous_response_id, at their request times
# (368, 370, 374, 376)


def test_a_responses_turn_follows_the_response_its_request_names_at_its_request_time(tmp_path, capsys):
    body = (DATA / "openai_responses_parallel.sse").read_bytes()
    url = "https://api.openai.com/v1/responses"
    first = http_flow(body, {"model": "gpt-5", "stream": True, "input": "go"}, url=url)
    follow = {
        "model": "gpt-5",
        "stream": True,
        "previous_response_id": "resp_68a1f0c2b7d4819d",
        "input": "on",
    }
    second = http_flow(body.replace(b"resp_68a1f0c2b7d4819d", b"resp_2"), follow, url=url, start=START + 60)
    dump = dump_of(tmp_path / "responses.flows", first, second)
    main([dump, "--json"])
    assert [(r["session"]["id"], r["session"]["turn"], r["session"]["by"]) for r in results(capsys)] == [
        (first.id, 1, "new"),
        (first.id, 2, "previous_response_id"),
    ]
    main([dump, "--json"], sessions_view=True)
    (session,) = json.loads(capsys.readouterr().out)["sessions"]
    assert [turn["time"] for turn in session["turns"]] == [START, START + 60]


# --- main, _price: a dump's responses are priced as of their request's time, by the host they went to
# (main 295, 296, 301, 342, 343, 350; _price 1-21)

GROQ = "llama-3.3-70b-versatile"  # a model genai-prices knows at Groq only, not at OpenAI


def groq_websocket_flow():
    """A Responses WebSocket to Groq's host, one response with its usage."""
    flow = tflow.twebsocketflow()
    flow.request.url = "https://api.groq.com/openai/v1/responses"
    flow.request.timestamp_start = START
    done = {
        "id": "r1",
        "model": GROQ,
        "status": "completed",
        "usage": {"input_tokens": 900, "output_tokens": 50},
    }
    flow.websocket.messages = [
        websocket.WebSocketMessage(Opcode.TEXT, from_client, json.dumps(obj).encode(), START + n)
        for n, (from_client, obj) in enumerate(
            (
                (True, {"type": "response.create", "model": GROQ}),
                (False, {"type": "response.created", "response": {"id": "r1", "model": GROQ}}),
                (False, {"type": "response.completed", "response": done}),
            )
        )
    ]
    flow.websocket.timestamp_end = START + 3
    return flow


def test_a_dumps_responses_are_priced_by_their_host_as_of_their_request_time(tmp_path, capsys):
    groq = http_flow(
        chat_stream([], model=GROQ),
        follow_up([], model=GROQ),
        url="https://api.groq.com/openai/v1/chat/completions",
    )
    unknown = http_flow(chat_stream([], model="no-such-model"), follow_up([]), start=START + 5)
    dump = dump_of(tmp_path / "priced.flows", groq, groq_websocket_flow(), unknown)
    main([dump, "--json"])
    priced, over_websocket, unpriced = results(capsys)
    as_of = datetime.fromtimestamp(START, UTC).isoformat()
    for result in (priced, over_websocket):
        assert (result["cost"]["price"]["provider"], result["cost"]["price"]["as_of"]) == ("groq", as_of)
        assert "cost_note" not in result
    assert unpriced["cost"] is None and "knows no price for model 'no-such-model'" in unpriced["cost_note"]


# --- _read_prices: the price file (4-15)


def test_a_price_file_is_named_in_the_price_it_gives_and_in_what_is_wrong_with_it(tmp_path, capsys):
    raw = tmp_path / "body.sse"
    raw.write_bytes(chat_stream([]))
    prices = tmp_path / "prices.json"
    prices.write_text('{"gpt-4o": {"input_mtok": 1, "output_mtok": 1}}')
    main([str(raw), "--json", "--prices", str(prices)])
    assert results(capsys)[0]["cost"]["price"]["source"] == f"price file {prices}"
    for content, says in (
        (b"[]", f"{prices}: expected an object"),
        (b"\xff\xfe{", f"{prices} is not JSON"),  # bytes of no text: refused, not a crash
    ):
        prices.write_bytes(content)
        assert main([str(raw), "--prices", str(prices)]) == 2
        assert capsys.readouterr().err.startswith(f"toolcall-lens: {says}")
    absent = tmp_path / "absent.json"
    assert main([str(raw), "--prices", str(absent)]) == 2
    assert capsys.readouterr().err == f"toolcall-lens: cannot read {absent}: No such file or directory\n"


# --- _span_export: --otlp refused (7, 8, 13, 14)


def test_an_otlp_export_that_cannot_be_made_says_why(monkeypatch, capsys):
    raw = str(DATA / "openai_chat_parallel.sse")
    assert main([raw, "--otlp", "127.0.0.1:4318"]) == 2
    assert capsys.readouterr().err == "toolcall-lens: --otlp 127.0.0.1:4318: not an http:// or https:// URL\n"
    monkeypatch.setitem(
        sys.modules, "opentelemetry.sdk.trace", None
    )  # as if the otel extra were not installed
    assert main([raw, "--otlp", "http://127.0.0.1:4318"]) == 2
    assert "pip install -e '.[otel]'" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "toolcall_lens.otel", None)  # as if the addon's package were not
    assert main([raw, "--otlp", "http://127.0.0.1:4318"]) == 2
    assert capsys.readouterr().err.startswith(
        "toolcall-lens: --otlp needs the addon's package (toolcall_lens): "
    )


# --- main: a WebSocket connection that fails, and the jobs after a connection (277, 286, 287, 322)


def test_a_failed_capture_is_a_failure_record_and_the_jobs_after_it_and_after_a_connection_still_run(
    tmp_path, capsys
):
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"websocket": "wss://h/v1/responses"}\n')
    ws = websocket_flow("openai-responses")
    after = http_flow(chat_stream([SEARCH]), follow_up([]))
    dump = dump_of(tmp_path / "mixed.flows", ws, after)
    assert main([str(empty), dump, "--json"]) == 2
    *answers, failure = results(capsys)
    assert [r["source"]["flow_id"] for r in answers] == [ws.id] * 3 + [after.id]
    assert failure == {
        "source": {"file": str(empty)},
        "error": f"{empty}: no LLM response in its 0 WebSocket message(s)",
    }


# --- main, _dump_jobs: a dump flow's own request: its declared tools and its turn's facts, unless --request
# names another (main 337; _dump_jobs 104, 105)


def test_a_dump_flow_is_read_with_its_own_request_unless_request_is_given(tmp_path, capsys):
    declared = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]
    other = tmp_path / "request.json"
    other.write_text(json.dumps({"tools": [{"type": "function", "function": {"name": "rm_rf"}}]}))
    rm = ("call_2", "rm_rf", "{}")
    dump = dump_of(
        tmp_path / "tools.flows",
        http_flow(chat_stream([SEARCH]), {**follow_up([]), "tools": declared}),
        http_flow(chat_stream([rm]), {**follow_up([[SEARCH]]), "tools": declared}, start=START + 5),
    )
    main([dump, "--json"])
    first, second = results(capsys)
    assert [[w["code"] for w in r["warnings"]] for r in (first, second)] == [[], ["undeclared-tool"]]
    assert [t["id"] for t in second["session"]["tool_results"]] == ["call_1"]
    main([dump, "--json", "--request", str(other)])
    first, second = results(capsys)
    assert [[w["code"] for w in r["warnings"]] for r in (first, second)] == [["undeclared-tool"], []]
    assert [t["id"] for t in second["session"]["tool_results"]] == ["call_1"]  # its turn: its own request's


# --- _dump_jobs: an error flow's reason and content type, a stream's encoding, a dump of no LLM flow (86,
# 87, 106, 115-119)


def test_a_dump_flows_error_encoding_and_a_dump_without_llm_flows(tmp_path, capsys):
    error = http_flow(b'{"error": {"message": "slow down"}}', follow_up([]))
    error.response.status_code, error.response.reason = 429, "Too Many Requests"
    error.response.headers["content-type"] = "application/json"
    zipped = http_flow(gzip.compress(chat_stream([SEARCH])), follow_up([]), encoding="gzip", start=START + 5)
    dump = dump_of(tmp_path / "llm.flows", error, zipped)
    main([dump, "--json"])
    refused, streamed = results(capsys)
    (warning,) = refused["warnings"]
    assert (warning["status"], warning["reason"], warning["content_type"]) == (
        429,
        "Too Many Requests",
        "application/json",
    )
    assert [c["name"] for c in streamed["choices"][0]["tool_calls"]] == ["search"]
    assert capsys.readouterr().err == ""  # LLM flows in it: nothing to say
    other = tflow.tflow(resp=True)
    other.request.path = "/index.html"
    nothing = dump_of(tmp_path / "web.flows", other)
    assert main([nothing]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"toolcall-lens: {nothing}: no LLM flows with a body in this dump\n"


# --- _websocket_flow_job, _run_connection: the connection's end, the addon's record, a response's time (wj
# 40, 57, 58; _run_connection 111)


def test_a_response_the_connections_end_cut_short_runs_until_that_end(tmp_path, capsys):
    ws = websocket_flow("openai-responses", start=START)
    ws.websocket.messages = ws.websocket.messages[:-1]  # the last response.completed never came
    ws.websocket.timestamp_end = START + 30
    main([dump_of(tmp_path / "cut.flows", ws), "--json"])
    last = results(capsys)[-1]
    assert not last["complete"] and last["timing"]["duration"] == 30 - 12  # its first message: the 13th


@pytest.mark.parametrize("trimmed", [None, -1])
def test_a_record_trimming_no_positive_number_of_messages_is_re_analysed(trimmed, tmp_path, capsys):
    flow = recorded_flow(trimmed, start=START + 1)
    flow.request.timestamp_start = START
    dump = dump_of(tmp_path / "recorded.flows", flow)
    assert main([dump, "--json", "--strategies", "none"]) == 1
    # Re-analysed under this run's strategies (none): the record's recency-misroute is not there.
    assert [w["code"] for w in results(capsys)[1]["warnings"]] == ["unanswered-call"]


def test_a_captures_responses_have_no_request_time(tmp_path, capsys):
    path = tmp_path / "capture.jsonl"
    path.write_text(capture("openai-responses"))  # its lines have timestamps, its connection no request
    main([str(path), "--json"])
    assert ["time" in r["source"] for r in results(capsys)] == [False] * 3
