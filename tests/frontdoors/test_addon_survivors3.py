"""The addon's hot paths and the tool results a request sends back: what a mutation run found untested (the
logic survivors of ``addon.py`` and of ``accumulator/echo.py``'s ``tool_results``; see docs/mutation.md).
Each test was checked by applying the mutation it guards against to the source by hand and seeing it
fail."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from datetime import UTC, datetime

from chat_flows import at_headers, chat_stream, follow_up, through_addon
from faults import Failing
from mitmproxy import flow as mflow
from otlp_receiver import Receiver
from streams import DATA
from test_addon_rewrite_survivors import SEARCH, json_flow, lens_records

from accumulator.echo import tool_results

# --- echo.tool_results: ids that are no strings, and the format's own reader (_9, _33, _37) ----------------


def test_a_tool_result_whose_id_is_no_string_has_a_null_id():
    part = {"functionResponse": {"id": 7, "name": "lookup", "response": {"ok": 1}}}
    request = {"contents": [{"role": "user", "parts": [part]}]}
    assert tool_results(request, "gemini") == [{"id": None, "size": 8, "error": False, "name": "lookup"}]


def test_the_format_named_picks_the_reader():
    chat = {"messages": [{"role": "tool", "tool_call_id": "call_1", "content": "one"}]}
    assert tool_results(chat) == [{"id": "call_1", "size": 3, "error": None}]
    assert tool_results(chat, "anthropic-messages") == []


# --- configure: the settings are kept, the price file read once when set (configure_29) --------------------


def test_a_price_file_is_read_when_set_not_when_the_first_flow_comes(lens, tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"house-model-7": {"input_mtok": 2, "output_mtok": 10}}))
    lens.tctx.configure(lens, toolcall_lens_prices=str(prices))
    prices.unlink()
    flow = through_addon(lens, chat_stream([], model="house-model-7"), follow_up([]))
    assert flow.metadata["toolcall_lens"]["cost"]["price"]["source"] == f"price file {prices}"


# --- request: the request is read in its own format's shape (request_13, _19, _21) -------------------------


def test_a_chat_request_is_read_as_chat_only(lens):
    through_addon(lens, chat_stream([SEARCH]), follow_up([]))
    request = follow_up([[SEARCH]])
    # Responses-shaped items a Chat endpoint ignores: neither echoes nor results of this conversation.
    request["input"] = [
        {"type": "function_call", "call_id": "call_9", "name": "lookup", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_9", "output": "stray"},
    ]
    result = through_addon(lens, chat_stream([]), request).metadata["toolcall_lens"]
    assert result["session"]["tool_results"] == [{"id": "call_1", "size": 2, "error": None}]
    assert result["evidence"]["checked"] == 2 and result["warnings"] == []


# --- response: an answer that is no LLM response leaves no request facts behind (response_17) --------------


def test_a_gateway_page_where_a_message_was_asked_for_leaves_nothing_held(lens):
    request = follow_up([[SEARCH]])
    del request["stream"], request["stream_options"]
    flow = json_flow(request, b"<html>maintenance</html>")
    flow.response.headers["content-type"] = "text/html"
    lens.request(flow)
    lens.responseheaders(flow)
    lens.response(flow)
    assert "toolcall_lens" not in flow.metadata
    assert lens.turn_facts == {} and lens.echo_warnings == {}


# --- OTLP: turned off while running (_open_otlp_2); a stream cut short ends at its error (_emit_28) ---------


def test_the_otlp_export_turned_off_while_running_sends_nothing_and_says_nothing(lens, caplog):
    caplog.set_level(logging.WARNING, logger="toolcall_lens")
    with Receiver() as receiver:
        lens.tctx.configure(lens, toolcall_lens_otlp_endpoint=receiver.url)
        lens.tctx.configure(lens, toolcall_lens_otlp_endpoint="")
        flow = through_addon(lens, chat_stream([]), follow_up([]))
        lens.done()
    assert "toolcall_lens" in flow.metadata and lens_records(caplog) == []
    assert receiver.requests == 0


def test_the_span_of_a_stream_cut_short_ends_at_its_error(lens):
    with Receiver() as receiver:
        lens.tctx.configure(lens, toolcall_lens_otlp_endpoint=receiver.url)
        flow = at_headers()
        flow.request.method, flow.request.host, flow.request.path = (
            "POST",
            "api.openai.com",
            "/v1/chat/completions",
        )
        flow.request.content = json.dumps(follow_up([])).encode()
        del flow.response.headers["content-length"]
        flow.response.headers["content-type"] = "text/event-stream"
        lens.request(flow)
        lens.responseheaders(flow)
        flow.response.stream(chat_stream([SEARCH])[:60])
        flow.response.timestamp_end = None  # the upstream went away mid-stream: only the error hook fires
        flow.error = mflow.Error("connection reset", timestamp=flow.request.timestamp_start + 5)
        lens.error(flow)
        lens.done()
        spans = receiver.wait_for(2)
    (span,) = [s for s in spans if s["name"].startswith("chat ")]
    assert span["endTimeUnixNano"] == int(flow.error.timestamp * 1e9)


def test_a_failing_span_is_logged_with_its_error_and_the_flow_keeps_its_result(lens, monkeypatch, caplog):
    caplog.set_level(logging.WARNING, logger="toolcall_lens")
    with Receiver() as receiver:
        lens.tctx.configure(lens, toolcall_lens_otlp_endpoint=receiver.url)
        monkeypatch.setattr(lens, "otlp", Failing(lens.otlp, "emit", RuntimeError("exporter bug")))
        flow = through_addon(lens, chat_stream([]), follow_up([]))
    assert "toolcall_lens" in flow.metadata
    assert lens_records(caplog) == [
        (logging.WARNING, "toolcall-lens: the OTLP span failed: RuntimeError: exporter bug")
    ]


START = 1_700_000_000.0  # 2023-11-14T22:13:20Z
RESPONSES = "https://api.openai.com/v1/responses"


# --- _price_and_place: priced by the host, as of the request (_13, _15, _17, _22, _23, _26, _27) -----------

GROQ = "llama-3.3-70b-versatile"  # a model genai-prices knows at Groq only, not at OpenAI


def test_a_response_is_priced_by_its_host_as_of_its_request_time(lens):
    url = "https://api.groq.com/openai/v1/chat/completions"
    flow = through_addon(lens, chat_stream([], model=GROQ), follow_up([], model=GROQ), url=url, start=START)
    price = flow.metadata["toolcall_lens"]["cost"]["price"]
    as_of = datetime.fromtimestamp(START, UTC).isoformat()
    assert (price["provider"], price["as_of"]) == ("groq", as_of)


# --- _price_and_place: a failing price lookup or placing (_33, _38; _53 .. _59) ----------------------------


def test_a_failing_price_lookup_leaves_no_cost_and_says_why(lens):
    settings = lens._settings()
    lens.settings = replace(settings, prices=Failing(settings.prices, "cost", RuntimeError("price bug")))
    result = through_addon(lens, chat_stream([SEARCH]), follow_up([])).metadata["toolcall_lens"]
    assert (result["cost"], result["cost_note"]) == (None, "pricing failed: RuntimeError: price bug")
    assert result["session"]["turn"] == 1


def test_a_failing_placing_is_logged_with_its_error_and_the_flow_keeps_its_result(lens, monkeypatch, caplog):
    caplog.set_level(logging.WARNING, logger="toolcall_lens")
    monkeypatch.setattr(lens, "sessions", Failing(lens.sessions, "place", RuntimeError("session bug")))
    flow = through_addon(lens, chat_stream([SEARCH]), follow_up([]))
    assert flow.metadata["toolcall_lens"]["choices"][0]["tool_calls"][0]["name"] == "search"
    assert lens_records(caplog) == [
        (logging.WARNING, "toolcall-lens: placing a flow in its session failed: RuntimeError: session bug")
    ]


# --- _price_and_place: a Responses turn follows the response it names, at its request time (_42 .. _52) ----


def test_a_responses_turn_follows_the_response_its_request_names_at_its_request_time(lens):
    body = (DATA / "openai_responses_parallel.sse").read_bytes()
    first = through_addon(
        lens, body, {"model": "gpt-5", "stream": True, "input": "go"}, url=RESPONSES, start=START
    )
    follow = {
        "model": "gpt-5",
        "stream": True,
        "previous_response_id": "resp_68a1f0c2b7d4819d",
        "input": "on",
    }
    second = through_addon(
        lens, body.replace(b"resp_68a1f0c2b7d4819d", b"resp_2"), follow, url=RESPONSES, start=START + 60
    )
    session = second.metadata["toolcall_lens"]["session"]
    assert (session["id"], session["turn"], session["by"]) == (first.id, 2, "previous_response_id")
    record = lens.sessions.record(lens.sessions.get(first.id))
    assert [turn["time"] for turn in record["turns"]] == [START, START + 60]
