"""Agent sessions and token usage: what a mutation run found untested (the logic survivors of
``accumulator/sessions.py`` and ``accumulator/usage.py``; see docs/mutation.md). Each test was checked by
applying the mutation it guards against to the source by hand and seeing it fail."""

from __future__ import annotations

import json
import time

import pytest
from chat_flows import chat_stream
from streams import call, sse, tool_chunk

from accumulator import analyze
from accumulator.sessions import Sessions, format_session
from accumulator.usage import normalised

HEADERS = {"session-id": "s"}
SEARCH = ("call_1", "search", '{"q": "rbi"}')
PROFILE = ("call_2", "get_user", '{"id": 7}')


def place(sessions: Sessions, result: dict, flow_id: str, **extra) -> dict:
    """One response as the next turn of session "s"."""
    sessions.place(result, flow_id, headers=HEADERS, **extra)
    return result


def record_of(sessions: Sessions) -> dict:
    return sessions.record(sessions.get("s"))


def turn_lines(text: str, n: int) -> list[str]:
    """The lines format_session shows for turn ``n``: its head and what follows up to the next turn."""
    lines = text.splitlines()
    start = lines.index(
        next(line for line in lines if line.startswith(f"  turn {n} ") or line == f"  turn {n}")
    )
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("    ")), len(lines))
    return lines[start:end]


def gemini(*names: str) -> dict:
    """A Gemini response calling these functions (Gemini's calls have no ids), with no usage."""
    parts = [{"functionCall": {"name": name, "args": {}}} for name in names] or [{"text": "ok"}]
    body = {"candidates": [{"content": {"parts": parts}, "finishReason": "STOP"}]}
    return analyze(f"data: {json.dumps(body)}\n\n".encode(), "gemini")


def sent(name: str | None = None, id: str | None = None, size: int = 2, error: bool | None = None) -> dict:
    """A tool result a request sends back (``echo.tool_results``)."""
    found = {"id": id, "size": size, "error": error}
    return found if name is None else {**found, "name": name}


def calls_of(record: dict, turn: int) -> list[tuple]:
    return [(c["name"], c["answered"], c["result"]) for c in record["turns"][turn - 1]["calls"]]


# --- Sessions.record, session_record's loops ---------------------------------------------------------------
# record__mutmut_4 (the default threshold, not the registry's), session_record__mutmut_179 (a loop's
# arguments shown as null), __mutmut_187 (its turns from the tenth on)


def test_the_record_lists_the_loops_by_the_registrys_threshold_with_their_arguments_and_turns():
    sessions = Sessions(loop_after=2)
    for n in range(2):
        place(sessions, analyze(chat_stream([(f"c{n}", "search", '{"q": "rbi"}')])), f"f{n}")
    assert record_of(sessions)["loops"] == [
        {"name": "search", "arguments": '{"q":"rbi"}', "times": 2, "turns": [1, 2]}
    ]


# --- session_record: a record is a snapshot ---------------------------------------------------------------
# session_record__mutmut_5 (the record's calls are the session's own, changed by every later record)


def test_a_record_taken_earlier_is_not_changed_by_a_later_one():
    sessions = Sessions()
    place(sessions, analyze(chat_stream([SEARCH])), "f1")
    before = record_of(sessions)
    place(sessions, analyze(chat_stream([])), "f2", tool_results=[sent(id="call_1")])
    after = record_of(sessions)
    assert (
        before["turns"][0]["calls"][0]["answered"] is None
        and before["turns"][0]["calls"][0]["result"] is None
    )
    assert after["turns"][0]["calls"][0]["answered"] is True


# --- session_record: a WebSocket response's calls, told by its connection -----------------------------------
# session_record__mutmut_23 (an unanswered call's result "" for null), _24 (evidence null read as an
# object: TypeError), _29 (answered "" for null), _55 and _60 (a cancelled call counted never answered)


def websocket_turn(calls: list, evidence: dict | None, prewarm: bool = False) -> dict:
    result = analyze(chat_stream(calls))
    result["websocket"] = {"position": 2, "prewarm": prewarm, "evidence": evidence}
    return result


def test_a_websocket_response_whose_connection_said_nothing_has_calls_not_answered_yet():
    sessions = Sessions()
    sessions.place(websocket_turn([SEARCH], None, prewarm=True), "ws", connection=True)
    record = sessions.record(sessions.get("ws"))
    assert calls_of(record, 1) == [("search", None, None)] and record["unanswered"] == []
    text = format_session(record)
    assert turn_lines(text, 1)[:2] == [
        "  turn 1  gpt-4o  flow ws response 2 (prewarm)",
        '    call search({"q": "rbi"}) -> not answered yet',
    ]


def test_a_websocket_response_tells_answered_cancelled_and_never_answered_calls_apart():
    sessions = Sessions()
    evidence = {"answered": ["call_1"], "unanswered": ["call_3"], "cancelled": ["call_2"]}
    calls = [SEARCH, PROFILE, ("call_3", "shell", "{}")]
    sessions.place(websocket_turn(calls, evidence), "ws", connection=True)
    record = sessions.record(sessions.get("ws"))
    assert calls_of(record, 1) == [
        ("search", True, {"id": "call_1", "size": None, "error": None, "turn": None}),
        ("get_user", None, None),
        ("shell", False, None),
    ]
    assert record["unanswered"] == [{"turn": 1, "id": "call_3", "name": "shell"}]


# --- session_record and _answer_of: a plain HTTP response's calls, told by the later requests --------------
# session_record__mutmut_74 (a call with an id looked for in the next turn only), _75 (a call without one
# in every later turn), _answer_of__mutmut_17 (a result of another name taken), _27 (a result taken twice),
# _31 (the answering turn lost), _answer__mutmut_5 (a call without id shown "not answered yet")


def test_a_call_with_an_id_is_answered_by_any_later_turn():
    sessions = Sessions()
    place(sessions, analyze(chat_stream([SEARCH])), "f1")
    place(sessions, analyze(chat_stream([])), "f2")
    place(sessions, analyze(chat_stream([])), "f3", tool_results=[sent(id="call_1", size=5)])
    assert calls_of(record_of(sessions), 1) == [
        ("search", True, {"id": "call_1", "size": 5, "error": None, "turn": 3})
    ]


def test_calls_without_ids_take_the_next_turns_results_of_their_name_each_once():
    sessions = Sessions()
    place(sessions, gemini("shell", "read_file", "read_file"), "g1")
    place(sessions, gemini(), "g2", tool_results=[sent("read_file", error=True)])
    answer = {"id": None, "size": 2, "error": True, "name": "read_file", "turn": 2}
    assert calls_of(record_of(sessions), 1) == [
        ("shell", False, None),
        ("read_file", True, answer),
        ("read_file", False, None),
    ]


def test_a_call_without_an_id_is_matched_in_the_next_turn_only():
    sessions = Sessions()
    place(sessions, gemini("read_file"), "g1")
    place(sessions, gemini(), "g2")
    place(sessions, gemini("read_file"), "g3", tool_results=[sent("read_file")])
    record = record_of(sessions)
    assert calls_of(record, 1) == [("read_file", False, None)]
    # The last turn's call: no later turn yet; its name would tell it in the next one.
    assert calls_of(record, 3) == [("read_file", None, None)]
    assert turn_lines(format_session(record), 3)[1] == "    call read_file({}) -> not answered yet"


# --- session_record's totals and format_session's head -----------------------------------------------------
# session_record__mutmut_163 (no priced turn: a total cost of 0), format_session__mutmut_6 (the total cost
# never shown), _14 (unpriced turns named beside an unknown cost), _20 (the total replaced by the unpriced
# count), _141 (a turn's cost never shown)


def test_a_session_without_a_priced_turn_has_no_total_cost():
    sessions = Sessions()
    place(sessions, analyze(chat_stream([])), "f1")
    record = record_of(sessions)
    assert record["totals"]["cost"] is None and record["totals"]["unpriced_turns"] == 1
    text = format_session(record)
    assert text.splitlines()[0].endswith(", cost unknown ==")
    assert turn_lines(text, 1)[-1].endswith("; cost unknown")


def test_the_head_shows_the_total_cost_and_the_turns_unpriced_and_each_turn_its_cost():
    sessions = Sessions()
    for n, cost in enumerate((0.5, None)):
        result = analyze(chat_stream([]))
        result["cost"] = None if cost is None else {"total": cost}
        place(sessions, result, f"f{n}")
    text = format_session(record_of(sessions))
    assert text.splitlines()[0].endswith(", $0.500000 (1 turn(s) unpriced) ==")
    assert turn_lines(text, 1)[-1].endswith("; cost $0.500000")


# --- format_session: each turn's lines ------------------------------------------------------------------
# format_session__mutmut_49 (the dropped turns' line None: TypeError), _60 (the time replaces the head),
# _67 (the model shown "?" and a missing one "None"), _76 (" response None" on an HTTP turn), _77 (the
# position replaces the head), _83/_84 (prewarm, tested above), _87/_90/_91 (INCOMPLETE on the complete
# turns, replacing the head, TypeError), _110/_113 (tokens "unknown" where one count is known), _122/_132
# (a known count shown "?"), _125/_126 (the cached count never shown / shown when none), _n__mutmut_1..5


def test_each_turns_head_and_tokens_line():
    sessions = Sessions()
    place(sessions, analyze(chat_stream([SEARCH])), "f1-long-flow-id", time=3661.0)
    place(sessions, gemini(), "f2")
    place(sessions, analyze(chat_stream([], usage={"prompt_tokens": 5})), "f3")
    place(sessions, analyze(chat_stream([], usage={"completion_tokens": 7})), "f4")
    cut = sse({**tool_chunk(call(0, "call_9", "search", "{}")), "model": "gpt-4o"}, done=False)
    place(sessions, analyze(cut), "f5")
    text = format_session(record_of(sessions))
    assert turn_lines(text, 1) == [
        "  turn 1  01:01:01  gpt-4o  flow f1-long-",
        '    call search({"q": "rbi"}) -> NEVER ANSWERED',
        "    tokens: in 1200 (cached 1000), out 80; cost unknown",
    ]
    assert turn_lines(text, 2) == ["  turn 2  ?  flow f2", "    tokens: unknown; cost unknown"]
    assert turn_lines(text, 3)[-1] == "    tokens: in 5, out ?; cost unknown"
    assert turn_lines(text, 4)[-1] == "    tokens: in ?, out 7; cost unknown"
    assert turn_lines(text, 5)[0] == "  turn 5  gpt-4o  flow f5 INCOMPLETE"


def test_the_turns_no_longer_kept_are_counted():
    sessions = Sessions(max_turns=1)
    for n in range(3):
        place(sessions, analyze(chat_stream([])), f"f{n}")
    assert "  (2 earliest turn(s) no longer kept)" in format_session(record_of(sessions)).splitlines()


# --- _answer and _size: a result's size and state ---------------------------------------------------------
# _size__mutmut_2 (always bytes), _3 (1024 shown in bytes), _5 (KiB multiplied)


def test_a_results_size_is_shown_in_bytes_below_one_kib_and_in_kib_from_there():
    sessions = Sessions()
    calls = [("a", "read", "{}"), ("b", "read", "{}"), ("c", "read", "{}")]
    place(sessions, analyze(chat_stream(calls)), "f1")
    results = [
        sent(id="a", size=1023, error=False),
        sent(id="b", size=1024),
        sent(id="c", size=2560, error=True),
    ]
    place(sessions, analyze(chat_stream([])), "f2", tool_results=results)
    assert turn_lines(format_session(record_of(sessions)), 1)[1:4] == [
        "    call read({}) -> result 1023 B ok (turn 2)",
        "    call read({}) -> result 1.0 KiB sent (turn 2)",
        "    call read({}) -> result 2.5 KiB ERROR (turn 2)",
    ]


# --- _clock: a turn's time is UTC, whatever the machine's zone -------------------------------------------
# _clock__mutmut_3, _5 (the local zone)


@pytest.fixture
def far_zone(monkeypatch):
    monkeypatch.setenv("TZ", "Asia/Kolkata")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_a_turns_time_is_shown_in_utc_on_a_machine_in_another_zone(far_zone):
    sessions = Sessions()
    place(sessions, analyze(chat_stream([])), "f1", time=3661.0)
    assert turn_lines(format_session(record_of(sessions)), 1)[0] == "  turn 1  01:01:01  gpt-4o  flow f1"


# --- usage._named: a format that says nowhere where its counts are ---------------------------------------
# _named__mutmut_6, _8 (a figure the format names no field for: TypeError)


def test_usage_of_a_format_without_usage_fields_says_no_count_came():
    usage = normalised(None, {"tokens": 5})
    assert [usage[name] for name in ("input", "output")] == [None, None]
    assert usage["provider"] == {"tokens": 5}
    assert usage["notes"] == ["no input or output count in the provider's usage"]


# --- usage._shown: a value that is no count, as a note shows it -------------------------------------------
# _shown__mutmut_4 (never shortened), _5 (40 characters shortened), _7 (TypeError)


def test_a_value_that_is_no_count_is_shown_whole_up_to_40_characters_and_shortened_beyond():
    forty, longer = "x" * 38, "y" * 39  # their reprs: 40 and 41 characters
    result = analyze(chat_stream([], usage={"prompt_tokens": forty, "completion_tokens": longer}))
    assert result["usage"]["notes"][:2] == [
        f"prompt_tokens is '{forty}', not a count: left out",
        f"completion_tokens is '{'y' * 36}..., not a count: left out",
    ]
