"""The parse-early rule: a client that finishes each call as soon as its arguments, at the end of a
fragment, parse as JSON, and ignores the call's later fragments (the Vercel AI SDK's OpenAI-compatible
providers with their isParsableJson check, as opencode bundles them; Charm's fantasy before its fix). It
routes as identity routing does; it parts from it only where a call's arguments are no JSON whole but
began with one whole value at a fragment's end."""

from __future__ import annotations

import json

from streams import call, choice, chunk, codes, named_sse, sse, tool_chunk, warning

from accumulator import analyze
from accumulator.echo import ObservedCalls

CHAT = "openai-chat"


def chat(*fragments_of_calls: tuple) -> bytes:
    """Chat chunks: each (index, id, name, arguments) one delta; then the finish."""
    return sse(
        *(tool_chunk(call(index, id, name, arguments)) for index, id, name, arguments in fragments_of_calls),
        chunk(choice(0, "tool_calls")),
    )


def parse_early(result: dict) -> dict:
    return result["compatibility"]["parse-early"]


def test_a_call_seeded_with_an_empty_object_runs_with_it_alone():
    # A translator that seeds each call with Anthropic's empty input ({}) and appends the real arguments:
    # the stream carries {}{"city": "Paris"}; a parse-early client finished the call at {}.
    result = analyze(
        chat(
            (0, "call_w", "get_weather", "{}"),
            (0, None, None, '{"city": '),
            (0, None, None, '"Paris"}'),
        ),
        CHAT,
    )
    (identity,) = result["choices"][0]["tool_calls"]
    assert identity["arguments"] == '{}{"city": "Paris"}'
    assert parse_early(result)["verdict"] == "breaks"
    found = warning(result, "parse-early-misroute")
    assert found["severity"] == "warning" and found["strategy"] == "parse-early"
    assert found["would_build"] == [{"id": "call_w", "name": "get_weather", "arguments": "{}"}]
    assert found["first_divergence_event"] == 2  # the first fragment it ignored
    assert "invalid-arguments" in codes(result)
    # The other rules route the same fragments to the same call: they rebuild what identity does.
    assert {name for name, v in result["compatibility"].items() if v["verdict"] == "breaks"} == {
        "parse-early"
    }


def test_arguments_sent_whole_and_then_again_are_kept_once():
    # vLLM's end-of-stream flush (FORMATS Q9): the fragments, then the whole arguments again. The stream
    # carries them twice; a parse-early client keeps the first copy (which differs from what was carried).
    result = analyze(
        chat(
            (0, "call_w", "get_weather", '{"city": '),
            (0, None, None, '"Paris"}'),
            (0, None, None, '{"city": "Paris"}'),
        ),
        CHAT,
    )
    assert result["choices"][0]["tool_calls"][0]["arguments"] == '{"city": "Paris"}{"city": "Paris"}'
    assert warning(result, "parse-early-misroute")["would_build"][0]["arguments"] == '{"city": "Paris"}'
    assert parse_early(result)["reason"].startswith("builds different calls at event 3")


def test_closing_brackets_inside_strings_and_white_space_after_the_end_break_nothing():
    # Code in an argument: many fragments end in a closing bracket that closes nothing yet.
    result = analyze(
        chat(
            (0, "call_e", "edit", '{"code": "if (x) {'),
            (0, None, None, "} else {"),
            (0, None, None, 'y()}", "list": [1]'),
            (0, None, None, ', "map": {"a": [2]}'),
            (0, None, None, "}"),
            (0, None, None, "\n  "),  # white space after the whole value: still one JSON value
        ),
        CHAT,
    )
    assert json.loads(result["choices"][0]["tool_calls"][0]["arguments"])["list"] == [1]
    assert parse_early(result) == {"verdict": "ok", "reason": "rebuilds the same 1 call(s)"}
    assert result["warnings"] == []


def test_a_whole_value_ending_in_white_space_then_more_is_cut_there():
    result = analyze(
        chat(
            (0, "call_a", "a", '{"n": 1}\n'),
            (0, None, None, "  "),  # white space alone: not yet a fragment it ignores
            (0, None, None, '{"n": 2}'),
        ),
        CHAT,
    )
    found = warning(result, "parse-early-misroute")
    assert found["would_build"][0]["arguments"] == '{"n": 1}' and found["first_divergence_event"] == 3


def test_a_whole_value_inside_a_fragment_is_not_where_it_stops():
    # The client looks at fragments' ends only: '{"a": 1}}' never parsed at one, so it keeps all of it.
    result = analyze(
        chat((0, "call_a", "a", '{"a": '), (0, None, None, "1}}"), (0, None, None, '{"b": 2}')), CHAT
    )
    assert "invalid-arguments" in codes(result)
    assert parse_early(result)["verdict"] == "ok" and "parse-early-misroute" not in codes(result)


def test_arguments_that_never_parse_are_what_it_runs_at_the_end():
    result = analyze(chat((0, "call_a", "a", '{"a": [1, 2}'), (0, None, None, "]")), CHAT)
    assert "invalid-arguments" in codes(result) and parse_early(result)["verdict"] == "ok"


def test_each_call_is_cut_on_its_own_and_the_first_ignored_fragment_is_said():
    result = analyze(
        chat(
            (0, "call_w", "get_weather", "{}"),
            (1, "call_t", "get_time", "{}"),
            (1, None, None, '{"tz": "CET"}'),
            (0, None, None, '{"city": "Paris"}'),
        ),
        CHAT,
    )
    found = warning(result, "parse-early-misroute")
    assert [c["arguments"] for c in found["would_build"]] == ["{}", "{}"]
    assert found["first_divergence_event"] == 3


def test_anthropic_input_seeded_with_an_empty_object_is_cut_too():
    start = {
        "index": 0,
        "content_block": {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}},
    }

    def delta(fragment: str) -> tuple[str, dict]:
        return "content_block_delta", {
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": fragment},
        }

    body = named_sse(
        ("message_start", {"message": {"id": "msg_1", "model": "claude", "usage": {"input_tokens": 1}}}),
        ("content_block_start", start),
        delta("{}"),
        delta('{"city": "Paris"}'),
        ("content_block_stop", {"index": 0}),
        ("message_delta", {"delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 1}}),
        ("message_stop", {}),
    )
    result = analyze(body, "anthropic-messages")
    assert warning(result, "parse-early-misroute")["would_build"][0]["arguments"] == "{}"


def test_too_many_closing_brackets_in_one_call_leave_it_unjudged():
    # Each one kept costs memory: past 4,096 a call is no longer judged (and says nothing false).
    brackets = [(0, None, None, "}") for _ in range(4100)]
    result = analyze(
        chat((0, "call_c", "c", '{"code": "'), *brackets, (0, None, None, '"}'), (0, None, None, "{}")), CHAT
    )
    assert "invalid-arguments" in codes(result) and parse_early(result)["verdict"] == "ok"
    fewer = analyze(
        chat((0, "call_c", "c", '{"code": "'), *brackets[:100], (0, None, None, '"}'), (0, None, None, "{}")),
        CHAT,
    )
    assert (
        warning(fewer, "parse-early-misroute")["would_build"][0]["arguments"]
        == '{"code": "' + "}" * 100 + '"}'
    )


def test_it_is_asked_for_like_any_rule():
    body = chat((0, "call_w", "get_weather", "{}"), (0, None, None, '{"city": "Paris"}'))
    assert list(analyze(body, CHAT, strategies=("recency",))["compatibility"]) == ["recency"]
    only = analyze(body, CHAT, strategies=("parse-early",))
    assert list(only["compatibility"]) == ["parse-early"] and "parse-early-misroute" in codes(only)


# -- the client's own evidence: its follow-up echoes what it kept ---------------------------------------------


SEEDED = chat(
    (0, "call_w", "get_weather", "{}"),
    (1, "call_t", "get_time", "{}"),
    (0, None, None, '{"city": "Paris"}'),
    (1, None, None, '{"tz": "CET"}'),
)


def follow_up(arguments: list[str]) -> bytes:
    calls = [
        {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
        for (i, n), a in zip((("call_w", "get_weather"), ("call_t", "get_time")), arguments, strict=True)
    ]
    messages = [{"role": "user", "content": "Weather and time?"}, {"role": "assistant", "tool_calls": calls}]
    messages += [{"role": "tool", "tool_call_id": c["id"], "content": "ok"} for c in calls]
    return json.dumps({"model": "m", "messages": messages}).encode()


def test_an_echo_of_the_value_the_arguments_began_with_is_named_so():
    calls = ObservedCalls()
    calls.record(analyze(SEEDED, CHAT), "flow-0")
    found = calls.check(follow_up(["{}", '{ "tz" : "CET" }{}']))
    assert [w["code"] for w in found] == ["client-misassembled", "client-misassembled"]
    kept, other = found
    assert kept["arguments_first_value"] is True and "finishes a call as soon as" in kept["message"]
    assert kept["observed"]["arguments"] == '{}{"city": "Paris"}' and kept["echoed"]["arguments"] == "{}"
    assert "arguments_first_value" not in other  # not the value they began with


def test_an_echo_of_other_arguments_is_not():
    calls = ObservedCalls()
    calls.record(analyze(SEEDED, CHAT), "flow-0")
    (wrong,) = calls.check(follow_up(['{"city": "Paris"}', '{}{"tz": "CET"}']))
    assert "arguments_first_value" not in wrong  # the second value, not the first
