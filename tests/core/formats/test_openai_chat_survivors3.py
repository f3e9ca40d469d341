"""OpenAI Chat Completions: what a mutation run found untested (the logic survivors of
``accumulator/formats/openai_chat.py``'s chunk reading and request echoes, of ``accumulator/formats/__init__.py``'s
``request_usage_asked`` and ``usage_parts`` and of ``accumulator/request.py``'s ``request_facts``, left after
test_openai_survivors.py and test_openai_survivors2.py; see docs/mutation.md). Each test was checked by applying
the mutation it guards against to the source by hand and seeing it fail."""

from __future__ import annotations

import json

import pytest
from streams import call, calls_of, choice, chunk, sse, tool_chunk, warning
from test_openai_survivors import chat_rewrite, data_lines
from test_openai_survivors2 import fn

from accumulator import analyze, analyze_message
from accumulator.formats import usage_parts

CHAT = "openai-chat"
ANTHROPIC = "anthropic-messages"


# --- ChatCompletionsDialect._choice: event numbers ---------------------------------------------------------------


@pytest.mark.parametrize(
    "delta",
    [
        {"content": "Hi"},
        {"reasoning_content": "Hm"},
        {"refusal": "No"},
        {"function_call": {"name": "legacy", "arguments": "{}"}},
    ],
    ids=["text", "reasoning", "refusal", "function-call"],
)
def test_the_first_token_is_the_event_of_the_first_text_reasoning_refusal_or_legacy_call(delta):
    # _choice 39 (text), 67 (reasoning), 83 (refusal), 100 (function_call): the event number lost
    body = sse(chunk(choice(role="assistant")), chunk(choice(**delta)), chunk(choice(0, "stop")))
    assert analyze(body, CHAT)["timing"]["first_token_event"] == 2


def test_a_legacy_function_calls_first_and_last_event_are_its_chunks():
    # _choice 100 (the event number of a function_call delta lost)
    body = sse(
        chunk(choice(role="assistant")),
        chunk(choice(function_call={"name": "legacy", "arguments": "{"})),
        chunk(choice(function_call={"arguments": "}"})),
        chunk(choice(0, "function_call")),
    )
    (found,) = analyze(body, CHAT)["choices"][0]["tool_calls"]
    assert (found["name"], found["arguments"], found["first_event"], found["last_event"]) == (
        "legacy",
        "{}",
        2,
        3,
    )


# --- ChatCompletionsDialect._choice: what a delta's keys are read as ---------------------------------------------


@pytest.mark.parametrize("delta", ["oops", ["oops"], 7], ids=["string", "list", "number"])
def test_a_delta_that_is_no_object_is_skipped_and_the_stream_goes_on(delta):
    # _choice 13 (a truthy delta that is no dict walked as one: the analysis raised)
    body = sse(
        chunk({"index": 0, "delta": delta, "finish_reason": None}),
        tool_chunk(call(0, "call_a", "lookup", "{}")),
        chunk(choice(0, "tool_calls")),
    )
    result = analyze(body, CHAT)
    assert calls_of(result) == [("call_a", "lookup", "{}")]
    assert result["warnings"] == [] and result["complete"] is True


def test_reasoning_sent_under_both_names_in_one_delta_is_read_once():
    # _choice 64, 65 (reasoning_seen never set: the same text taken from both keys)
    body = sse(chunk(choice(reasoning_content="Hm", reasoning="Hm")), chunk(choice(0, "stop")))
    assert analyze(body, CHAT)["choices"][0]["reasoning"] == "Hm"


@pytest.mark.parametrize("value", [5, {"text": "x"}, ["x"]], ids=["number", "object", "list"])
def test_reasoning_that_is_no_string_is_skipped(value):
    # _choice 60 (a reasoning value of any type read as text: the analysis raised)
    body = sse(
        chunk(choice(reasoning_content=value)),
        chunk(choice(reasoning="ok")),
        chunk(choice(0, "stop")),
    )
    result = analyze(body, CHAT)
    assert result["choices"][0]["reasoning"] == "ok" and result["warnings"] == []


def test_an_object_under_a_key_other_than_function_call_is_no_call():
    # _choice 93 (every object in a delta read as a deprecated function_call: the audio became a call)
    body = sse(
        chunk(choice(audio={"id": "audio_1", "transcript": "hi", "name": "speak"})),
        chunk(choice(0, "stop")),
    )
    result = analyze(body, CHAT)
    assert result["choices"][0]["tool_calls"] == [] and result["warnings"] == []


@pytest.mark.parametrize("reason", ["", 1, {"type": "stop"}], ids=["empty", "number", "object"])
def test_a_finish_reason_that_is_empty_or_no_string_finishes_nothing(reason):
    # _choice 120 (a finish_reason of any type taken: the choice not reported unfinished, or a number as
    # its reason)
    body = sse(tool_chunk(call(0, "call_a", "lookup", "{}")), chunk(choice(0, reason)), done=False)
    result = analyze(body, CHAT)
    assert result["choices"][0]["finish_reason"] is None
    assert warning(result, "truncated-stream")["unfinished_choices"] == [0]


# --- ChatCompletionsDialect._tool_calls: an entry that is no object ----------------------------------------------


def test_a_tool_calls_entry_that_is_no_object_is_named_by_its_event_and_its_text():
    # _tool_calls 4, 8 (no message), 5, 9 (no event), 6, 10, 14 (no data, or the data of None)
    body = sse(
        chunk(choice(role="assistant")),
        tool_chunk("junk", call(0, "call_a", "lookup", "{}")),
        chunk(choice(0, "tool_calls")),
    )
    result = analyze(body, CHAT)
    assert calls_of(result) == [("call_a", "lookup", "{}")]
    assert result["warnings"] == [
        {
            "code": "malformed-event",
            "severity": "warning",
            "message": "event 2 has a tool_calls entry that is not an object",
            "event": 2,
            "data": "'junk'",
        }
    ]


def test_a_continuation_whose_function_is_missing_names_nothing():
    # _tool_calls 30 (no function read as an empty name and arguments: last-wins then blanks the call's name)
    body = sse(
        tool_chunk(call(0, "call_a", "lookup", "{")),
        tool_chunk({"index": 0, "type": "function"}),
        tool_chunk(call(0, arguments="}")),
        chunk(choice(0, "tool_calls")),
    )
    result = analyze(body, CHAT)
    assert calls_of(result) == [("call_a", "lookup", "{}")]
    assert {name: v["verdict"] for name, v in result["compatibility"].items()} == dict.fromkeys(
        ["recency", "index-only", "id-then-index", "field-concat", "last-wins", "parse-early"], "ok"
    )


# --- rewriting: tool_entries, CallRouter.route, _name -------------------------------------------------------------


def indices(body: bytes) -> list[list]:
    """The index of every tool-call entry, per chunk (choices in order, those that are no object skipped)."""
    return [
        [
            entry["index"]
            for ch in obj["choices"]
            if type(ch) is dict and type(ch.get("delta")) is dict
            for entry in ch["delta"].get("tool_calls") or ()
        ]
        for obj in data_lines(body)
    ]


@pytest.mark.parametrize(
    ("first", "expected"),
    [
        ("junk", [0]),
        ({"index": 0, "delta": "junk"}, [0]),
        (choice(0, content="Hi"), [0]),
        (choice(0, tool_calls=[fn(3, "call_a", "alpha", "{}")]), [0, 0]),
    ],
    ids=["choice-no-object", "delta-no-object", "no-tool-calls", "calls-of-its-own"],
)
def test_reindex_reaches_every_choices_calls_in_a_chunk(first, expected):
    # tool_entries 12, 19, 26 (the chunk's later choices skipped after one that is no object, has a delta
    # that is no object or holds no tool_calls), 37 (only the last choice's entries kept)
    body = sse(
        chunk(first, choice(1, tool_calls=[fn(4, "call_b", "beta", "{}")])),
        chunk(choice(0, "tool_calls"), choice(1, "tool_calls")),
    )
    out, report = chat_rewrite(body, repair=["reindex"])
    assert indices(out)[0] == expected and report["edits"] == {"reindex": len(expected)}


def test_a_choice_without_index_is_choice_0_for_the_rewriter_too():
    # tool_entries 33 (a choice's missing index kept as None: its fragment routed to no call, left on index 3)
    body = sse(
        tool_chunk(fn(3, "call_a", "alpha", "{")),
        chunk({"delta": {"tool_calls": [call(3, arguments="}")]}}),
        chunk(choice(0, "tool_calls")),
    )
    out, report = chat_rewrite(body, repair=["reindex"])
    assert indices(out)[:2] == [[0], [0]] and report["edits"] == {"reindex": 2}
    assert calls_of(analyze(out, CHAT)) == [("call_a", "alpha", "{}")]


def test_reindex_gives_calls_without_ids_told_apart_by_their_names_their_own_index():
    # CallRouter.route 10 (no name given to the router: a call without id never opened, its index left)
    body = sse(
        tool_chunk(call(3, name="alpha", arguments="{}")),
        tool_chunk(call(5, name="beta", arguments="{}")),
        chunk(choice(0, "tool_calls")),
    )
    out, report = chat_rewrite(body, repair=["reindex"])
    assert indices(out)[:2] == [[0], [1]] and report["edits"] == {"reindex": 2}


def test_an_index_that_is_no_integer_is_no_index_to_the_rewriter_as_to_the_analysis():
    # CallRouter.route 22 (a string index used as one: reindex claimed a fragment the analysis cannot place)
    body = sse(
        tool_chunk(fn("x", "call_a", "alpha", "{")),
        tool_chunk(fn("x", "call_b", "beta", "{")),
        tool_chunk(call("x", arguments="}")),
        chunk(choice(0, "tool_calls")),
    )
    assert "orphan-delta" in [w["code"] for w in analyze(body, CHAT)["warnings"]]
    out, report = chat_rewrite(body, repair=["reindex"])
    assert indices(out)[:3] == [[0], [1], ["x"]] and report["edits"] == {"reindex": 2}


def test_split_names_passes_a_name_that_is_no_string_and_splits_the_next_calls():
    # _name 11 (a truthy name of any type taken: cutting the number 5 stopped the rewriting)
    body = sse(
        tool_chunk(fn(0, "call_a", 5, "{}")),
        tool_chunk(fn(1, "call_b", "beta", "{}")),
        chunk(choice(0, "tool_calls")),
    )
    out, report = chat_rewrite(body, inject=["split-names"])
    assert report["stopped"] is None and report["edits"] == {"split-names": 1}
    assert indices(out)[:3] == [[0], [1], [1]]


# --- request_facts, request_usage_asked: a request is read in its own format's shape ----------------------------

ANTHROPIC_MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-test",
    "content": [{"type": "tool_use", "id": "toolu_a", "name": "lookup", "input": {}}],
    "stop_reason": "tool_use",
}
CHAT_MESSAGE = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "gpt-test",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "tool_calls": [
                    {"id": "call_a", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
                ],
            },
            "finish_reason": "tool_calls",
        }
    ],
}
# Streamed, and no stream_options.include_usage: Chat's reader says no usage was asked for.
STREAMED_REQUEST = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "go"}]}


@pytest.mark.parametrize(
    ("fmt", "message", "note"),
    [
        (ANTHROPIC, ANTHROPIC_MESSAGE, "the provider sent no usage"),
        (CHAT, CHAT_MESSAGE, "the request did not ask for usage (stream_options.include_usage)"),
    ],
    ids=["anthropic", "chat"],
)
def test_why_no_usage_came_reads_the_request_in_its_own_formats_shape(fmt, message, note):
    # request_usage_asked 8, request_facts 25, 27 (every format's reader asked: Chat's stream_options blamed
    # for an Anthropic response's missing usage)
    result = analyze_message(json.dumps(message).encode(), fmt, request=json.dumps(STREAMED_REQUEST).encode())
    assert result["usage"]["notes"] == [note]


# --- usage_parts: a format it does not know ----------------------------------------------------------------------


def test_usage_parts_of_an_unknown_format_is_none():
    # usage_parts 6 (the parts of no format read: AttributeError)
    assert usage_parts("no-such-format") is None
    assert usage_parts(CHAT) is not None


def test_tool_calls_that_are_no_list_are_said_not_dropped_in_silence():
    # Portkey 1.15.2's Cohere translation sends each call as one object where the API has a list of them
    # (tests/live/test_gateways.py): before, the stream read as one with no call and no warning.
    entry = call(0, "call_a", "lookup", "{}")
    body = sse(
        chunk(choice(role="assistant")),
        chunk({"index": 0, "delta": {"tool_calls": entry}, "finish_reason": None}),
        chunk(choice(0, "tool_calls")),
    )
    result = analyze(body, CHAT)
    assert calls_of(result) == []
    said, missing = result["warnings"]
    assert said["code"] == "malformed-event" and said["severity"] == "warning" and said["event"] == 2
    assert missing["code"] == "tool-calls-missing" and missing["choice"] == 0
    assert missing["finish_reason"] == "tool_calls"
    assert said["message"] == "event 2 has tool_calls that are not a list: its calls were not read"
    assert "'call_a'" in said["data"] and "'lookup'" in said["data"]
