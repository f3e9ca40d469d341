"""A response that says it ended for its tool calls (Chat's finish_reason `tool_calls`, Anthropic's and
Bedrock's stop_reason `tool_use`, Cohere's `TOOL_CALL`) with no call read: `tool-calls-missing`. Before,
such a response read as one that called nothing, with no warning (Portkey's Cohere translation sends its
calls in a shape no Chat client reads, then `finish_reason: tool_calls`: tests/live/test_gateways.py)."""

from __future__ import annotations

import json

import pytest
from streams import call, choice, chunk, codes, converse_frames, named_sse, sse, tool_chunk, warning

from accumulator import analyze, analyze_message

TEXT = chunk(choice(role="assistant", content="Let me look that up."))


def test_a_chat_stream_that_ends_for_tool_calls_with_none_is_said():
    result = analyze(sse(TEXT, chunk(choice(0, "tool_calls"))), "openai-chat")
    said = warning(result, "tool-calls-missing")
    assert said["severity"] == "warning" and (said["choice"], said["finish_reason"]) == (0, "tool_calls")
    assert said["message"] == (
        "choice 0 ended for its tool calls (finish reason 'tool_calls') but carried no call that could be read"
    )


def test_each_choice_is_judged_on_its_own_and_the_deprecated_function_call_too():
    body = sse(
        tool_chunk(call(0, "call_a", "lookup", "{}")),
        chunk(choice(0, "tool_calls"), choice(1, "function_call")),
    )
    result = analyze(body, "openai-chat")
    (said,) = [w for w in result["warnings"] if w["code"] == "tool-calls-missing"]
    assert (said["choice"], said["finish_reason"]) == (1, "function_call")


@pytest.mark.parametrize("reason", ["stop", "length", None])
def test_a_chat_stream_that_ends_otherwise_or_carries_its_calls_is_not(reason):
    assert "tool-calls-missing" not in codes(analyze(sse(TEXT, chunk(choice(0, reason))), "openai-chat"))
    body = sse(tool_chunk(call(0, "call_a", "lookup", "{}")), chunk(choice(0, "tool_calls")))
    assert "tool-calls-missing" not in codes(analyze(body, "openai-chat"))


def test_calls_over_the_cap_are_the_cap_s_to_say():
    body = sse(tool_chunk(call(0, "call_a", "lookup", "{}")), chunk(choice(0, "tool_calls")))
    result = analyze(body, "openai-chat", max_calls=0)
    assert "calls-cap" in codes(result) and "tool-calls-missing" not in codes(result)


def test_a_whole_chat_message_that_ends_for_tool_calls_with_none_is_said():
    message = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": "tool_calls"}
        ],
    }
    assert "tool-calls-missing" in codes(analyze_message(json.dumps(message).encode(), "openai-chat"))


def test_anthropic_ending_for_tool_use_with_no_tool_use_block_is_said():
    body = named_sse(
        ("message_start", {"message": {"id": "msg_1", "model": "m", "content": [], "usage": {}}}),
        ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "Looking."}}),
        ("content_block_stop", {"index": 0}),
        ("message_delta", {"delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 3}}),
        ("message_stop", {}),
    )
    said = warning(analyze(body, "anthropic-messages"), "tool-calls-missing")
    assert said["finish_reason"] == "tool_use"


def test_bedrock_converse_ending_for_tool_use_with_none_is_said():
    body = converse_frames(
        ("messageStart", {"role": "assistant"}),
        ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Looking."}}),
        ("contentBlockStop", {"contentBlockIndex": 0}),
        ("messageStop", {"stopReason": "tool_use"}),
    )
    assert warning(analyze(body, "bedrock-converse"), "tool-calls-missing")["finish_reason"] == "tool_use"


def test_cohere_ending_for_tool_call_with_none_is_said():
    body = named_sse(
        ("message-start", {"id": "c1", "delta": {"message": {"role": "assistant"}}}),
        ("message-end", {"delta": {"finish_reason": "TOOL_CALL", "usage": {}}}),
    )
    assert warning(analyze(body, "cohere-v2"), "tool-calls-missing")["finish_reason"] == "TOOL_CALL"


def test_formats_whose_end_does_not_say_so_are_not_judged():
    # Gemini ends a response with calls as one without (finishReason STOP).
    gemini = b'data: {"candidates":[{"content":{"parts":[{"text":"Hi"}],"role":"model"},"finishReason":"STOP"}]}\r\n\r\n'
    assert "tool-calls-missing" not in codes(analyze(gemini, "gemini"))
