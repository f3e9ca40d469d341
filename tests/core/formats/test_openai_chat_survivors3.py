"""OpenAI Chat Completions: what a mutation run found untested (the logic survivors of
``accumulator/formats/openai_chat.py``'s chunk reading and request echoes, of ``accumulator/formats/__init__.py``'s
``request_usage_asked`` and ``usage_parts`` and of ``accumulator/request.py``'s ``request_facts``, left after
test_openai_survivors.py and test_openai_survivors2.py; see docs/mutation.md). Each test was checked by applying
the mutation it guards against to the source by hand and seeing it fail."""

from __future__ import annotations

import json

import pytest
from streams import call, calls_of, choice, chunk, sse, tool_chunk, warning

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
        ["recency", "index-only", "id-then-index", "field-concat", "last-wins"], "ok"
    )


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
