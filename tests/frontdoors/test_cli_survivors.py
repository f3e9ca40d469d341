"""The command line: what a mutation run found untested (the logic survivors of ``accumulator/cli.py``; see
docs/mutation.md). Each test was checked by applying the mutation it guards against to the source by hand
and seeing it fail."""

from __future__ import annotations

import base64
import gzip
import json
import time
from pathlib import Path

import pytest
from chat_flows import chat_stream, follow_up
from mitmproxy import io as mio
from mitmproxy.test import tflow
from mitmproxy.websocket import WebSocketMessage
from streams import DATA, call, choice, chunk, sse, tool_chunk, warning
from websocket_messages import capture, recorded_flow, websocket_flow
from wsproto.frame_protocol import Opcode

from accumulator.cli import main

CLEAN = str(DATA / "openai_chat_parallel.sse")
PRODUCTION = DATA / "production_interleaved.sse"
REQUEST = str(DATA / "production_request.json")
SEARCH = ("call_1", "search", '{"q": "rbi"}')
FETCH = ("call_2", "fetch", '{"url": "x"}')


def run_json(capsys, *argv: str, sessions_view: bool = False) -> tuple[int, list, str]:
    code = main([*argv, "--json"], sessions_view=sessions_view)
    captured = capsys.readouterr()
    return code, json.loads(captured.out)["results"], captured.err


def http_flow(body: bytes | None, request: dict | None = None, *, content_type: str = "text/event-stream"):
    """A finished Chat flow as mitmdump stores it: the request, the response's body as sent, its times."""
    flow = tflow.tflow(resp=True)
    flow.request.method, flow.request.path = "POST", "/v1/chat/completions"
    flow.request.content = json.dumps(request if request is not None else {"stream": True}).encode()
    flow.response.headers["content-type"] = content_type
    flow.response.raw_content = body
    flow.request.timestamp_start, flow.request.timestamp_end = 99.5, 100.0
    flow.response.timestamp_start, flow.response.timestamp_end = 100.25, 102.0
    return flow


def dump(path: Path, *flows) -> str:
    with open(path, "wb") as f:
        writer = mio.FlowWriter(f)
        for flow in flows:
            writer.add(flow)
    return str(path)


# --- main: usage errors, the option types (x_main 2, 4, 134; _names 9, 10; _strategy_list) ---------------


def test_usage_errors_name_the_program_and_say_what_is_wrong(capsys):
    with pytest.raises(SystemExit):
        main([CLEAN, "--inject", "interleave"])
    err = capsys.readouterr().err
    assert err.startswith("usage: toolcall-lens ") and "--inject/--repair and --output go together" in err
    with pytest.raises(SystemExit):
        main([CLEAN, "--loop-after", "1"], sessions_view=True)
    assert capsys.readouterr().err.startswith("usage: toolcall-lens sessions ")


@pytest.mark.parametrize(
    "option,bad,known",
    [
        ("--inject", "shuffle", "interleave, split-names, repeat-names, collide-index, seed-args, rechunk"),
        ("--repair", "polish", "serialize, reindex"),
        ("--strategies", "fifo", "recency, index-only, id-then-index, field-concat, last-wins"),
    ],
)
def test_an_unknown_name_is_a_usage_error_naming_it_and_the_known_ones(option, bad, known, capsys):
    with pytest.raises(SystemExit) as exc:
        main([CLEAN, option, f"{known.split(', ')[0]},{bad}"])
    assert exc.value.code == 2
    assert f"['{bad}']; known: {known}" in capsys.readouterr().err


def test_strategies_is_a_comma_list_of_known_names(capsys):
    _, (result,), _ = run_json(capsys, str(PRODUCTION), "--strategies", "recency, last-wins")
    assert sorted(result["compatibility"]) == ["last-wins", "recency"]
    for empty in (",", " , "):  # no name at all: not the same as 'none'
        with pytest.raises(SystemExit):
            main([CLEAN, "--strategies", empty])


# --- main: every file is read, a failed capture is a failure entry (x_main 197, 206, 207) -----------------


def test_a_capture_that_fails_is_reported_and_the_files_after_it_are_still_read(tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"websocket": "wss://h/v1/responses"}\n')
    good = tmp_path / "good.jsonl"
    good.write_text(capture("openai-realtime"))
    code, results, err = run_json(capsys, str(empty), str(good), CLEAN)
    assert code == 2
    assert [r["source"]["file"] for r in results] == [str(good), CLEAN, str(empty)]
    said = f"{empty}: no LLM response in its 0 WebSocket message(s)"  # no "()" when nothing more to say
    assert results[-1] == {"source": {"file": str(empty)}, "error": said}
    assert err == f"toolcall-lens: {said}\n"


# --- main: a dump's requests are checked against the calls of the flows before them (x_main 219, 221, 224;
# _dump_jobs 70, 82, 107) --------------------------------------------------------------------------------


def test_a_dump_flows_echoes_are_checked_against_the_earlier_flows_calls(tmp_path, capsys):
    first = http_flow(chat_stream([SEARCH, FETCH]), follow_up([]))
    second = http_flow(chat_stream([]), follow_up([[SEARCH, FETCH]], answers={"call_1": "ok"}))
    code, results, _ = run_json(capsys, dump(tmp_path / "run.flows", first, second))
    assert code == 1
    left_out = warning(results[1], "unanswered-call")
    assert left_out["id"] == "call_2" and left_out["earlier_flow"] == first.id
    assert results[1]["evidence"]["earlier_flows"] == [first.id]


def test_a_dump_flows_compressed_request_is_read_decoded_or_said_unreadable_as_live(tmp_path, capsys):
    # Codex compresses its requests (zstd): the CLI reads a dump's as the addon reads them live, decoded
    # (here gzip), and says in the result's evidence why one cannot be read (the addon's words).
    first = http_flow(chat_stream([SEARCH, FETCH]), follow_up([]))
    second = http_flow(chat_stream([]), follow_up([[SEARCH, FETCH]], answers={"call_1": "ok"}))
    second.request.headers["content-encoding"] = "gzip"
    second.request.raw_content = gzip.compress(second.request.raw_content)
    third = http_flow(chat_stream([]), follow_up([[SEARCH, FETCH]]))
    third.request.headers["content-encoding"] = "gzip"
    third.request.raw_content = b"\x1f\x8b\x08\x00" + b"not gzip" * 10
    code, results, _ = run_json(capsys, dump(tmp_path / "run.flows", first, second, third))
    assert code == 1
    assert warning(results[1], "unanswered-call")["id"] == "call_2"
    assert results[1]["evidence"]["earlier_flows"] == [first.id]
    evidence = results[2]["evidence"]
    assert evidence["checked"] == 0 and evidence["reason"].startswith(
        "the request's body cannot be read: its content-encoding 'gzip' does not decode (gzip: "
    )


# --- the caps: the addon's options of the same names ----------------------------------------------------


@pytest.mark.parametrize(
    "flag,value,code",
    [
        ("--argument-cap", "5", "arguments-cap"),  # {"city": "Paris"} is 17 characters
        ("--max-calls", "1", "calls-cap"),  # two calls
        ("--event-cap", "100", "oversized-event"),  # events of ~150-250 bytes
        ("--decoded-cap", "400", "decoded-size-cap"),  # a body of ~1,700 bytes
    ],
)
def test_the_caps_apply_as_the_addons_options_of_the_same_names(flag, value, code, capsys):
    # A dump recorded with other caps than the defaults is re-analysed as it was recorded.
    _, (result,), _ = run_json(capsys, CLEAN)
    assert result["warnings"] == []
    _, (capped,), _ = run_json(capsys, CLEAN, flag, value)
    assert warning(capped, code)["limit"] == int(value)
    if flag == "--argument-cap":
        (kept, *_) = capped["choices"][0]["tool_calls"]
        assert kept["arguments_truncated"] is True and kept["arguments"] == '{"cit'


def test_a_dump_flows_compressed_request_past_the_decoded_cap_is_said_so(tmp_path, capsys):
    first = http_flow(chat_stream([SEARCH, FETCH]), follow_up([]))
    asked = follow_up([[SEARCH, FETCH]])
    asked["messages"][0]["content"] = "go " * 1000  # larger than the streams, which the cap holds too
    second = http_flow(chat_stream([]), asked)
    second.request.headers["content-encoding"] = "gzip"
    size = len(second.request.raw_content)
    assert size > max(len(first.response.raw_content), len(second.response.raw_content))
    second.request.raw_content = gzip.compress(second.request.raw_content)
    path = dump(tmp_path / "run.flows", first, second)
    _, results, _ = run_json(capsys, path)
    read = results[1]["evidence"]
    assert read["checked"] == 4 and read["reason"] is None  # the two calls echoed, their two results
    _, results, _ = run_json(capsys, path, "--decoded-cap", str(size))  # the cap exactly: read
    assert results[1]["evidence"] == read
    _, results, _ = run_json(capsys, path, "--decoded-cap", str(size - 1))
    evidence = results[1]["evidence"]
    assert evidence["checked"] == 0 and evidence["reason"].startswith("the request's body cannot be read: ")
    assert str(size - 1) in evidence["reason"]


@pytest.mark.parametrize(
    "argv,says",
    [
        (["--max-calls", "0"], "argument --max-calls: must be at least 1"),
        (["--event-cap", "0"], "argument --event-cap: must be at least 1"),
        (["--decoded-cap", "-5"], "argument --decoded-cap: must be at least 1"),
        (["--argument-cap", "-1"], "argument --argument-cap: must be at least 0"),
        (["--argument-cap", "1e3"], "argument --argument-cap: '1e3' is not a whole number"),
    ],
)
def test_a_cap_out_of_range_is_a_usage_error_saying_so(argv, says, capsys):
    with pytest.raises(SystemExit) as exc:
        main([CLEAN, *argv])
    assert exc.value.code == 2 and says in capsys.readouterr().err


# --- --inject/--repair (_rewrite 1, 2, 47, 48, 57, 61, 68; _read_bytes 8; _jobs 34) ------------------------


@pytest.mark.parametrize("kind", ["message", "capture", "dump"])
def test_inject_rewrites_nothing_but_one_raw_stream(kind, tmp_path, capsys):
    path = tmp_path / kind
    if kind == "message":
        path.write_text(json.dumps({"type": "message", "model": "claude", "content": []}))
    elif kind == "capture":
        path.write_text(capture("openai-responses"))
    else:
        dump(path, http_flow(PRODUCTION.read_bytes()))
    out = tmp_path / "out.sse"
    assert main([str(path), "--inject", "interleave", "--output", str(out)]) == 2
    assert "rewrite one raw streamed body" in capsys.readouterr().err and not out.exists()


def test_a_file_that_cannot_be_read_or_written_says_why(tmp_path, capsys):
    assert main(["/nonexistent/body.sse"]) == 2
    assert capsys.readouterr().err.endswith("cannot read /nonexistent/body.sse: No such file or directory\n")
    out = tmp_path / "missing" / "out.sse"
    assert main([CLEAN, "--inject", "interleave", "--output", str(out)]) == 2
    assert capsys.readouterr().err == f"toolcall-lens: cannot write {out}: No such file or directory\n"


def test_a_rewritten_stream_keeps_the_request_and_its_report_names_where_it_came_from(tmp_path, capsys):
    path, out = tmp_path / "undeclared.sse", tmp_path / "out.sse"
    path.write_bytes(sse(tool_chunk(call(0, "a", "rm_rf", "{}")), chunk(choice(0, "tool_calls"))))
    argv = [str(path), "--repair", "serialize", "--output", str(out), "--request", REQUEST]
    _, (result,), _ = run_json(capsys, *argv)
    assert [w["code"] for w in result["warnings"]] == ["undeclared-tool"]
    assert main(argv) == 0
    assert capsys.readouterr().out.startswith(f"== {out} (rewritten from {path}) (openai-chat")


def test_a_stream_named_with_format_can_be_rewritten(tmp_path, capsys):
    path, out = tmp_path / "unrecognised.sse", tmp_path / "out.sse"
    path.write_bytes(b'data: {"oops\n\n')  # detection cannot tell; --format names it a Chat stream
    argv = [str(path), "--format", "openai-chat", "--inject", "rechunk", "--output", str(out)]
    _, (result,), _ = run_json(capsys, *argv)
    assert result["format"] == "openai-chat" and result["rewrite"]["inject"] == ["rechunk"]


# --- --format and a JSON message (_jobs 28, 31, 32) ------------------------------------------------------


def test_format_reads_a_json_message_of_its_own_format_as_one_and_of_another_as_a_stream(tmp_path, capsys):
    path = tmp_path / "message.json"
    path.write_text(json.dumps({"type": "message", "model": "claude", "content": []}))
    _, (own,), _ = run_json(capsys, str(path), "--format", "anthropic-messages")
    assert (own["format"], own["streamed"]) == ("anthropic-messages", False)
    _, (other,), _ = run_json(capsys, str(path), "--format", "openai-chat")
    assert (other["format"], other["streamed"]) == ("openai-chat", True)


# --- a dump's HTTP flows (_dump_jobs; _run 5-8, 14-17, 27; _jobs 6; _recorded 6) --------------------------


def test_a_dump_flows_http_error_gives_its_status_reason_and_content_type(tmp_path, capsys):
    limited = http_flow(
        b'{"error": {"message": "slow down"}}', content_type="application/json; charset=utf-8"
    )
    limited.response.status_code, limited.response.reason = 429, "Too Many Requests"
    broken = http_flow(b"upstream gone", {"stream": False})
    broken.response.status_code, broken.response.reason = 502, "Bad Gateway"
    del broken.response.headers["content-type"]
    _, results, _ = run_json(capsys, dump(tmp_path / "errors.flows", limited, broken))
    said = [warning(r, "http-error") for r in results]
    assert [(w["status"], w["reason"], w["content_type"]) for w in said] == [
        (429, "Too Many Requests", "application/json; charset=utf-8"),
        (502, "Bad Gateway", ""),
    ]
    assert "no content type" in said[1]["message"]
    assert [r["streamed"] for r in results] == [True, False]  # what each request asked for


def test_a_dump_flows_bodies_are_decoded_as_their_headers_say(tmp_path, capsys):
    stream = http_flow(gzip.compress(PRODUCTION.read_bytes()))
    stream.response.headers["content-encoding"] = "gzip"
    message = {"model": "m", "choices": [{"index": 0, "message": {"content": "hi"}, "finish_reason": "stop"}]}
    zipped = http_flow(gzip.compress(json.dumps(message).encode()), content_type="application/json")
    zipped.response.headers["content-encoding"] = "gzip"
    # Headers that name an encoding the body does not have: the bytes are read as they are.
    odd = http_flow(json.dumps(message).encode(), {"stream": False}, content_type="application/json")
    odd.response.headers["content-encoding"] = "x-unknown"
    odd.request.headers["content-encoding"] = "x-unknown"
    _, results, _ = run_json(capsys, dump(tmp_path / "encoded.flows", stream, zipped, odd))
    assert [c["name"] for c in results[0]["choices"][0]["tool_calls"]] == [
        "search_circulars",
        "get_user_profile",
    ]
    assert [r["choices"][0]["text"] for r in results[1:]] == ["hi", "hi"]


def test_a_dump_flow_is_checked_against_its_own_request_unless_request_names_another(tmp_path, capsys):
    own = {"stream": True, "tools": [{"type": "function", "function": {"name": "other"}}]}
    flows = dump(tmp_path / "run.flows", http_flow(chat_stream([SEARCH]), own))
    _, (result,), _ = run_json(capsys, flows)
    assert warning(result, "undeclared-tool")["name"] == "search"
    declared = tmp_path / "request.json"
    declared.write_text(json.dumps({"tools": [{"type": "function", "function": {"name": "search"}}]}))
    _, (result,), _ = run_json(capsys, flows, "--request", str(declared))
    assert "undeclared-tool" not in [w["code"] for w in result["warnings"]]


def test_a_dump_json_message_has_no_flow_timing_and_a_foreign_record_is_ignored(tmp_path, capsys):
    message = {"model": "m", "choices": [{"index": 0, "message": {"content": "hi"}, "finish_reason": "stop"}]}
    json_flow = http_flow(json.dumps(message).encode(), {"stream": False}, content_type="application/json")
    stream = http_flow(PRODUCTION.read_bytes())
    stream.metadata["toolcall_lens"] = "another addon's note"  # not the addon's record: not read as one
    _, results, _ = run_json(capsys, dump(tmp_path / "mixed.flows", json_flow, stream))
    assert "timing" not in results[0]["source"]
    assert results[1]["source"]["timing"].startswith("the flow's timestamps")
    assert results[1]["timing"]["time_to_first_byte"] == 0.25


def test_flows_a_dump_skips_do_not_stop_the_reading(tmp_path, capsys):
    unanswered = tflow.tflow()  # no response
    ws = websocket_flow("openai-realtime")
    path = dump(
        tmp_path / "mixed.flows", unanswered, tflow.ttcpflow(), ws, http_flow(PRODUCTION.read_bytes())
    )
    _, results, _ = run_json(capsys, path)
    assert [r["source"]["flow_id"] for r in results] == [ws.id, results[1]["source"]["flow_id"]]
    assert results[1]["format"] == "openai-chat"
    assert [r["source"]["file"] for r in results] == [path, path]
    assert [r["format"] for r in results] == ["openai-realtime", "openai-chat"]


def test_a_dump_without_llm_flows_says_so_and_one_with_them_does_not(tmp_path, capsys):
    other = tflow.tflow(resp=True)
    path = dump(tmp_path / "other.flows", other)
    code, results, err = run_json(capsys, path)
    assert (code, results, err) == (0, [], f"toolcall-lens: {path}: no LLM flows with a body in this dump\n")
    _, _, err = run_json(capsys, dump(tmp_path / "llm.flows", http_flow(PRODUCTION.read_bytes())))
    assert err == ""


# --- a dump's stream: the timing the flow's timestamps tell (_timing_from_the_flow; _call_times 13, 32) ----


def test_a_flows_timestamps_give_first_byte_duration_and_event_rate(tmp_path, capsys):
    flow = http_flow(PRODUCTION.read_bytes())
    flow.response.timestamp_end = 101.95
    _, (result,), _ = run_json(capsys, dump(tmp_path / "plain.flows", flow))
    events = result["stats"]["events"]
    assert result["timing"] == {
        "clock": True,
        "time_to_first_byte": 0.25,
        "time_to_first_event": None,
        "time_to_first_token": None,
        "first_token_event": None,
        "duration": 1.95,
        "events_per_second": round(events / (101.95 - 100.25), 3),
        "longest_gap": None,
        "longest_gap_after_event": None,
    }


def test_a_flow_missing_a_timestamp_gives_what_the_others_tell(tmp_path, capsys):
    unsent = http_flow(PRODUCTION.read_bytes())
    unsent.request.timestamp_end = None
    unended = http_flow(PRODUCTION.read_bytes())
    unended.response.timestamp_end = None
    _, results, _ = run_json(capsys, dump(tmp_path / "partial.flows", unsent, unended))
    assert "timing" not in results[0]["source"]
    timing = results[1]["timing"]
    assert (timing["time_to_first_byte"], timing["duration"], timing["events_per_second"]) == (
        0.25,
        None,
        None,
    )


def test_a_record_without_a_clock_or_with_little_else_still_gives_a_timing(tmp_path, capsys):
    clockless = http_flow(PRODUCTION.read_bytes())
    clockless.metadata["toolcall_lens"] = {"timing": {"clock": False}, "warnings": [], "choices": []}
    measured = {"clock": True, "time_to_first_byte": 0.5, "duration": 3.0}
    sparse = http_flow(PRODUCTION.read_bytes())
    sparse.metadata["toolcall_lens"] = {"timing": measured}  # no warnings, no choices (another version's)
    _, results, _ = run_json(capsys, dump(tmp_path / "records.flows", clockless, sparse))
    assert results[0]["timing"]["time_to_first_byte"] == 0.25  # the flow's, not the record's null clock
    assert results[1]["timing"] == measured


def test_each_choices_calls_get_the_times_the_addon_saw_where_it_rebuilt_the_same_calls(tmp_path, capsys):
    body = sse(
        tool_chunk(call(0, "a", "f", "{}"), choice_index=0),
        tool_chunk(call(0, "b", "g", "{}"), choice_index=1),
    )
    flow = http_flow(body)
    flow.metadata["toolcall_lens"] = {
        "timing": {"clock": True},
        "warnings": [],
        "choices": [
            {"tool_calls": [{"id": "other", "name": "f", "first_at": 0.1, "last_at": 0.2}]},  # not the same
            {"tool_calls": [{"id": "b", "name": "g", "first_at": 0.5, "last_at": 0.75}]},
        ],
    }
    _, (result,), _ = run_json(capsys, dump(tmp_path / "choices.flows", flow))
    times = [(c["first_at"], c["last_at"]) for ch in result["choices"] for c in ch["tool_calls"]]
    assert times == [(None, None), (0.5, 0.75)]


def test_a_flows_clock_in_the_report_is_utc_whatever_the_machines_zone(tmp_path, capsys, monkeypatch):
    path = dump(tmp_path / "plain.flows", http_flow(PRODUCTION.read_bytes()))
    monkeypatch.setenv("TZ", "Asia/Kolkata")
    time.tzset()
    try:
        assert main([path]) == 1
    finally:
        monkeypatch.undo()
        time.tzset()
    assert " at 00:01:39 UTC, POST " in capsys.readouterr().out  # 99.5 s after the epoch


# --- WebSocket connections (_run_connection; _place_connection_warnings; _message_times; _websocket_flow_job)


def test_a_bad_line_between_responses_goes_on_the_next_one_and_a_last_one_on_the_last(tmp_path, capsys):
    lines = capture("openai-responses").splitlines()
    lines.insert(4, "not json")  # after response 1 (the prewarm) completed, before response 2 began
    lines.append("also not json")  # after the last response
    path = tmp_path / "capture.jsonl"
    path.write_text("\n".join(lines) + "\n")
    _, results, _ = run_json(capsys, str(path))
    placed = [[w["line"] for w in r["warnings"] if w["code"] == "malformed-event"] for r in results]
    assert placed == [[], [5], [19]]
    # A capture's result names its file, URL and position: no flow, so no flow time and no timing source.
    assert results[0]["source"] == {
        "file": str(path),
        "url": "wss://api.example.com/v1/responses",
        "position": 1,
    }


def test_a_response_the_connections_end_cut_short_lasts_until_the_end(tmp_path, capsys):
    ws = websocket_flow("openai-responses", start=946684800.0)
    del ws.websocket.messages[-1]  # the last response never completes
    ws.websocket.timestamp_end = 946684800.0 + 30
    _, results, _ = run_json(capsys, dump(tmp_path / "cut.flows", ws))
    assert [w["code"] for w in results[2]["warnings"]] == ["truncated-stream"]
    assert results[2]["timing"]["duration"] == 18.0  # from its first message (12 s in) to the close


def test_a_websocket_flow_with_no_response_says_so_unless_it_is_no_llm_connection(tmp_path, capsys):
    quiet = websocket_flow("openai-realtime")
    del quiet.websocket.messages[1:]  # session.created only
    chat = websocket_flow("openai-realtime")
    chat.request.path = "/chat"
    for message in chat.websocket.messages:
        message.content = b'{"kind": "chat"}'
    code, results, err = run_json(capsys, dump(tmp_path / "quiet.flows", quiet, chat))
    assert (code, results) == (0, [])
    title = f"{tmp_path / 'quiet.flows'}: flow {quiet.id[:8]}, WebSocket {quiet.request.pretty_url}"
    assert (
        err
        == f"toolcall-lens: {title}: no response on this openai-realtime WebSocket (1 stored message(s))\n"
    )


def test_a_trimmed_responses_time_is_its_first_stored_message_or_else_the_flows(tmp_path, capsys):
    # Response 3 begins at message 13. Trimmed 12, only message 13 stored: its time (the last message's).
    ws = recorded_flow(12, keep=slice(12, 13))
    _, results, _ = run_json(capsys, dump(tmp_path / "one.flows", ws))
    assert results[2]["source"]["time"] == "2000-01-01T00:00:12+00:00"
    # Trimmed 13: message 13 is gone too, so the flow's own request time.
    ws = recorded_flow(13, keep=slice(13, None))
    _, results, _ = run_json(capsys, dump(tmp_path / "gone.flows", ws))
    flow_time = results[0]["source"]["time"]
    assert [r["source"]["time"] for r in results] == [flow_time] * 3
    assert flow_time != "2000-01-01T00:00:15+00:00"  # the flow's request, not the last stored message


@pytest.mark.parametrize("trimmed", [0, -1, "12", None])
def test_a_record_trimming_nothing_that_makes_sense_is_re_analysed(trimmed, tmp_path, capsys):
    ws = recorded_flow(trimmed)
    _, results, _ = run_json(capsys, dump(tmp_path / "odd.flows", ws))
    assert [r["source"]["timing"][:13] for r in results] == ["re-computed f"] * 3


def test_a_websocket_flows_path_names_its_format_when_its_first_messages_cannot(tmp_path, capsys):
    ws = websocket_flow("openai-realtime")
    keepalive = WebSocketMessage(
        Opcode.TEXT, False, b'{"type": "keepalive"}', ws.websocket.messages[0].timestamp
    )
    ws.websocket.messages[0:0] = [keepalive] * 10
    _, (result,), _ = run_json(capsys, dump(tmp_path / "rt.flows", ws))
    assert result["format"] == "openai-realtime"


def test_a_websocket_flows_turns_are_at_its_request_time_in_the_sessions_view(tmp_path, capsys):
    ws = websocket_flow("openai-responses")
    assert main([dump(tmp_path / "ws.flows", ws), "--json"], sessions_view=True) == 1
    (session,) = json.loads(capsys.readouterr().out)["sessions"]
    assert {turn["time"] for turn in session["turns"]} == {ws.request.timestamp_start}


# --- WebSocket captures, line by line (_is_capture; _capture_job; _capture_line) --------------------------


def write_capture(path: Path, lines: list[str], *, prefix: bytes = b"") -> str:
    path.write_bytes(prefix + "\n".join(lines).encode("utf-8", "surrogatepass") + b"\n")
    return str(path)


def malformed(results: list) -> dict:
    return {w["line"]: w["message"] for r in results for w in r["warnings"] if "line" in w}


def test_a_capture_after_a_bom_and_blank_lines_is_read_whole(tmp_path, capsys):
    lines = capture("openai-realtime").splitlines()
    lines[4:4] = ["", "  "]  # blank lines inside: skipped, not the end
    path = write_capture(tmp_path / "capture.jsonl", lines, prefix=b"\xef\xbb\xbf\n")
    _, (result,), _ = run_json(capsys, path)
    assert result["source"]["url"] == "wss://api.example.com/v1/realtime?model=gpt-realtime"
    assert [c["name"] for c in result["choices"][0]["tool_calls"]] == ["lookup"] and result["warnings"] == []


def test_only_a_captures_first_line_names_the_connection(tmp_path, capsys):
    lines = capture("openai-realtime").splitlines()
    lines.insert(3, json.dumps({"websocket": "wss://elsewhere/v1/responses"}))
    _, (result,), _ = run_json(capsys, write_capture(tmp_path / "capture.jsonl", lines))
    assert result["source"]["url"] == "wss://api.example.com/v1/realtime?model=gpt-realtime"
    assert malformed([result]) == {
        4: "line 4 of "
        + str(tmp_path / "capture.jsonl")
        + ' is no message: "from_client" is not true or false'
    }


def test_a_first_line_naming_no_url_is_a_warning_on_line_1(tmp_path, capsys):
    lines = capture("openai-realtime").splitlines()
    lines[0] = json.dumps({"websocket": 5})
    _, (result,), _ = run_json(capsys, write_capture(tmp_path / "capture.jsonl", lines))
    assert "url" not in result["source"] and result["format"] == "openai-realtime"  # from its messages
    assert list(malformed([result])) == [1]
    assert malformed([result])[1].endswith('is no message: "websocket" is not a URL or path')


def test_a_capture_named_with_a_format_not_spoken_over_websockets_is_an_input_error(tmp_path, capsys):
    path = write_capture(tmp_path / "capture.jsonl", capture("openai-realtime").splitlines())
    assert main([path, "--format", "openai-chat"]) == 2
    assert capsys.readouterr().err == (
        f"toolcall-lens: {path} is a WebSocket capture; openai-chat is not spoken over WebSockets (those that "
        "are: gemini-live, openai-realtime, openai-responses)\n"
    )


def test_messages_of_bytes_that_are_not_utf8_are_reported_as_text_or_binary(tmp_path, capsys):
    # A capture's base64 line is a binary frame; a bad line's bytes are shown as far as they decode.
    lines = capture("openai-responses").splitlines()
    lines.insert(5, json.dumps({"from_client": False, "base64": base64.b64encode(b"\xff\xfe").decode()}))
    path = tmp_path / "capture.jsonl"
    path.write_bytes(b"\n".join([line.encode() for line in lines] + [b"\xff\xfe not json"]) + b"\n")
    _, results, _ = run_json(capsys, str(path))
    bad_utf8 = [w["message"] for r in results for w in r["warnings"] if w["code"] == "invalid-utf8"]
    assert bad_utf8 == ["message 5 (server, binary) holds bytes that are not UTF-8"]
    assert malformed(results)[19].endswith("is no message: not a JSON object: '\ufffd\ufffd not json'")
    # A dump's text frame can hold them too.
    ws = websocket_flow("openai-responses")
    ws.websocket.messages[4].content = b"\xff\xfe"
    _, results, _ = run_json(capsys, dump(tmp_path / "ws.flows", ws))
    bad_utf8 = [w["message"] for r in results for w in r["warnings"] if w["code"] == "invalid-utf8"]
    assert bad_utf8 == ["message 5 (server, text) holds bytes that are not UTF-8"]


def test_a_message_whose_timestamp_is_no_number_is_at_the_time_of_the_one_before(tmp_path, capsys):
    lines = capture("openai-responses").splitlines()
    for n in (5, 12):  # response 2's response.created and response.completed
        line = json.loads(lines[n])
        lines[n] = json.dumps({**line, "timestamp": "noon"})
    _, results, _ = run_json(capsys, write_capture(tmp_path / "capture.jsonl", lines))
    assert sorted(malformed(results)) == [6, 13]
    timing = results[1]["timing"]
    assert (timing["time_to_first_byte"], timing["duration"]) == (0.0, 7.0)  # as if sent with the request


# --- files that are no response, requests that are no request (_not_a_response; _read_request 7) ---------


@pytest.mark.parametrize(
    "content,looks",
    [
        (b'{"id": 7, "object": "unknown"}', "a JSON object of no format it reads"),
        (b'"just a string"', "a JSON value of no format it reads"),
        (b"hello \xff world", "text: 'hello \ufffd world'"),
    ],
    ids=["object", "value", "bad-utf8"],
)
def test_a_file_that_is_no_response_says_what_it_looks_like(content, looks, tmp_path, capsys):
    path = tmp_path / "file"
    path.write_bytes(content)
    assert main([str(path)]) == 2
    assert f"{path} is not an LLM response (it looks like {looks}); " in capsys.readouterr().err


def test_a_request_that_is_no_json_object_is_an_input_error(tmp_path, capsys):
    request = tmp_path / "request.json"
    request.write_text("[1, 2]")
    assert main([CLEAN, "--request", str(request)]) == 2
    assert capsys.readouterr().err == f"toolcall-lens: {request} is not a JSON object (a request body)\n"


def test_a_bad_message_that_began_a_response_is_a_warning_on_that_response(tmp_path, capsys):
    # Fault found here: the warning about message 1 went on response 2 (messages 4 to 12).
    lines = capture("openai-responses").splitlines()
    create = json.loads(lines[1])["text"].encode().replace(b"gpt-ws", b"gpt-\xffws")  # response 1's create
    lines[1] = json.dumps({"from_client": True, "base64": base64.b64encode(create).decode()})
    _, results, _ = run_json(capsys, write_capture(tmp_path / "capture.jsonl", lines))
    bad_utf8 = [[w["message"] for w in r["warnings"] if w["code"] == "invalid-utf8"] for r in results]
    assert bad_utf8 == [["message 1 (client, binary) holds bytes that are not UTF-8"], [], []]
