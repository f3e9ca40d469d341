"""The assembly's hot path, the strategies' rule and call timing: what a mutation run found untested (the
logic survivors of ``Assembly._tool_delta`` and ``_set_name``, ``strategies._starts_cleanly``,
``RecencyStrategy.agrees``, ``IndexKeyedStrategy.agrees`` and ``result._relative``; see docs/mutation.md).
Each test was checked by applying the mutation it guards against to the source by hand and seeing it
fail."""

from __future__ import annotations

from unittest import mock

import pytest
from streams import call, calls_of, choice, chunk, codes, sse, tool_chunk

from accumulator import STRATEGIES, StreamAccumulator, analyze
from accumulator.assembly import Assembly
from accumulator.ops import ToolCallDelta
from accumulator.strategies import Strategy
from accumulator.warnings import WarningLog

# --- Assembly._set_name: the name-repeated and name-split warnings say which call, where ---------------------
# (mutants 10-13, 16-19, 22, 25 of the first; 31-34, 38-40, 44, 47 of the second)


def _named_twice(second_name: str, choice_index: int, call_id) -> dict:
    body = sse(
        tool_chunk(call(0, "call_first", "other", "{}"), choice_index=choice_index),
        tool_chunk(call(1, call_id, "get_wea", '{"q": '), choice_index=choice_index),
        tool_chunk(call(1, None, second_name, "1}"), choice_index=choice_index),
        chunk(choice(choice_index, "tool_calls")),
    )
    return analyze(body, "openai-chat")


@pytest.mark.parametrize(("call_id", "named"), [("call_b", "call_b"), (None, "#1")])
def test_a_repeated_name_is_reported_with_its_event_choice_call_and_name(call_id, named):
    result = _named_twice("get_wea", 1, call_id)
    (repeated,) = [w for w in result["warnings"] if w["code"] == "name-repeated"]
    assert repeated == {
        "code": "name-repeated",
        "severity": "info",
        "message": f"event 3: the name 'get_wea' of call {named} was sent again",
        "event": 3,
        "choice": 1,
        "id": call_id,
        "name": "get_wea",
    }


@pytest.mark.parametrize(("call_id", "named"), [("call_b", "call_b"), (None, "#1")])
def test_a_split_name_is_reported_with_its_event_choice_call_and_pieces(call_id, named):
    result = _named_twice("ther", 1, call_id)
    assert calls_of(result, 1)[1][1:] == ("get_weather", '{"q": 1}')
    (split,) = [w for w in result["warnings"] if w["code"] == "name-split"]
    assert split == {
        "code": "name-split",
        "severity": "info",
        "message": f"event 3: call {named} name continued: 'get_wea' + 'ther'",
        "event": 3,
        "choice": 1,
        "id": call_id,
        "pieces": ["get_wea", "ther"],
    }


# --- _starts_cleanly: an id that is not a string is no clean start (mutant 14) --------------------------------
# The lazy rule must say no to it, as an always-awake strategy would see: identity reads 123 as "123",
# a client keeps 123 (and an unhashable id must not reach the placeholder set).

EAGER = {
    name: type(f"Eager{cls.__name__}", (cls,), {"agrees": Strategy.agrees})
    for name, cls in STRATEGIES.items()
}


@pytest.mark.parametrize("call_id", [123, {"n": 1}])
def test_a_call_id_that_is_not_a_string_gets_the_verdicts_of_always_awake_strategies(call_id):
    body = sse(
        tool_chunk(call(0, call_id, "lookup", '{"q": ')),
        tool_chunk(call(0, None, None, "1}")),
        chunk(choice(0, "tool_calls")),
    )
    lazy = analyze(body, "openai-chat")
    with mock.patch.dict(STRATEGIES, EAGER):
        eager = analyze(body, "openai-chat")
    assert lazy == eager
    assert "internal-error" not in codes(lazy)


# --- the laziness itself: clean deltas leave every strategy asleep ------------------------------------------
# No result changes when a strategy wakes too early (test_strategies' lazy property): only a replay of
# every later delta, the cost the rule exists to spare. Mutants 8, 10, 27 of _tool_delta; 5, 6, 10, 13, 14
# of _starts_cleanly; 8 of RecencyStrategy.agrees; 15, 16, 17 of IndexKeyedStrategy.agrees.


def _assembly() -> Assembly:
    return Assembly(WarningLog(), [cls() for cls in STRATEGIES.values()])


CLEAN = [  # (id, index, name, arguments): a clean start, then bare continuations by index
    ("call_a", 0, "get_weather", ""),
    (None, 0, None, '{"city": '),
    (None, 0, None, '"Paris"}'),
    ("call_b", 1, "get_time", ""),
    (None, 1, None, "{}"),
    (None, 2, "no_id_yet", "{}"),  # a clean start needs no id
]


def test_a_clean_stream_wakes_no_strategy_and_a_hazard_wakes_its_rule():
    assembly = _assembly()
    for event, (call_id, index, name, arguments) in enumerate(CLEAN, 1):
        assembly.apply(ToolCallDelta(event, 0, call_id, index, name, arguments))
    assert assembly.awake_strategies() == set()
    # A continuation with an empty name (LM Studio): the index-keyed rule cannot vouch for it; recency can (the latest call).
    assembly.apply(ToolCallDelta(len(CLEAN) + 1, 0, None, 2, "", ""))
    # (parse-early routes as identity does: judged at the end, it never wakes.)
    assert assembly.awake_strategies() == set(STRATEGIES) - {"recency", "parse-early"}


# --- result._relative: a clock that starts mid-stream (mutant 3) ---------------------------------------------


def test_a_call_opened_before_the_clock_started_has_no_first_time_but_a_last_one():
    stream = StreamAccumulator("openai-chat")
    stream.feed(sse(tool_chunk(call(0, "call_a", "lookup", '{"q": ')), done=False))  # no time known
    stream.feed(sse(tool_chunk(call(0, None, None, "1}")), chunk(choice(0, "tool_calls"))), now=5.0)
    result = stream.finish(now=6.0)
    (found,) = result["choices"][0]["tool_calls"]
    assert (found["arguments"], found["first_at"], found["last_at"]) == ('{"q": 1}', None, 0.0)
    assert "internal-error" not in codes(result)
