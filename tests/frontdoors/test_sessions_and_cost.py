"""Sessions, tokens and cost through the front doors: the addon under mitmproxy's test harness (taddons,
tflow; its options, hooks, JSONL, command and content view) and the CLI on dumps and raw captures."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pytest
from chat_flows import chat_stream, follow_up, through_addon
from genai_prices import Usage, calc_price
from mitmproxy import contentviews, exceptions
from mitmproxy import io as mio
from mitmproxy.test import tflow
from schemas import check_result
from streams import DATA
from websocket_turns import send as send_to
from websocket_turns import ws_flow

from accumulator.cli import main

SEARCH = ("call_1", "search", '{"q": "rbi"}')


def test_each_flow_names_its_session_and_turn_in_its_result_and_jsonl_record(lens, tmp_path):
    jsonl = tmp_path / "llm.jsonl"
    lens.tctx.configure(lens, toolcall_lens_jsonl=str(jsonl))
    first = through_addon(lens, chat_stream([SEARCH]), follow_up([]), {"x-claude-code-session-id": "run-A"})
    other = through_addon(
        lens, chat_stream([]), follow_up([])
    )  # another agent, no header: a session of its own
    second = through_addon(
        lens, chat_stream([]), follow_up([[SEARCH]]), {"x-claude-code-session-id": "run-A"}
    )
    results = [f.metadata["toolcall_lens"] for f in (first, other, second)]
    for result in results:
        check_result(result)
    assert [(r["session"]["id"], r["session"]["turn"]) for r in results] == [
        ("run-A", 1),
        (other.id, 1),
        ("run-A", 2),
    ]
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert [(r["session"], r["turn"]) for r in records] == [("run-A", 1), (other.id, 1), ("run-A", 2)]
    assert records[2]["result"]["session"]["tool_results"] == [{"id": "call_1", "size": 2, "error": None}]


def test_each_flow_carries_its_tokens_and_the_librarys_cost(lens):
    result = through_addon(lens, chat_stream([SEARCH]), follow_up([])).metadata["toolcall_lens"]
    usage = result["usage"]
    assert (usage["input"], usage["output"], usage["cache_read"]) == (1200, 80, 1000)
    expected = calc_price(
        Usage(input_tokens=1200, output_tokens=80, cache_read_tokens=1000), "gpt-4o", provider_id="openai"
    )
    assert result["cost"]["total"] == pytest.approx(float(expected.total_price))
    assert result["cost"]["price"]["provider"] == "openai" and result["cost"]["price"]["model"] == "gpt-4o"


def test_an_unknown_model_gets_no_cost_and_says_why_and_a_price_file_prices_it(lens, tmp_path):
    unpriced = through_addon(lens, chat_stream([], model="house-model-7"), follow_up([])).metadata[
        "toolcall_lens"
    ]
    assert unpriced["cost"] is None and "house-model-7" in unpriced["cost_note"]
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"house-model-7": {"input_mtok": 2, "output_mtok": 10}}))
    lens.tctx.configure(lens, toolcall_lens_prices=str(prices))
    priced = through_addon(lens, chat_stream([], model="house-model-7"), follow_up([])).metadata[
        "toolcall_lens"
    ]
    assert priced["cost"]["total"] == pytest.approx((1200 * 2 + 80 * 10) / 1e6)
    assert priced["cost"]["price"]["source"] == f"price file {prices}"


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("{not json", "is not JSON"),
        ('{"m": {"input_mtok": 1}}', "output_mtok missing"),
        ('{"m": {"input_mtok": 1, "output_mtok": -2}}', "not a price"),
        ('{"m": {"input_mtok": 1, "output_mtok": 2, "per_call": 3}}', "unknown key(s) per_call"),
    ],
)
def test_a_bad_price_file_is_refused_at_set_time_with_what_is_wrong(lens, tmp_path, content, said):
    prices = tmp_path / "prices.json"
    prices.write_text(content)
    with pytest.raises(exceptions.OptionsError, match="toolcall_lens_prices") as raised:
        lens.tctx.configure(lens, toolcall_lens_prices=str(prices))
    assert said in str(raised.value)
    with pytest.raises(exceptions.OptionsError, match="cannot read"):
        lens.tctx.configure(lens, toolcall_lens_prices=str(tmp_path / "absent.json"))


def test_a_loop_is_a_warning_on_the_flow_and_marks_it_at_the_options_threshold(lens):
    lens.tctx.configure(lens, toolcall_lens_loop_after=2)
    headers = {"session-id": "codex-run"}
    first = through_addon(lens, chat_stream([SEARCH]), follow_up([]), headers)
    second = through_addon(lens, chat_stream([("call_2", *SEARCH[1:])]), follow_up([[SEARCH]]), headers)
    assert not first.marked and "tool-call-loop" not in json.dumps(
        first.metadata["toolcall_lens"]["warnings"]
    )
    (loop,) = [w for w in second.metadata["toolcall_lens"]["warnings"] if w["code"] == "tool-call-loop"]
    assert loop["times"] == 2 and loop["turns"] == [1, 2] and second.marked
    with pytest.raises(exceptions.OptionsError, match="at least 2"):
        lens.tctx.configure(lens, toolcall_lens_loop_after=1)


def test_the_sessions_command_and_the_content_view_show_the_session_turn_by_turn(lens):
    headers = {"x-session-id": "ses_1"}
    first = through_addon(lens, chat_stream([SEARCH]), follow_up([]), headers)
    second = through_addon(
        lens, chat_stream([]), follow_up([[SEARCH]], answers={"call_1": "three documents"}), headers
    )
    text = lens.sessions_report([first, second])
    assert text.startswith("== session ses_1 (header x-session-id): 2 turn(s), 1 call(s)")
    assert 'call search({"q": "rbi"}) -> result 15 B sent (turn 2)' in text
    assert lens.sessions_report([tflow.tflow()]) == "no agent sessions"
    # The first flow's view, drawn after the second turn came: its call is answered now.
    shown = contentviews.prettify_message(first.response, first).text
    assert "-- agent session --" in shown and "result 15 B sent (turn 2)" in shown


def dump_of(flows: list, path: Path) -> Path:
    with open(path, "wb") as file:
        writer = mio.FlowWriter(file)
        for flow in flows:
            writer.add(flow)
    return path


def test_the_cli_groups_a_dumps_sessions_as_the_addon_did(lens, tmp_path, capsys):
    a1 = through_addon(lens, chat_stream([SEARCH]), follow_up([]))
    b1 = through_addon(
        lens, chat_stream([("call_9", "search", '{"q": "x"}')]), follow_up([]), {"X-Session-Id": "ses_B"}
    )
    a2 = through_addon(lens, chat_stream([SEARCH]), follow_up([[SEARCH]]))
    a3 = through_addon(lens, chat_stream([SEARCH]), follow_up([[SEARCH], [SEARCH]]))
    dump = dump_of([a1, b1, a2, a3], tmp_path / "run.flows")
    assert main([str(dump), "--json"]) == 1  # the loop is a warning
    results = json.loads(capsys.readouterr().out)["results"]
    assert [(r["session"]["id"], r["session"]["turn"]) for r in results] == [
        (a1.id, 1),
        ("ses_B", 1),
        (a1.id, 2),
        (a1.id, 3),
    ]
    assert [r["session"] for r in results] == [
        f.metadata["toolcall_lens"]["session"] for f in (a1, b1, a2, a3)
    ]
    assert [w["code"] for w in results[3]["warnings"]] == ["tool-call-loop"]
    assert main([str(dump)], sessions_view=True) == 1
    text = capsys.readouterr().out
    assert text.count("== session ") == 2 and "LOOP: search" in text
    assert main([str(dump), "--json"], sessions_view=True) == 1
    sessions = json.loads(capsys.readouterr().out)["sessions"]
    assert [(s["id"], s["totals"]["turns"]) for s in sessions] == [(a1.id, 3), ("ses_B", 1)]


def test_the_cli_prices_a_raw_capture_of_a_known_model(tmp_path, capsys):
    capture = tmp_path / "body.sse"
    capture.write_bytes(chat_stream([SEARCH]))
    assert main([str(capture), "--json"]) == 0
    (result,) = json.loads(capsys.readouterr().out)["results"]
    assert result["cost"]["price"]["model"] == "gpt-4o" and result["cost"]["total"] > 0
    assert "session" not in result  # no request, no headers: nothing to group it by
    assert main([str(capture)]) == 0
    out = capsys.readouterr().out
    assert "tokens: input 1200 (1000 cached), output 80" in out and "cost: $" in out
    prices = tmp_path / "prices.json"
    prices.write_text('{"gpt-4o": {"input_mtok": 1, "output_mtok": 1}}')
    assert main([str(capture), "--json", "--prices", str(prices)]) == 0
    assert json.loads(capsys.readouterr().out)["results"][0]["cost"]["total"] == pytest.approx(1280 / 1e6)
    prices.write_text("[]")
    assert main([str(capture), "--prices", str(prices)]) == 2
    assert "expected an object" in capsys.readouterr().err


@pytest.mark.parametrize("header", [{"session-id": "codex-ws"}, {}], ids=["codex-header", "no-header"])
def test_a_websocket_connections_responses_are_one_session_priced_each(lens, header):
    """Codex's WebSocket mode (its session header on the upgrade, or none): one response.create per turn;
    the connection's own evidence says which calls were answered."""
    flow = ws_flow(headers=header)
    lens.websocket_start(flow)
    send = partial(send_to, lens, flow)

    usage = {
        "input_tokens": 900,
        "output_tokens": 50,
        "total_tokens": 950,
        "input_tokens_details": {"cached_tokens": 800},
    }
    for n, answers in enumerate(([], [{"type": "function_call_output", "call_id": "c1", "output": "ok"}]), 1):
        send(True, {"type": "response.create", "model": "gpt-4o", "input": answers})
        send(False, {"type": "response.created", "response": {"id": f"r{n}", "model": "gpt-4o"}})
        if n == 1:
            item = {"type": "function_call", "id": "fc1", "call_id": "c1", "name": "shell"}
            send(False, {"type": "response.output_item.added", "output_index": 0, "item": item})
            send(False, {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": "{}"})
        done = {"id": f"r{n}", "model": "gpt-4o", "status": "completed", "usage": usage}
        send(False, {"type": "response.completed", "response": done})
    lens.websocket_end(flow)
    responses = flow.metadata["toolcall_lens"]["responses"]
    session = header.get("session-id", flow.id)
    by = "header session-id" if header else "websocket connection"
    assert [(r["session"]["id"], r["session"]["turn"], r["session"]["by"]) for r in responses] == [
        (session, 1, by),
        (session, 2, by),
    ]
    expected = calc_price(
        Usage(input_tokens=900, output_tokens=50, cache_read_tokens=800), "gpt-4o", provider_id="openai"
    )
    assert [r["cost"]["total"] for r in responses] == [pytest.approx(float(expected.total_price))] * 2
    text = lens.sessions_report([flow])
    assert f"{session} ({by}): 2 turn(s)" in text and "call shell({}) -> answered" in text


def test_a_response_that_names_no_model_is_priced_by_the_model_its_request_asked_for(lens, tmp_path, capsys):
    """Cohere's stream names no model: the request's does, in the addon and in the CLI."""
    body = (DATA / "cohere_v2_parallel.sse").read_bytes()
    asked = {"model": "command-a-03-2025", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    usage = json.loads(next(line for line in body.splitlines() if b'"usage"' in line)[len(b"data: ") :])
    billed = usage["delta"]["usage"]["billed_units"]
    expected = calc_price(
        Usage(input_tokens=billed["input_tokens"], output_tokens=billed["output_tokens"]),
        "command-a-03-2025",
        provider_id="cohere",
    )
    flow = through_addon(lens, body, asked, url="https://api.cohere.com/v2/chat")
    result = flow.metadata["toolcall_lens"]
    assert result["model"] is None and result["cost"]["price"]["model"] == "command-a"
    assert result["cost"]["total"] == pytest.approx(float(expected.total_price))
    (tmp_path / "request.json").write_text(json.dumps(asked))
    capture = tmp_path / "cohere.sse"
    capture.write_bytes(body)
    assert main([str(capture), "--json", "--request", str(tmp_path / "request.json")]) == 0
    (cli,) = json.loads(capsys.readouterr().out)["results"]
    assert cli["cost"]["total"] == pytest.approx(float(expected.total_price))


def test_a_loop_over_a_websocket_is_in_the_connections_comment_and_marks_it(lens):
    lens.tctx.configure(lens, toolcall_lens_loop_after=2)
    flow = ws_flow()
    lens.websocket_start(flow)
    send = partial(send_to, lens, flow)

    for n in (1, 2):
        answers = [{"type": "function_call_output", "call_id": f"c{n - 1}", "output": "ok"}] if n > 1 else []
        send(True, {"type": "response.create", "model": "gpt-4o", "input": answers})
        send(False, {"type": "response.created", "response": {"id": f"r{n}"}})
        item = {"type": "function_call", "id": f"fc{n}", "call_id": f"c{n}", "name": "shell"}
        send(False, {"type": "response.output_item.added", "output_index": 0, "item": item})
        send(
            False,
            {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": '{"cmd": "ls"}'},
        )
        send(False, {"type": "response.completed", "response": {"id": f"r{n}", "status": "completed"}})
    lens.websocket_end(flow)
    second = flow.metadata["toolcall_lens"]["responses"][1]
    assert [w["code"] for w in second["warnings"]] == ["tool-call-loop"]
    assert "tool-call-loop" in flow.comment and flow.marked == ":warning:"


def test_the_session_headers_are_read_in_one_pass_as_mitmproxys_headers_get_reads_them():
    from mitmproxy.http import Headers

    import addon as addon_module
    from accumulator.sessions import SESSION_HEADERS

    headers = Headers(
        [
            (b"X-Session-Id", b"a"),
            (b"content-type", b"text/plain"),
            (b"x-session-id", b"b"),
            (b"Session-ID", "é".encode()),
            (b"x-claude-code-session-id", b"\xff"),
        ]
    )
    got = addon_module._session_headers(headers)
    assert got == {name: headers.get(name) for name in SESSION_HEADERS}
    assert got["x-session-id"] == "a, b" and got["session-id"] == "é"
    assert addon_module._session_headers(Headers([(b"host", b"x")])) == {}
