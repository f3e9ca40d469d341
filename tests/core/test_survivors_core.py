"""What a mutation run found untested in strategies.py, assembly.py and result.py (docs/mutation.md): where
a strategy first goes astray, the id-then-index and last-wins rules' corners, calls without an id named by
their position, the request checks' details, and warnings added to a result that already suppressed some."""

from __future__ import annotations

import pytest
from schemas import check_result
from streams import call, calls_of, choice, chunk, codes, sse, tool_chunk, warning

from accumulator import add_warnings, analyze
from accumulator.warnings import MAX_PER_CODE

# -- strategies.py: the first divergence, and each rule's corners --------------------------------------------


def _index_reused_after(third: dict) -> bytes:
    # Two calls; then ``third`` names call_b by its id but carries call_a's index (index-only puts it in
    # call_a, identity in call_b); then a new id on a taken index, which index-only merges into call_a.
    return sse(
        tool_chunk(call(0, "call_a", "f", "{}")),
        tool_chunk(call(1, "call_b", "g", "{}")),
        tool_chunk(third),
        tool_chunk(call(0, "call_c", "h", "{}")),
        chunk(choice(0, "tool_calls")),
    )


@pytest.mark.parametrize(
    "third,first_divergence",
    [
        (call(0, "call_b", "g"), 3),  # a name alone is something carried to the wrong call
        (call(0, "call_b", None, ""), 4),  # empty arguments carry nothing: not yet astray
        (call(0, "call_b"), 4),  # no arguments at all: the same
    ],
    ids=["name-only", "empty-arguments", "no-arguments"],
)
def test_the_first_divergence_is_the_first_misrouted_delta_that_carried_something(third, first_divergence):
    result = analyze(_index_reused_after(third), "openai-chat", strategies=("index-only",))
    assert len(result["choices"][0]["tool_calls"]) == 3
    misroute = warning(result, "index-only-misroute")
    assert misroute["first_divergence_event"] == first_divergence
    assert result["compatibility"]["index-only"]["reason"].startswith(
        f"builds 2 call(s) instead of 3 at event {first_divergence}: "
    )


@pytest.mark.parametrize("name", ["id-then-index", "field-concat"])
def test_a_delta_routed_where_identity_routes_it_is_not_where_a_strategy_went_astray(name):
    # The continuation with name "" wakes the index-keyed rules, yet both put it in call_1, as identity
    # does; they go astray only at event 3, a new id on the taken index 0 (merged into call_1).
    body = sse(
        tool_chunk(call(0, "call_1", "f", '{"a": ')),
        tool_chunk(call(0, None, "", "1}")),
        tool_chunk(call(0, "call_2", "g", "{}")),
        chunk(choice(0, "tool_calls")),
    )
    result = analyze(body, "openai-chat", strategies=(name,))
    assert calls_of(result) == [("call_1", "f", '{"a": 1}'), ("call_2", "g", "{}")]
    assert warning(result, f"{name}-misroute")["first_divergence_event"] == 3


def test_id_then_index_follows_a_known_id_before_the_index():
    # Continuations naming their call by id, one without an index and one with another call's index:
    # matched by id first, they land where identity routing puts them.
    body = sse(
        tool_chunk(call(0, "call_a", "f", '{"x": ')),
        tool_chunk(call(1, "call_b", "g", '{"y": ')),
        tool_chunk(call(None, "call_a", None, "1}")),
        tool_chunk(call(0, "call_b", None, "2}")),
        chunk(choice(0, "tool_calls")),
    )
    result = analyze(body, "openai-chat", strategies=("id-then-index",))
    assert calls_of(result) == [("call_a", "f", '{"x": 1}'), ("call_b", "g", '{"y": 2}')]
    assert result["compatibility"]["id-then-index"] == {
        "verdict": "ok",
        "reason": "rebuilds the same 2 call(s)",
    }
    assert result["warnings"] == []


@pytest.mark.parametrize(
    "second,identity_name",
    [("get_weather", "get_weather"), ("weather", "get_weather")],
    ids=["restated-whole", "continued"],
)
def test_id_then_index_keeps_the_name_a_call_opened_with(second, identity_name):
    # It names a call only when the call has no name: a later name, restated whole (which identity routing
    # takes) or continued (which identity routing appends), leaves the first piece.
    body = sse(
        tool_chunk(call(0, "call_1", "get_", "")),
        tool_chunk(call(0, "call_1", second, "{}")),
        chunk(choice(0, "tool_calls")),
    )
    result = analyze(body, "openai-chat", strategies=("id-then-index",))
    assert calls_of(result) == [("call_1", identity_name, "{}")]
    assert result["compatibility"]["id-then-index"]["verdict"] == "breaks"
    misroute = warning(result, "id-then-index-misroute")
    assert misroute["would_build"] == [{"id": "call_1", "name": "get_", "arguments": "{}"}]
    assert misroute["first_divergence_event"] == 2


def test_last_wins_keeps_an_id_repeated_on_every_delta():
    # Q3's shape (the id on every delta): assigning the same id again changes nothing, unlike
    # field-concat's gluing (test_strategies.py).
    body = sse(
        tool_chunk(call(0, "chatcmpl-tool-aa62", "f", "{")),
        tool_chunk(call(0, "chatcmpl-tool-aa62", None, "}")),
        chunk(choice(0, "tool_calls")),
    )
    result = analyze(body, "openai-chat", strategies=("last-wins",))
    assert result["compatibility"]["last-wins"] == {"verdict": "ok", "reason": "rebuilds the same 1 call(s)"}
    assert result["warnings"] == []


# -- assembly.py: a call without an id is named by its position --------------------------------------------


def test_the_arguments_cap_names_a_call_without_an_id_by_its_position():
    body = sse(
        tool_chunk(call(0, None, "f", '{"text": "')),
        tool_chunk(call(0, None, None, "a" * 40 + '"}')),
        chunk(choice(0, "tool_calls")),
    )
    result = analyze(body, "openai-chat", max_argument_chars=30)
    assert codes(result) == ["arguments-cap"]
    cap = warning(result, "arguments-cap")
    assert (cap["id"], cap["event"], cap["choice"], cap["limit"]) == (None, 2, 0, 30)
    assert cap["message"].startswith("event 2: call #0 (f): ")
    assert result["choices"][0]["tool_calls"][0]["arguments_truncated"] is True


# -- result.py: the request checks' details, and add_warnings ------------------------------------------------

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
REQUEST = {
    "model": "m",
    "stream": True,
    "tools": [
        {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}},
        {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}},
    ],
    "parallel_tool_calls": False,
    "tool_choice": {"type": "function", "function": {"name": "get_time"}},
}


def test_every_request_check_carries_its_documented_details():
    # Three calls against a request that declares get_weather and get_time, turns parallel calls off and
    # forces get_time: arguments off the schema, an undeclared name on a call without an id, a call with
    # no name. docs/warnings.md lists each check's details; a call without an id is "#position".
    body = sse(
        tool_chunk(call(0, "call_w", "get_weather", '{"city": 7}')),
        tool_chunk(call(1, None, "lookup", "{}")),
        tool_chunk(call(2, "call_n", None, "{}")),
        chunk(choice(0, "tool_calls")),
    )
    result = analyze(body, "openai-chat", request=REQUEST, strategies=())
    check_result(result)
    assert codes(result) == [
        "schema-mismatch",
        "undeclared-tool",
        "undeclared-tool",
        "parallel-disabled",
        "tool-choice-ignored",
    ]
    mismatch, undeclared, nameless, parallel, ignored = result["warnings"]
    declared = ["get_time", "get_weather"]
    details = {k: v for k, v in mismatch.items() if k not in ("message", "error")}
    assert details == {
        "code": "schema-mismatch",
        "severity": "warning",
        "choice": 0,
        "id": "call_w",
        "name": "get_weather",
        "path": "city",
    }
    assert "is not of type 'string'" in mismatch["error"]
    assert mismatch["message"].startswith("call call_w (get_weather): ")
    assert {k: v for k, v in undeclared.items() if k != "message"} == {
        "code": "undeclared-tool",
        "severity": "warning",
        "choice": 0,
        "id": None,
        "name": "lookup",
        "declared": declared,
    }
    assert undeclared["message"].startswith("call #1 names 'lookup'")
    assert {k: v for k, v in nameless.items() if k != "message"} == {
        "code": "undeclared-tool",
        "severity": "warning",
        "choice": 0,
        "id": "call_n",
        "name": None,
        "declared": declared,
    }
    assert nameless["message"].startswith("call call_n has no name")
    assert {k: v for k, v in parallel.items() if k != "message"} == {
        "code": "parallel-disabled",
        "severity": "warning",
        "choice": 0,
        "names": ["get_weather", "lookup", None],
    }
    assert parallel["message"].startswith("3 tool calls in choice 0 ")
    assert {k: v for k, v in ignored.items() if k != "message"} == {
        "code": "tool-choice-ignored",
        "severity": "warning",
        "choice": 0,
        "forced": "get_time",
    }
    assert ignored["message"].endswith(" called 'get_weather', 'lookup', None")


def test_a_forced_tool_never_called_says_no_tool_was_called():
    body = sse(chunk(choice(0, content="no")), chunk(choice(0, "stop")))
    result = analyze(body, "openai-chat", request=REQUEST, strategies=())
    check_result(result)
    (ignored,) = result["warnings"]
    assert (ignored["code"], ignored["forced"]) == ("tool-choice-ignored", "get_time")
    assert ignored["message"].endswith(" called no tool")


def test_warnings_added_later_keep_the_count_of_those_suppressed_before():
    # add_warnings twice: the second log starts from the suppressed count the result already has.
    result = analyze(sse(chunk(choice(0, content="hi")), chunk(choice(0, "stop"))), "openai-chat")
    echo = {"code": "client-misassembled", "severity": "warning", "message": "m"}
    add_warnings(result, [dict(echo, id=f"call_{n}") for n in range(MAX_PER_CODE + 5)])
    assert result["stats"]["warnings_suppressed"] == 5
    add_warnings(result, [dict(echo, id="call_late")])
    assert result["stats"]["warnings_suppressed"] == 6
    assert len(result["warnings"]) == MAX_PER_CODE
    check_result(result)
