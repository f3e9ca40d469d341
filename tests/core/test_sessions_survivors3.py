"""Sessions, usage and cost, a third look: what a mutation run found untested (the logic survivors of
``accumulator/sessions.py``, ``accumulator/usage.py`` and ``accumulator/cost.py`` that the earlier reviews'
tests left; see docs/mutation.md). Each test was checked by applying the mutation it guards against to the
source by hand and seeing it fail."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from chat_flows import chat_stream

from accumulator import analyze
from accumulator.cost import Prices, parse_price_file
from accumulator.request import request_facts
from accumulator.sessions import MAX_RESPONSE_IDS, Asked, Sessions, asked
from accumulator.usage import normalised

BASE = analyze(chat_stream([]))  # a response without calls; each turn below is a shallow copy of it


def response(*calls: tuple[str, str], response_id: str | None = None) -> dict:
    """A response making these (name, arguments) calls, as its result."""
    tool_calls = [
        {"id": f"call_{n}", "name": name, "arguments": args} for n, (name, args) in enumerate(calls)
    ]
    return dict(
        BASE,
        response_id=response_id,
        choices=[{"tool_calls": tool_calls}],
        warnings=[],
        stats=dict(BASE["stats"]),
    )


def loops(result: dict) -> list[dict]:
    return [w for w in result["warnings"] if w["code"] == "tool-call-loop"]


# --- asked: what a request says of its turn --------------------------------------------------------------
# asked__mutmut_2 (no body: tool results None), _6, _7, _15, _24, _26 (previous_response_id lost), _25, _27
# (one that is no string kept, a string lost), _29 (a model that is no string kept), _21, _23 (the
# results read by every format's reader, not the request's format's)


def test_a_request_without_a_body_says_nothing_of_its_turn():
    assert asked(None, "openai-responses") == Asked([], None, None)


def test_a_request_names_the_response_it_follows_and_its_model_and_sends_back_its_formats_results():
    body = {
        "model": "gpt-4o",
        "previous_response_id": "resp_1",
        "messages": [{"role": "tool", "tool_call_id": "call_1", "content": "ok"}],
        # Gemini's results: not read from a Chat request
        "contents": [{"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {}}}]}],
    }
    assert asked(body, "openai-chat") == Asked(
        [{"id": "call_1", "size": 2, "error": None}], "resp_1", "gpt-4o", request_facts(body, "openai-chat")
    )


def test_a_request_carries_what_it_declares_of_tools_read_once_for_the_streams_analysis():
    body = {
        "model": "gpt-4o",
        "tools": [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}],
        "parallel_tool_calls": False,
        "tool_choice": {"type": "function", "function": {"name": "search"}},
    }
    facts = asked(body, "openai-chat").request
    assert facts == request_facts(body, "openai-chat")
    assert facts.tools == {"search": {"type": "object"}} and facts.parallel is False
    assert facts.forced == "search"
    assert request_facts(facts, "openai-chat") is facts  # read once: the accumulator takes them as they are


def test_a_previous_response_id_or_model_that_is_no_string_is_none():
    assert asked({"previous_response_id": 7, "model": ["gpt-4o"]}, "openai-responses")[:3] == ([], None, None)


# --- Sessions.place: the flow and response indexes, bounded ----------------------------------------------
# place__mutmut_20 (one flow fewer kept), _21 (a quarter of the bound), _24 (the newest flow dropped)


def test_the_flows_kept_are_the_newest_four_per_session_kept():
    sessions = Sessions(max_sessions=2)
    for n in range(1, 10):
        sessions.place(response(), f"f{n}", headers={"session-id": "s"})
    assert [n for n in range(1, 10) if sessions.of_flow(f"f{n}") is not None] == list(range(2, 10))


# place__mutmut_33 (one response id fewer kept), _35 (the newest one dropped)


def test_the_response_ids_kept_are_the_newest_ten_thousand():
    sessions = Sessions()
    for n in range(MAX_RESPONSE_IDS + 1):
        sessions.place(response(response_id=f"r{n}"), "f", headers={"session-id": "a" if n < 2 else "b"})
    follows_r1, follows_r0 = response(), response()
    sessions.place(follows_r1, "x", previous_response_id="r1")
    sessions.place(follows_r0, "y", previous_response_id="r0")  # dropped: no longer told
    assert (follows_r1["session"]["id"], follows_r1["session"]["by"]) == ("a", "previous_response_id")
    assert (follows_r0["session"]["id"], follows_r0["session"]["by"]) == ("y", "new")


# --- Sessions._find: a flow id that already names a session --------------------------------------------
# _find__mutmut_40 (the second response joins the first's session)


def test_a_flow_id_seen_again_without_anything_tying_it_opens_a_session_of_its_own():
    sessions = Sessions()
    first, second = analyze(chat_stream([])), analyze(chat_stream([]))
    sessions.place(first, "f1")
    sessions.place(second, "f1")
    assert first["session"]["id"] == "f1"
    assert (second["session"]["id"], second["session"]["turn"], second["session"]["by"]) == ("f1#1", 1, "new")
    assert len(sessions) == 2


# --- Sessions._loops: the distinct calls a session counts, and the warning ------------------------------
# _loops__mutmut_17 (one distinct call more counted), _18 (the calls after one not counted are skipped)


def test_beyond_ten_thousand_distinct_calls_a_new_one_is_not_counted_and_the_known_ones_still_are():
    sessions = Sessions()
    first = [("f", f'{{"n": {n}}}') for n in range(9_999)] + [("known", "{}")]
    sessions.place(response(*first), "f1", headers={"session-id": "s"})
    for turn in (2, 3, 4):
        result = response(("new", "{}"), ("known", "{}"))
        sessions.place(result, f"f{turn}", headers={"session-id": "s"})
    assert [(w["name"], w["times"], w["turns"]) for w in loops(result)] == [("known", 4, [1, 2, 3, 4])]


# _loops__mutmut_45 (the message's turns from the tenth on); _22, _23 and _short__mutmut_11, _13, _14 (the
# arguments shown: null, "null", never shortened, a TypeError, 203 characters); _short__mutmut_12 (200
# characters shortened)


@pytest.mark.parametrize(
    ("arguments", "shown"),
    [
        ('{"q": "rbi"}', '{"q": "rbi"}'),
        ('"' + "x" * 198 + '"', '"' + "x" * 198 + '"'),
        ('"' + "x" * 199 + '"', '"' + "x" * 196 + "..."),
    ],
)
def test_a_loop_warning_names_the_call_its_arguments_up_to_200_characters_and_its_turns(arguments, shown):
    sessions = Sessions()
    for n in range(1, 4):
        result = response(("search", arguments))
        sessions.place(result, f"f{n}", headers={"session-id": "s"})
    [warning] = loops(result)
    assert warning["arguments"] == shown
    assert warning["message"] == (
        f"search({shown}) made 3 times in this session (turns 1, 2, 3): the agent may be looping"
    )


def test_a_loop_warning_lists_the_last_ten_turns():
    sessions = Sessions()
    for n in range(1, 13):
        result = response(("search", "{}"))
        sessions.place(result, f"f{n}", headers={"session-id": "s"})
    [warning] = loops(result)
    assert warning["turns"] == list(range(3, 13))
    assert "(turns 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)" in warning["message"]


# --- usage: counts of 0 and a figure equal to the total --------------------------------------------------
# _count__mutmut_5 (0 no count), _11 (0.0 no count), _consistent__mutmut_9 (a figure equal to the total
# left out)


def test_zero_is_a_count_and_a_figure_may_equal_the_providers_total():
    def parts(raw: dict) -> dict:
        return {name: ((name, raw[name]),) for name in ("input", "output", "total")}

    usage = normalised(parts, {"input": 0, "output": 12.0, "total": 12})
    assert (usage["input"], usage["output"], usage["notes"]) == (0, 12, [])
    usage = normalised(parts, {"input": 5, "output": 0.0, "total": 5})
    assert (usage["input"], usage["output"], usage["notes"]) == (5, 0, [])


# --- cost: the request's time by the URL's provider, and an amount beyond a float -----------------------
# _lookup__mutmut_6, _10 (priced as of now when the URL names the provider)


def test_the_price_found_by_the_url_is_the_one_of_the_requests_time():
    """o3's price fell in 2025: 1M input and 1M output tokens cost $50 on 2025-01-01 and $10 on 2025-07-01."""
    result = analyze(chat_stream([], model="o3"))
    result["usage"].update(input=1_000_000, output=1_000_000, cache_read=0)
    url = "https://api.openai.com/v1/chat/completions"
    totals = []
    for month in (1, 7):
        cost, note = Prices().cost(result, url=url, when=datetime(2025, month, 1, tzinfo=UTC))
        assert note is None
        totals.append(cost["total"])
    assert totals == [pytest.approx(50.0), pytest.approx(10.0)]


# _usd__mutmut_4 (an amount too large for a float shown as infinity, which JSON cannot hold)


def test_an_amount_too_large_for_a_float_is_no_cost_with_a_note_never_infinity_or_zero():
    prices = parse_price_file(b'{"gpt-4o": {"input_mtok": 1e10, "output_mtok": 1e10}}', "prices.json")
    result = analyze(chat_stream([]))
    result["usage"].update(input=10**308, output=10**308, cache_read=0)
    assert Prices(prices, "prices.json").cost(result) == (
        None,
        "the cost of these counts at this price is too large to show",
    )
    result["usage"].update(input=10**6, output=0)  # the same price, counts a float holds: priced
    cost, note = Prices(prices, "prices.json").cost(result)
    assert (cost["total"], note) == (1e10, None)
