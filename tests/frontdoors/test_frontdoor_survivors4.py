"""The command line: what a mutation run found untested (the logic survivors of
``accumulator/cli.py``'s ``_place_connection_warnings``; see docs/mutation.md). Each test was checked by
applying the mutation it guards against to the source by hand and seeing it fail."""

from __future__ import annotations

import json

import pytest

from accumulator.cli import main

# --- _place_connection_warnings: a warning of no response goes on the response that came next -------------
# A Gemini Live ``toolCall`` message is a whole response: it begins and ends at that message, so a bad
# line stored after it, or a bad message sent after it, belongs to the next response, not to it.

URL = "wss://api.example.com/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"


def message(from_client: bool, obj) -> str:
    text = obj if isinstance(obj, str) else json.dumps(obj)
    return json.dumps({"from_client": from_client, "text": text})


def tool_call(call_id: str) -> str:
    return message(False, {"toolCall": {"functionCalls": [{"id": call_id, "name": "find", "args": {}}]}})


@pytest.mark.parametrize(
    "bad",
    [
        "not json",  # a bad line: _place_connection_warnings_9 (taken as a bad message), _25 (> -> >=)
        message(False, "not json"),  # a bad message: _25
    ],
    ids=["line", "message"],
)
def test_a_warning_after_a_one_message_response_goes_on_the_next_response(tmp_path, capsys, bad):
    lines = [
        json.dumps({"websocket": URL}),
        message(True, {"setup": {"model": "models/gemini-live"}}),
        message(False, {"setupComplete": {}}),
        tool_call("a"),  # message 3: response 1, whole
        bad,
        tool_call("b"),  # response 2
    ]
    path = tmp_path / "capture.jsonl"
    path.write_text("\n".join(lines) + "\n")
    main([str(path), "--json"])
    results = json.loads(capsys.readouterr().out)["results"]
    assert results[0]["websocket"]["first_message"] == 3
    placed = [[w["code"] for w in r["warnings"] if w["code"] == "malformed-event"] for r in results]
    assert placed == [[], ["malformed-event"]]
