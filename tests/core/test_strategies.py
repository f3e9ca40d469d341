"""Each hazard strategy breaks on the stream shape it is known to break on, and agrees on clean ones."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streams import DATA, call, choice, chunk, codes, sse, tool_chunk, warning

from accumulator import STRATEGIES, analyze
from accumulator.strategies import Strategy

SEQUENTIAL = sse(
    tool_chunk(call(0, "call_w", "get_weather", "")),
    tool_chunk(call(0, arguments='{"city": ')),
    tool_chunk(call(0, arguments='"Paris"}')),
    tool_chunk(call(1, "call_t", "get_time", "")),
    tool_chunk(call(1, arguments='{"tz": "CET"}')),
    chunk(choice(0, "tool_calls")),
)

# The stream shape each strategy is known to break on (docs/routing.md: the hazard strategies), as Chat chunks.
BREAKING = {
    "recency": (DATA / "production_interleaved.sse").read_bytes(),  # Q1 interleaving
    "index-only": sse(  # Q5: two whole calls without an index (Mistral): both land on key 0
        tool_chunk(
            call(None, "gSIMJiOkT", "get_weather", '{"city": "Paris"}'),
            call(None, "kLq2Vn8Ra", "get_time", "{}"),
        ),
        chunk(choice(0, "tool_calls")),
    ),
    "id-then-index": sse(  # Q6: a new id with an index already taken (Groq)
        tool_chunk(call(0, "call_1", "weather", '{"location": "Tokyo"}')),
        tool_chunk(call(0, "call_2", "weather", '{"location": "Paris"}')),
        chunk(choice(0, "tool_calls")),
    ),
    "field-concat": sse(  # Q7: the name repeated on every delta (MiniMax via NIM)
        tool_chunk(call(0, "call_r", "read_file", '{"path": ')),
        tool_chunk(call(0, None, "read_file", '"a.txt"}')),
        chunk(choice(0, "tool_calls")),
    ),
    "last-wins": sse(  # Q4: continuations with name "" (LM Studio)
        tool_chunk(call(0, "call_e", "lookup", "")),
        tool_chunk(call(0, None, "", '{"q": 1}')),
        chunk(choice(0, "tool_calls")),
    ),
}
# The rules that route fragments their own way; parse-early routes as identity does and breaks only on
# arguments that are no JSON whole (its own tests: test_parse_early.py).
ROUTING = [name for name, strategy in STRATEGIES.items() if not strategy.derived]
WOULD_BUILD = {
    "recency": ["search_circulars", "get_user_profile"],
    "index-only": ["get_weather"],  # get_time's arguments glued onto get_weather's
    "id-then-index": ["weather"],
    "field-concat": ["read_fileread_file"],
    "last-wins": [""],
}


@pytest.mark.parametrize("name", ROUTING)
def test_each_strategy_breaks_on_its_known_shape(name):
    result = analyze(BREAKING[name], "openai-chat")
    assert result["compatibility"][name]["verdict"] == "breaks"
    misroute = warning(result, f"{name}-misroute")
    assert misroute["severity"] == "warning" and misroute["strategy"] == name
    assert [c["name"] for c in misroute["would_build"]] == WOULD_BUILD[name]
    assert misroute["first_divergence_event"] is not None
    # Identity routing is right all the same.
    assert all(json_ok(c["arguments"]) for c in result["choices"][0]["tool_calls"])


def json_ok(text: str) -> bool:
    import json

    try:
        json.loads(text or "{}")
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("name", STRATEGIES)
def test_each_strategy_agrees_on_a_clean_sequential_stream(name):
    result = analyze(SEQUENTIAL, "openai-chat")
    assert result["compatibility"][name] == {"verdict": "ok", "reason": "rebuilds the same 2 call(s)"}
    assert result["warnings"] == []


def test_the_verdict_table_only_holds_the_strategies_asked_for():
    result = analyze(BREAKING["recency"], "openai-chat", strategies=("index-only",))
    assert list(result["compatibility"]) == ["index-only"] and codes(result) == []


def test_id_mangling_alone_breaks_a_strategy():
    # Same routing, same arguments: field-concat still glues repeated ids together (Q3: LiteLLM proxy).
    body = sse(
        tool_chunk(call(0, "chatcmpl-tool-aa62", "f", "{")),
        tool_chunk(call(0, "chatcmpl-tool-aa62", None, "}")),
        chunk(choice(0, "tool_calls")),
    )
    result = analyze(body, "openai-chat")
    misroute = warning(result, "field-concat-misroute")
    assert misroute["would_build"][0]["id"] == "chatcmpl-tool-aa62chatcmpl-tool-aa62"
    assert misroute["first_divergence_event"] == 2


@pytest.mark.parametrize(
    ("wire_id", "breaks"),
    [("null", []), ("", []), (123, ["id-then-index-misroute"]), (0, ["id-then-index-misroute"])],
)
def test_a_lone_call_whose_id_is_a_placeholder_or_a_number_is_compared_as_identity_reads_it(wire_id, breaks):
    # Every rule builds this one call: all five used to say "breaks", the naive side holding "null" or 123
    # where identity holds no id or "123". Only id-then-index, which takes no id but a string, loses it.
    body = sse(tool_chunk(call(0, wire_id, "f", '{"a": 1}')), chunk(choice(0, "tool_calls")))
    result = analyze(body, "openai-chat")
    assert codes(result) == breaks
    assert [name for name, v in result["compatibility"].items() if v["verdict"] != "ok"] == [
        code.removesuffix("-misroute") for code in breaks
    ]
    for code in breaks:
        assert warning(result, code)["would_build"] == [{"id": None, "name": "f", "arguments": '{"a": 1}'}]


def test_a_placeholder_glued_to_a_real_id_still_breaks_field_concat():
    body = sse(
        tool_chunk(call(0, "call_1", "f", "{")),
        tool_chunk(call(0, "null", None, "}")),
        chunk(choice(0, "tool_calls")),
    )
    assert (
        warning(analyze(body, "openai-chat"), "field-concat-misroute")["would_build"][0]["id"] == "call_1null"
    )


def test_whole_call_formats_are_not_applicable():
    result = analyze((DATA / "gemini_parallel.sse").read_bytes(), "gemini")
    assert {v["verdict"] for v in result["compatibility"].values()} == {"n/a"}
    assert set(result["compatibility"]) == set(STRATEGIES)


def test_no_tool_calls_is_ok_for_everyone():
    result = analyze(sse(chunk(choice(0, content="hi")), chunk(choice(0, "stop"))), "openai-chat")
    assert {v["reason"] for v in result["compatibility"].values()} == {"no tool calls to rebuild"}


def test_a_strategy_woken_by_a_stream_with_no_call_says_there_was_none_to_rebuild():
    # result _verdict_114: a lone fragment that names no call wakes the strategies (three of them build a
    # call from it); the two that drop it, as identity does, rebuild nothing, and say so in words
    body = sse(tool_chunk(call(None, None, None, "}")), chunk(choice(0, "stop")))
    result = analyze(body, "openai-chat")
    assert result["choices"][0]["tool_calls"] == []
    for name in ("recency", "id-then-index"):
        assert result["compatibility"][name] == {"verdict": "ok", "reason": "no tool calls to rebuild"}
    assert result["compatibility"]["last-wins"]["verdict"] == "breaks"


class OneCallStrategy(Strategy):
    """Deliberately broken, and it says nothing about when it may diverge: every delta into one call."""

    name = "one-call"
    code = "index-only-misroute"  # a catalogue code (warnings.py): this test adds no code of its own
    rule = "every delta goes to the first call"

    def route(self, op, table):
        created = not table.calls
        call = table.new(op.id, op.name) if created else table.calls[0]
        call.append(op.arguments)
        return call, created


def test_a_new_strategy_that_says_nothing_is_replayed_never_a_false_ok(monkeypatch):
    monkeypatch.setitem(STRATEGIES, OneCallStrategy.name, OneCallStrategy)
    result = analyze(BREAKING["recency"], "openai-chat", strategies=("one-call", "recency"))
    assert result["compatibility"]["one-call"]["verdict"] == "breaks"
    misroutes = [w for w in result["warnings"] if w["code"] == "index-only-misroute"]
    assert [w["strategy"] for w in misroutes] == ["one-call"]
    assert [c["name"] for c in misroutes[0]["would_build"]] == ["search_circulars"]
    # Replayed, it still agrees where it should: one call, nothing to put elsewhere.
    one = sse(
        tool_chunk(call(0, "call_w", "get_weather", "")),
        tool_chunk(call(0, arguments='{"city": "Paris"}')),
        chunk(choice(0, "tool_calls")),
    )
    assert analyze(one, "openai-chat", strategies=("one-call",))["compatibility"]["one-call"] == {
        "verdict": "ok",
        "reason": "rebuilds the same 1 call(s)",
    }


# -- the lazy wake-up (Strategy.agrees) never changes a verdict ---------------------------------------------
#
# The assembly keeps a strategy asleep while its rule says it surely routes as identity does, and replays it
# from the first delta it might not. The harness below has every strategy awake from the first delta (the
# base's never-agree rule), and the results must be the same, warnings and first divergences included.

EAGER = {
    name: type(f"Eager{cls.__name__}", (cls,), {"agrees": Strategy.agrees})
    for name, cls in STRATEGIES.items()
}

# Few values, so that random streams collide: ids reused and placeholders (""/"null"), indexes shared
# or missing, names repeated, empty, or split in two (get_ + weather).
IDS = st.sampled_from([None, None, "", "null", "call_a", "call_b", "call_c"])
INDEXES = st.sampled_from([None, 0, 0, 1, 1, 2])
NAMES = st.sampled_from([None, None, None, "", "get_weather", "get_", "weather", "get_time"])
ARGUMENTS = st.sampled_from([None, "", "{", '"a"', ": 1", "}", '{"x": 2}'])


@st.composite
def random_chat_stream(draw) -> bytes:
    def entry():
        return call(draw(INDEXES), draw(IDS), draw(NAMES), draw(ARGUMENTS))

    choices = draw(st.sampled_from([(0,), (0,), (0, 1)]))
    events = []
    for _ in range(draw(st.integers(1, 10))):
        n = draw(st.sampled_from([1, 1, 1, 2]))  # now and then two entries in one chunk
        events.append(tool_chunk(*(entry() for _ in range(n)), choice_index=draw(st.sampled_from(choices))))
    events += [chunk(choice(c, "tool_calls")) for c in choices]
    return sse(*events)


@settings(max_examples=600, derandomize=True, deadline=None)
@given(random_chat_stream())
def test_the_lazy_wake_up_never_changes_a_verdict(body):
    lazy = analyze(body, "openai-chat")
    with mock.patch.dict(STRATEGIES, EAGER):
        eager = analyze(body, "openai-chat")
    assert lazy == eager


def test_index_keyed_strategies_read_a_missing_index_as_0():
    # `index ?? 0`: a fragment without an index continues call 0, as identity routing's one call does.
    body = sse(
        tool_chunk(call(0, "call_a", "f", '{"a": ')),
        tool_chunk(call(None, None, None, "1}")),
        chunk(choice(0, "tool_calls")),
    )
    result = analyze(body, "openai-chat")
    for name in ("index-only", "field-concat", "last-wins"):
        assert result["compatibility"][name] == {"verdict": "ok", "reason": "rebuilds the same 1 call(s)"}


def _op(event, call_id, index, name, arguments=None):
    from accumulator.ops import ToolCallDelta

    return ToolCallDelta(event, 0, call_id, index, name, arguments)


def _replay(strategy, *ops):
    for op in ops:
        strategy.observe(op, None, False, None, None)
    return strategy.calls(0)


def test_index_only_opens_a_nameless_call_and_takes_a_later_id_and_name():
    # A call opened with name "" keeps no name until one comes; a later id and name fill it.
    calls = _replay(
        STRATEGIES["index-only"](),
        _op(1, None, 0, "", '{"a": '),
        _op(2, "call_late", 0, "lookup", "1}"),
    )
    assert calls == [{"id": "call_late", "name": "lookup", "arguments": '{"a": 1}'}]
    # Never named: no name, not an empty one.
    assert _replay(STRATEGIES["index-only"](), _op(1, None, 0, "", "{}")) == [
        {"id": None, "name": None, "arguments": "{}"}
    ]


def test_id_then_index_takes_only_a_nonempty_string_as_an_id():
    # An id of another type (or "") names no call: routing falls back to the index.
    calls = _replay(
        STRATEGIES["id-then-index"](),
        _op(1, 5, 0, "f", '{"a": '),
        _op(2, "", 0, None, "1}"),
    )
    assert calls == [{"id": None, "name": "f", "arguments": '{"a": 1}'}]


def test_an_awake_strategy_forgets_the_calls_beyond_the_calls_cap():
    # Two interleaved calls and a cap of one: identity keeps the first; an awake strategy keeps only it too,
    # and forgets the keys of the second, so a stream of new calls that never ends holds nothing more.
    body = (DATA / "production_interleaved.sse").read_bytes()
    result = analyze(body, "openai-chat", max_calls=1)
    assert len(result["choices"][0]["tool_calls"]) == 1
    strategy = STRATEGIES["index-only"](max_calls=1)
    _replay(
        strategy, _op(1, "call_a", 0, "a", "{"), _op(2, "call_b", 1, "b", "{"), _op(3, None, 1, None, "}")
    )
    table = strategy.tables[0]
    assert [c.name for c in table.calls] == ["a"]
    assert set(table.by_index) == {0}  # index 1 was forgotten with its call
