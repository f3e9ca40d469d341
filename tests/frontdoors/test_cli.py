"""The command line: reports, --json, --request, --format, exit codes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from schemas import check_result
from streams import DATA, call, choice, chunk, sse, tool_chunk

from accumulator.cli import main

PRODUCTION = str(DATA / "production_interleaved.sse")
CLEAN = str(DATA / "openai_chat_parallel.sse")
REQUEST = str(DATA / "production_request.json")


def test_clean_stream_report_exits_0(capsys):
    assert main([CLEAN]) == 0
    out = capsys.readouterr().out
    assert "get_weather" in out and "get_time" in out
    assert '"city": "Paris"' in out  # arguments pretty-printed
    assert "warnings: none" in out


def test_misrouted_stream_report_exits_1_and_shows_what_recency_builds(capsys):
    assert main([PRODUCTION]) == 1
    out = capsys.readouterr().out
    assert "recency-misroute" in out
    assert '"query": "RBI circulars"' in out
    assert 'would build get_user_profile({"query": "RBI{"user_id": "u circulars"}123"})' in out


def test_json_output_is_exactly_results(capsys):
    assert main([CLEAN, PRODUCTION, "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert list(doc) == ["results"] and len(doc["results"]) == 2
    assert [r["format"] for r in doc["results"]] == ["openai-chat", "openai-chat"]
    assert doc["results"][1]["choices"][0]["tool_calls"][1]["arguments"] == '{"user_id": "u123"}'


def test_info_warnings_alone_exit_0(tmp_path, capsys):
    body = sse(tool_chunk(call(0, "a", "f", "{}")), chunk(choice(0, "tool_calls")))
    path = tmp_path / "cut_after_done.sse"
    path.write_bytes(body.rstrip(b"\n"))  # no blank line after [DONE]: an info note only
    assert main([str(path), "--json"]) == 0
    warnings = json.loads(capsys.readouterr().out)["results"][0]["warnings"]
    assert [(w["code"], w["severity"]) for w in warnings] == [("unterminated-event", "info")]


def test_request_declares_tools(tmp_path, capsys):
    body = sse(tool_chunk(call(0, "a", "rm_rf", "{}")), chunk(choice(0, "tool_calls")))
    path = tmp_path / "undeclared.sse"
    path.write_bytes(body)
    assert main([str(path), "--request", REQUEST, "--json"]) == 1
    warnings = json.loads(capsys.readouterr().out)["results"][0]["warnings"]
    assert [w["code"] for w in warnings] == ["undeclared-tool"]


def test_format_option_reads_what_detection_cannot(tmp_path, capsys):
    path = tmp_path / "cut.sse"
    path.write_bytes(b'data: {"oops\n\n')  # nothing recognisable
    assert main([str(path)]) == 2
    assert "is not an LLM response" in capsys.readouterr().err
    assert main([str(path), "--format", "openai-chat", "--json"]) == 1
    codes = [w["code"] for w in json.loads(capsys.readouterr().out)["results"][0]["warnings"]]
    assert codes == ["malformed-event", "truncated-stream"]


@pytest.mark.parametrize(
    "argv,message",
    [
        (["/nonexistent/body.sse"], "cannot read /nonexistent/body.sse"),
        ([CLEAN, "--request", "/nonexistent/req.json"], "cannot read"),
        ([CLEAN, "--request", CLEAN], "is not JSON"),
    ],
)
def test_input_errors_exit_2_with_a_message_and_no_output(argv, message, capsys):
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert message in captured.err and "Traceback" not in captured.err
    assert captured.out == ""


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main([])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        main([CLEAN, "--format", "nope"])
    assert exc.value.code == 2


@pytest.mark.live  # runs the installed console script
def test_installed_console_script_runs(tmp_path):
    exe = shutil.which("toolcall-lens", path=str(Path(sys.executable).parent))
    assert exe, "the toolcall-lens console script is not installed next to this Python"
    done = subprocess.run([exe, PRODUCTION, "--json"], check=False, capture_output=True, text=True)
    assert done.returncode == 1 and done.stderr == ""
    assert json.loads(done.stdout)["results"][0]["warnings"][0]["code"] == "recency-misroute"
    missing = subprocess.run([exe, str(tmp_path / "absent.sse")], check=False, capture_output=True, text=True)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr and missing.stdout == ""


def _dump_with_flows(path: Path) -> list:
    from mitmproxy import io as mio
    from mitmproxy.test import tflow

    def flow(route: str, content_type: str, body: bytes | None, request: dict):
        f = tflow.tflow(resp=True)
        f.request.method = "POST"
        f.request.path = route
        f.request.content = json.dumps(request).encode()
        f.response.headers["content-type"] = content_type
        f.response.raw_content = body
        return f

    flows = [
        flow(
            "/v1/chat/completions",
            "text/event-stream",
            (DATA / "production_interleaved.sse").read_bytes(),
            {},
        ),
        flow("/v1/embeddings", "application/json", b'{"data": []}', {}),
        flow("/v1/chat/completions", "text/event-stream", None, {}),  # streamed, body not stored
        flow(
            "/v1/chat/completions",
            "application/json",
            json.dumps(
                {
                    "model": "m",
                    "choices": [{"index": 0, "message": {"content": "hi"}, "finish_reason": "stop"}],
                }
            ).encode(),
            {"stream": False},
        ),
        flow("/notifications", "text/event-stream", b"event: tick\ndata: 1\n\n", {}),  # not an LLM stream
        flow("/gateway/llm", "text/event-stream", (DATA / "cohere_v2_parallel.sse").read_bytes(), {}),
    ]
    with open(path, "wb") as f:
        writer = mio.FlowWriter(f)
        for item in flows:
            writer.add(item)
    return flows


def test_reads_mitmproxy_dumps_one_result_per_llm_flow(tmp_path, capsys):
    dump = tmp_path / "session.flows"
    flows = _dump_with_flows(dump)
    assert main([str(dump), "--json"]) == 1
    captured = capsys.readouterr()
    results = json.loads(captured.out)["results"]
    # Flows on unknown paths are recognised by their first events, or left out.
    assert [r["source"]["flow_id"] for r in results] == [flows[0].id, flows[3].id, flows[5].id]
    assert results[2]["format"] == "cohere-v2"
    assert all(r["source"]["file"] == str(dump) for r in results)
    paths = ["/v1/chat/completions", "/v1/chat/completions", "/gateway/llm"]
    assert [r["source"]["url"].endswith(p) for r, p in zip(results, paths, strict=True)] == [True] * 3
    assert [w["code"] for w in results[0]["warnings"]] == ["recency-misroute"]
    assert results[1]["streamed"] is False and results[1]["choices"][0]["text"] == "hi"
    assert f"flow {flows[2].id}" in captured.err and "no stored body" in captured.err
    assert results[0]["source"]["time"].endswith("+00:00")  # ISO 8601, UTC
    # The readable report names each flow: its short id (what a warning's "flow <id>" leads to), its time.
    assert main([str(dump)]) == 1
    out = capsys.readouterr().out
    assert f"POST {flows[0].request.pretty_url}" in out
    assert f"flow {flows[0].id[:8]} at " in out and " UTC, POST" in out


def test_unreadable_dump_is_an_input_error(tmp_path, capsys):
    bad = tmp_path / "bad.flows"
    bad.write_bytes(b"12:not a flow!")
    assert main([str(bad)]) == 2
    assert "not a readable mitmproxy dump" in capsys.readouterr().err


@pytest.mark.parametrize(
    "name,format",
    [
        ("openai_responses_parallel.sse", "openai-responses"),
        ("anthropic_messages_parallel.sse", "anthropic-messages"),
        ("gemini_parallel.json", "gemini"),
        ("gemini_vertex_partialargs_parallel.sse", "gemini"),
        ("bedrock_converse_parallel.bin", "bedrock-converse"),
        ("bedrock_invoke_anthropic_parallel.bin", "bedrock-invoke"),
        ("cohere_v2_parallel.sse", "cohere-v2"),
        ("ollama_chat_parallel.ndjson", "ollama-chat"),
    ],
)
def test_every_format_is_detected_and_read(name, format, capsys):
    assert main([str(DATA / name), "--json"]) == 0
    (result,) = json.loads(capsys.readouterr().out)["results"]
    assert result["format"] == format
    assert [c["name"] for c in result["choices"][0]["tool_calls"]] == ["get_weather", "get_time"]


def test_format_option_overrides_detection(capsys):
    # Read as Chat Completions, an Anthropic stream has no chunk a chat client understands.
    assert main([str(DATA / "anthropic_messages_parallel.sse"), "--format", "openai-chat", "--json"]) == 1
    (result,) = json.loads(capsys.readouterr().out)["results"]
    assert result["format"] == "openai-chat" and result["choices"] == []


def test_non_streamed_json_body(tmp_path, capsys):
    body = {
        "type": "message",
        "model": "claude",
        "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}],
    }
    path = tmp_path / "message.json"
    path.write_text(json.dumps(body))
    assert main([str(path), "--json"]) == 0
    (result,) = json.loads(capsys.readouterr().out)["results"]
    assert result["format"] == "anthropic-messages" and result["streamed"] is False
    (call,) = result["choices"][0]["tool_calls"]
    assert (call["id"], call["index"], call["name"], call["arguments"]) == ("t", 0, "f", "{}")


# -- --inject / --repair: fixtures for a client's own tests --------------------------------------------------


def test_inject_writes_a_hostile_fixture_and_reports_on_it(tmp_path, capsys):
    out = tmp_path / "hostile.sse"
    # The clean stream's two calls come one after the other: interleaved, recency breaks on them.
    # Written as asked: exit 0 (a script under `set -e` goes on), though the report lists its warnings.
    assert main([CLEAN, "--inject", "interleave,split-names", "--output", str(out), "--json"]) == 0
    (result,) = json.loads(capsys.readouterr().out)["results"]
    assert result["source"] == {"file": str(out), "rewritten_from": CLEAN}
    assert result["rewrite"]["inject"] == ["interleave", "split-names"]
    assert result["compatibility"]["recency"]["verdict"] == "breaks"
    assert "name-split" in [w["code"] for w in result["warnings"]]
    # The file holds what was reported on, and still carries the same calls.
    assert main([str(out), "--json"]) == 1
    again = json.loads(capsys.readouterr().out)["results"][0]
    clean = main([CLEAN, "--json"]) == 0 and json.loads(capsys.readouterr().out)["results"][0]
    assert [(c["id"], c["name"], c["arguments"]) for c in again["choices"][0]["tool_calls"]] == [
        (c["id"], c["name"], c["arguments"]) for c in clean["choices"][0]["tool_calls"]
    ]


def test_repair_writes_a_stream_recency_reads_right(tmp_path, capsys):
    out = tmp_path / "repaired.sse"
    assert main([PRODUCTION, "--repair", "serialize", "--output", str(out)]) == 0
    report = capsys.readouterr().out
    assert "rewritten: injected -, repaired serialize" in report and "warnings: none" in report
    assert main([str(out), "--json"]) == 0


@pytest.mark.parametrize(
    "argv",
    [
        ["--inject", "interleave"],  # no --output
        ["--output", "x.sse"],  # nothing to do
        ["--inject", "shuffle", "--output", "x.sse"],
    ],
)
def test_rewrite_usage_errors_exit_2(argv, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main([CLEAN, *argv])
    assert exc.value.code == 2


def test_rewrite_takes_one_raw_stream(tmp_path, capsys):
    out = tmp_path / "x.sse"
    assert main([CLEAN, PRODUCTION, "--inject", "interleave", "--output", str(out)]) == 2
    assert "one raw streamed body" in capsys.readouterr().err
    assert not out.exists()


def test_several_files_every_readable_one_is_analysed_and_the_bad_ones_are_reported(tmp_path, capsys):
    noise = tmp_path / "noise.bin"
    noise.write_bytes(b"\x7fELF not a response at all")
    misrouted = str(DATA / "production_interleaved.sse")
    argv = [CLEAN, str(noise), "/nonexistent/body.sse", misrouted]
    assert main([*argv, "--json"]) == 2
    captured = capsys.readouterr()
    results = json.loads(captured.out)["results"]
    assert [r["source"]["file"] for r in results] == [CLEAN, misrouted, str(noise), "/nonexistent/body.sse"]
    assert [("format" in r) for r in results] == [True, True, False, False]  # two results, two errors
    assert "is not an LLM response (it looks like text" in results[2]["error"]
    assert "cannot read" in results[3]["error"]
    assert str(noise) in captured.err and "/nonexistent/body.sse" in captured.err
    assert main(argv) == 2  # the report too: both good files, then exit 2
    out = capsys.readouterr().out
    assert out.count("== ") == 2 and "recency" in out


@pytest.mark.parametrize(
    "content,says",
    [
        (b'[{"a":1},{"b":2}]', "it looks like a JSON array of no format it reads"),
        (b'[build-system]\nrequires = ["setuptools"]\n', "it looks like text"),
        (b"", "is empty"),
        (b"  \n", "is empty"),
        (b'{"model": "gpt-4o", "messages": [], "stream": true}', "pass it with --request"),
        (b"\x7fELF\x00\x00\x01", "it looks like binary data"),
    ],
    ids=["json-array", "toml", "empty", "blank", "request-body", "binary"],
)
def test_a_file_that_is_no_llm_response_is_exit_2_saying_what_it_looks_like(tmp_path, capsys, content, says):
    path = tmp_path / "file"
    path.write_bytes(content)
    assert main([str(path)]) == 2
    captured = capsys.readouterr()
    assert says in captured.err and "Traceback" not in captured.err
    assert captured.out == ""


def test_a_json_array_of_gemini_responses_is_still_read_as_gemini(tmp_path, capsys):
    assert main([str(DATA / "gemini_parallel.json"), "--json"]) in (0, 1)
    assert json.loads(capsys.readouterr().out)["results"][0]["format"] == "gemini"


def test_a_dump_cut_off_mid_write_gives_the_flows_before_the_cut(tmp_path, capsys):
    dump = tmp_path / "session.flows"
    flows = _dump_with_flows(dump)
    whole = dump.read_bytes()
    dump.write_bytes(whole[: len(whole) - 50])  # mitmdump killed while writing its last flow
    assert main([str(dump), "--json"]) == 1
    captured = capsys.readouterr()
    results = json.loads(captured.out)["results"]
    assert [r["source"]["flow_id"] for r in results] == [flows[0].id, flows[3].id]  # the last flow is lost
    assert "the dump is cut off after" in captured.err and "the rest is lost" in captured.err


@pytest.mark.live  # the installed console script, its output piped into a reader that leaves early
def test_a_reader_that_leaves_early_ends_the_report_quietly(tmp_path):
    exe = shutil.which("toolcall-lens", path=str(Path(sys.executable).parent))
    files = [PRODUCTION] * 400  # a report far larger than a pipe's buffer
    process = subprocess.Popen([exe, *files], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert process.stdout.read(100)  # like `| head -c 100`
        process.stdout.close()
        stderr = process.stderr.read().decode()
        assert process.wait(timeout=60) == 141
    finally:
        process.kill()
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr and stderr == ""


def _stream_flow(body: bytes):
    from mitmproxy.test import tflow

    f = tflow.tflow(resp=True)
    f.request.method = "POST"
    f.request.path = "/v1/chat/completions"
    f.request.content = b'{"stream": true}'
    f.response.headers["content-type"] = "text/event-stream"
    f.response.raw_content = body
    f.request.timestamp_end = 100.0
    f.response.timestamp_start = 100.25  # the response headers came a quarter second after the request
    f.response.timestamp_end = 102.0
    return f


def _write(path: Path, *flows) -> None:
    from mitmproxy import io as mio

    with open(path, "wb") as f:
        writer = mio.FlowWriter(f)
        for flow in flows:
            writer.add(flow)


def test_a_dump_keeps_the_timing_the_addon_measured_live_and_says_what_was_recomputed(tmp_path, capsys):
    from accumulator import StreamAccumulator

    body = (DATA / "production_interleaved.sse").read_bytes()
    live = StreamAccumulator("openai-chat", started_at=100.0, stall_seconds=0.5)
    events = body.split(b"\n\n")
    for n, event in enumerate(
        events
    ):  # the addon's clock: one event every 0.1 s, a 1 s silence after the 3rd
        live.feed(
            event + b"\n\n" if n < len(events) - 1 else event, now=100.3 + 0.1 * n + (1.0 if n >= 3 else 0)
        )
    recorded = live.finish(now=102.0)
    assert recorded["timing"]["clock"] and any(w["code"] == "stalled" for w in recorded["warnings"])
    flow = _stream_flow(body)
    flow.metadata["toolcall_lens"] = recorded
    dump = tmp_path / "live.flows"
    _write(dump, flow)
    assert main([str(dump), "--json"]) == 1
    (result,) = json.loads(capsys.readouterr().out)["results"]
    assert result["timing"] == recorded["timing"]  # not null: what the addon measured
    assert [c["first_at"] for c in result["choices"][0]["tool_calls"]] == [
        c["first_at"] for c in recorded["choices"][0]["tool_calls"]
    ]
    assert "stalled" in [w["code"] for w in result["warnings"]]
    assert result["source"]["timing"].startswith("recorded live by the addon; the rest re-computed")
    assert main([str(dump)]) == 1
    assert "timing (recorded live by the addon; the rest re-computed from the stored body): first byte" in (
        capsys.readouterr().out
    )


def test_a_dump_made_without_the_addon_gives_the_timing_its_flow_timestamps_tell(tmp_path, capsys):
    dump = tmp_path / "plain.flows"
    _write(dump, _stream_flow((DATA / "production_interleaved.sse").read_bytes()))
    assert main([str(dump), "--json"]) == 1
    (result,) = json.loads(capsys.readouterr().out)["results"]
    timing = result["timing"]
    assert timing["time_to_first_byte"] == 0.25 and timing["duration"] == 2.0
    assert timing["time_to_first_token"] is None  # a file has no arrival time per event
    assert result["source"]["timing"].startswith("the flow's timestamps")


# -- WebSocket connections: a dump's WebSocket flows and captures of messages ------------------------------


def _valid(result: dict) -> None:
    check_result(result)
    assert "websocket" in result


def test_a_dump_websocket_flow_gives_one_result_per_response_in_order(tmp_path, capsys):
    from websocket_messages import websocket_flow

    http_flow = _stream_flow((DATA / "production_interleaved.sse").read_bytes())
    ws = websocket_flow("openai-responses", start=946684800.0)
    dump = tmp_path / "codex.flows"
    _write(dump, http_flow, ws)
    assert main([str(dump), "--json"]) == 1
    results = json.loads(capsys.readouterr().out)["results"]
    assert [r["source"]["flow_id"] for r in results] == [http_flow.id] + [ws.id] * 3
    responses = results[1:]
    for result in responses:
        _valid(result)
    assert [r["source"]["position"] for r in responses] == [1, 2, 3]
    assert [r["websocket"]["position"] for r in responses] == [1, 2, 3]
    assert [r["websocket"]["prewarm"] for r in responses] == [True, False, False]
    assert all(r["source"]["url"].endswith("/v1/responses") for r in responses)
    # Each response's time is its first message's; its timing comes from the messages' timestamps.
    assert responses[1]["source"]["time"] == "2000-01-01T00:00:03+00:00"
    assert responses[1]["timing"]["duration"] == 8.0
    assert responses[1]["source"]["timing"].startswith("re-computed from the stored messages")
    calls = responses[1]["choices"][0]["tool_calls"]
    assert [(c["name"], c["arguments"]) for c in calls] == [
        ("shell", '{"cmd":"ls"}'),
        ("apply_patch", '{"p":"x"}'),
    ]
    assert [w["code"] for w in responses[1]["warnings"]] == ["recency-misroute", "unanswered-call"]
    assert responses[2]["choices"][0]["text"] == "done"
    # The report names the flow and each response.
    assert main([str(dump)]) == 1
    out = capsys.readouterr().out
    assert f"flow {ws.id[:8]}, WebSocket http://example.com/v1/responses at 00:00:03 UTC, response 2 (" in out
    assert "websocket: response 2, messages 4 to 12, the client: answered call_sh; unanswered call_ap" in out


def test_a_websocket_flow_on_an_unknown_path_is_recognised_from_its_messages(tmp_path, capsys):
    from websocket_messages import websocket_flow

    ws = websocket_flow("openai-realtime")
    ws.request.path = "/proxy/socket"
    other = websocket_flow("openai-realtime")
    other.request.path = "/chat"
    for message in other.websocket.messages:
        message.content = b'{"kind": "chat", "text": "hello"}'  # a WebSocket of another kind: left out
    dump = tmp_path / "rt.flows"
    _write(dump, ws, other)
    assert main([str(dump), "--json"]) == 0
    (result,) = json.loads(capsys.readouterr().out)["results"]
    assert result["format"] == "openai-realtime" and result["source"]["flow_id"] == ws.id
    assert result["websocket"]["evidence"]["answered"] == ["call_rt"]


def test_a_websocket_flow_the_addon_recorded_is_re_analysed_unless_it_was_trimmed(tmp_path, capsys):
    from websocket_messages import websocket_flow

    from accumulator import Connection, connection_result

    ws = websocket_flow("openai-responses")
    live = Connection("openai-responses", path="/v1/responses")
    for message in ws.websocket.messages:
        live.message(message.from_client, message.content, message.is_text, now=message.timestamp)
    live.finish()
    record = connection_result(live)
    record["connection"]["trimmed"] = 0
    ws.metadata["toolcall_lens"] = record
    dump = tmp_path / "recorded.flows"
    _write(dump, ws)
    # Re-analysed: this run's strategies apply (none: no recency-misroute), as for an HTTP flow.
    assert main([str(dump), "--json", "--strategies", "none"]) == 1
    results = json.loads(capsys.readouterr().out)["results"]
    assert [w["code"] for w in results[1]["warnings"]] == ["unanswered-call"]
    # Trimmed: the stored messages no longer hold the first responses; the record is shown as it is.
    record["connection"]["trimmed"] = 12
    record["responses"][1]["warnings"].append({"code": "stalled", "severity": "info", "message": "live only"})
    ws.websocket.messages = ws.websocket.messages[12:]
    ws.request.timestamp_start = 946684700.0  # the upgrade, 100 s before the first message
    _write(dump, ws)
    assert main([str(dump), "--json", "--strategies", "none"]) == 1
    results = json.loads(capsys.readouterr().out)["results"]
    assert [r["websocket"]["position"] for r in results] == [1, 2, 3]
    assert [w["code"] for w in results[1]["warnings"]] == ["recency-misroute", "unanswered-call", "stalled"]
    assert results[1]["source"]["timing"].startswith("recorded live by the addon, as it is: 12 message(s)")
    assert results[2]["source"]["time"] == "2000-01-01T00:00:12+00:00"  # message 13: the first one kept
    # Response 1's messages are all gone: its time is the connection's start.
    assert results[0]["source"]["time"] == "1999-12-31T23:58:20+00:00"


@pytest.mark.parametrize("format", ["openai-responses", "openai-realtime", "gemini-live"])
def test_a_websocket_capture_gives_one_result_per_response(format, tmp_path, capsys):
    from websocket_messages import CONVERSATIONS, capture

    path = tmp_path / "capture.jsonl"
    path.write_text(capture(format))
    main([str(path), "--json"])
    results = json.loads(capsys.readouterr().out)["results"]
    assert results and all(r["format"] == format for r in results)
    for result in results:
        _valid(result)
    assert [r["source"]["position"] for r in results] == list(range(1, len(results) + 1))
    assert all(r["source"]["file"] == str(path) and "flow_id" not in r["source"] for r in results)
    names = [c["name"] for r in results for c in r["choices"][0]["tool_calls"]]
    assert names == CONVERSATIONS[format][2]
    assert results[0]["timing"]["clock"]  # the lines' timestamps are the clock


@pytest.mark.parametrize("format", ["openai-responses", "openai-realtime", "gemini-live"])
def test_a_capture_without_its_url_is_recognised_from_its_messages_or_named_with_format(
    format, tmp_path, capsys
):
    from websocket_messages import capture

    path = tmp_path / "capture.jsonl"
    path.write_text(capture(format, header=False, timestamps=False))
    main([str(path), "--json"])
    results = json.loads(capsys.readouterr().out)["results"]
    assert {r["format"] for r in results} == {format}
    assert results[0]["timing"] is None or not results[0]["timing"]["clock"]
    # --format forces it: Realtime messages read as Gemini Live give no response.
    other = "gemini-live" if format != "gemini-live" else "openai-realtime"
    assert main([str(path), "--json", "--format", other]) == 2
    captured = capsys.readouterr()
    assert "no LLM response in its" in captured.err


def test_bad_lines_of_a_capture_are_warnings_where_they_stood(tmp_path, capsys):
    from websocket_messages import capture

    lines = capture("openai-responses").splitlines()
    lines[6:6] = [
        "not json",
        '{"from_client": "yes", "text": "{}"}',
        '{"from_client": false}',
        '{"from_client": false, "base64": "%%%"}',
    ]
    lines.insert(1, '{"from_client": true, "text": "{\\"type\\": \\"ping\\"}", "timestamp": "noon"}')
    path = tmp_path / "capture.jsonl"
    path.write_text("\n".join(lines) + "\n\n")
    assert main([str(path), "--json"]) == 1
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    results = json.loads(captured.out)["results"]
    for result in results:
        _valid(result)
    bad = {w["line"]: w["message"] for r in results for w in r["warnings"] if w["code"] == "malformed-event"}
    # The bad timestamp's line comes before any response: its warning goes on the next response's result.
    assert [w["line"] for w in results[0]["warnings"]] == [2]
    assert sorted(bad) == [2, 8, 9, 10, 11]  # the four bad lines inside response 2, on its result
    assert "not a JSON object: 'not json'" in bad[8] and '"from_client" is not true or false' in bad[9]
    assert 'neither "text"' in bad[10] and '"base64" is not base64' in bad[11]
    assert '"timestamp" is not a number' in bad[2]
    # The calls are rebuilt all the same.
    assert [c["name"] for c in results[1]["choices"][0]["tool_calls"]] == ["shell", "apply_patch"]


@pytest.mark.parametrize(
    "content,says",
    [
        (b'{"websocket": "wss://h/v1/responses"}\n', "no LLM response in its 0 WebSocket message(s)"),
        (b'{"from_client": true}\n[1]\n', "line 2 of"),
    ],
    ids=["header-only", "no-message"],
)
def test_a_capture_with_no_response_is_exit_2_saying_why(tmp_path, capsys, content, says):
    path = tmp_path / "capture.jsonl"
    path.write_bytes(content)
    assert main([str(path)]) == 2
    captured = capsys.readouterr()
    assert says in captured.err and "Traceback" not in captured.err and captured.out == ""


def test_a_websocket_only_format_does_not_read_a_raw_body(capsys):
    assert main([CLEAN, "--format", "openai-realtime"]) == 2
    assert "spoken over WebSockets only" in capsys.readouterr().err


def test_ndjson_streams_are_not_taken_for_captures(tmp_path, capsys):
    # An NDJSON line naming a message's keys inside its content is still the stream it is.
    line = {"model": "m", "message": {"role": "assistant", "content": '{"from_client": true}'}, "done": True}
    path = tmp_path / "ollama.ndjson"
    path.write_text(json.dumps(line) + "\n")
    assert main([str(path), "--json"]) == 0
    (result,) = json.loads(capsys.readouterr().out)["results"]
    assert result["format"] == "ollama-chat" and "websocket" not in result


def test_a_captures_first_line_names_the_connection_and_so_its_format(tmp_path, capsys):
    from websocket_messages import capture

    # Keep-alives first: too many for the messages to tell the format; the upgrade URL still does.
    lines = capture("openai-realtime", timestamps=False).splitlines()
    lines[1:1] = [json.dumps({"from_client": False, "text": '{"type": "keepalive"}'})] * 10
    path = tmp_path / "capture.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert main([str(path), "--json"]) == 0
    (result,) = json.loads(capsys.readouterr().out)["results"]
    assert result["format"] == "openai-realtime" and result["websocket"]["first_message"] == 14
    assert result["source"]["url"] == "wss://api.example.com/v1/realtime?model=gpt-realtime"
    path.write_text("\n".join(lines[1:]) + "\n")  # without it, the connection is given up on
    assert main([str(path)]) == 2
    assert "no LLM response in its 18 WebSocket message(s)" in capsys.readouterr().err
