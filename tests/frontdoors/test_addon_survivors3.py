"""The addon's hot paths and the tool results a request sends back: what a mutation run found untested (the
logic survivors of ``addon.py`` and of ``accumulator/echo.py``'s ``tool_results``; see docs/mutation.md).
Each test was checked by applying the mutation it guards against to the source by hand and seeing it
fail."""

from __future__ import annotations

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
