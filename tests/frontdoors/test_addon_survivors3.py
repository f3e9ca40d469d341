"""The addon's hot paths and the tool results a request sends back: what a mutation run found untested (the
logic survivors of ``addon.py`` and of ``accumulator/echo.py``'s ``tool_results``; see docs/mutation.md).
Each test was checked by applying the mutation it guards against to the source by hand and seeing it
fail."""

from __future__ import annotations

import json

from chat_flows import chat_stream, follow_up, through_addon
from test_addon_rewrite_survivors import SEARCH, json_flow

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
