"""Token usage, normalised the same way for every format (``result.usage``, accumulator/usage.py).

Each test feeds a small stream in the format's own wire shape through the public API (``analyze`` for HTTP
streams, ``Connection`` for the WebSocket-only formats) and compares the figures with numbers worked out
by hand from docs/sessions.md's table. The provider's own object is kept as it came; counts that cannot
be trusted are left out and named in a note; a missing usage says why. Every result is checked against
the result schema.
"""

from __future__ import annotations

import json

import pytest
from schemas import check_result
from streams import choice, chunk, converse_frames, invoke_frames, named_sse, sse

from accumulator import Connection, analyze, websocket_format
from accumulator.formats import usage_parts
from accumulator.usage import FIGURES, normalised

NO_USAGE = dict.fromkeys(FIGURES)  # every figure null


def figures(result: dict) -> dict:
    """The five figures of a result, checked against the schema first."""
    check_result(result)
    return counts(result["usage"])


def counts(usage: dict) -> dict:
    """The five figures of a usage object: each a whole number (an int, never a float) or None."""
    assert all(usage[name] is None or type(usage[name]) is int for name in FIGURES), usage
    return {name: usage[name] for name in FIGURES}


def expect(input, output, cache_read=None, cache_write=None, reasoning=None) -> dict:
    """The five figures expected, in FIGURES' order."""
    return dict(zip(FIGURES, (input, output, cache_read, cache_write, reasoning), strict=True))


# -- each format's stream, with the usage where its provider puts it ----------------------------------------


def chat(usage: dict | None, *, done: bool = True) -> bytes:
    """Chat Completions: the usage in a last chunk with no choices (stream_options.include_usage)."""
    events = [chunk(choice(0, content="Hi")), chunk(choice(0, "stop"))]
    if usage is not None:
        events.append(chunk(usage=usage) | {"choices": []})
    return sse(*events, done=done)


def anthropic_events(start_usage: dict, delta_usage: dict, *, stop: dict | None = None) -> list[dict]:
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test", "content": []}
    return [
        {"type": "message_start", "message": {**message, "usage": start_usage}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": delta_usage},
        {"type": "message_stop", **(stop or {})},
    ]


def anthropic(events: list[dict]) -> bytes:
    return named_sse(*[(event["type"], event) for event in events])


def gemini_chunk(usage: dict, finish: str | None = None, text: str = "Hi") -> dict:
    candidate: dict = {"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "usageMetadata": usage, "modelVersion": "gemini-test"}


def cohere(usage: dict) -> bytes:
    return named_sse(
        ("message-start", {"id": "c-1", "delta": {"message": {"role": "assistant"}}}),
        ("content-delta", {"index": 0, "delta": {"message": {"content": {"text": "Hi"}}}}),
        ("message-end", {"delta": {"finish_reason": "COMPLETE", "usage": usage}}),
    )


def websocket(path: str, *messages: tuple[bool, dict]) -> list[dict]:
    """The results of one WebSocket connection fed these (from_client, message) pairs."""
    connection = Connection(websocket_format(path), path=path)
    results: list[dict] = []
    for from_client, obj in messages:
        results += connection.message(from_client, json.dumps(obj).encode(), True)
    return results + connection.finish()


def realtime(usage: dict) -> dict:
    done = {"id": "R1", "status": "completed", "output": [], "usage": usage}
    (result,) = websocket(
        "/v1/realtime?model=gpt-realtime",
        (False, {"type": "response.created", "event_id": "e1", "response": {"id": "R1"}}),
        (False, {"type": "response.done", "event_id": "e2", "response": done}),
    )
    return result


LIVE_PATH = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"


def gemini_live(usage: dict, *, snake: bool) -> dict:
    """One Live turn; the server's keys in the spelling asked for (the Python SDK writes snake_case)."""

    def key(camel: str, snake_name: str) -> str:
        return snake_name if snake else camel

    content, turn = key("serverContent", "server_content"), key("modelTurn", "model_turn")
    end = {
        content: {key("turnComplete", "turn_complete"): True},
        key("usageMetadata", "usage_metadata"): usage,
    }
    (result,) = websocket(
        LIVE_PATH,
        (True, {"setup": {"model": "models/gemini-live-test"}}),
        (False, {key("setupComplete", "setup_complete"): {}}),
        (True, {"clientContent": {"turns": [], "turnComplete": True}}),
        (False, {content: {turn: {"parts": [{"text": "Hi"}]}}}),
        (False, end),
    )
    return result


# -- 1. every format: the figures, worked out by hand ------------------------------------------------------


def test_openai_chat_reads_cached_and_reasoning_details_inside_the_prompt_and_completion_counts():
    usage = {
        "prompt_tokens": 1200,
        "completion_tokens": 300,
        "total_tokens": 1500,
        "prompt_tokens_details": {"cached_tokens": 1000, "cache_write_tokens": 100},
        "completion_tokens_details": {"reasoning_tokens": 120},
    }
    result = analyze(chat(usage), "openai-chat")
    # prompt_tokens already includes the cached tokens: nothing is added to it
    assert figures(result) == expect(1200, 300, cache_read=1000, cache_write=100, reasoning=120)
    assert result["usage"]["provider"] == usage and result["usage"]["notes"] == []


def test_groq_usage_in_x_groq_is_read_as_chat_usage():
    groq = {"queue_time": 0.02, "prompt_tokens": 50, "prompt_time": 0.01, "completion_tokens": 10,
            "completion_time": 0.03, "total_tokens": 60, "total_time": 0.04}  # fmt: skip
    last = chunk(choice(0, "stop"), x_groq={"id": "req_1", "usage": groq})
    result = analyze(sse(chunk(choice(0, content="Hi")), last), "openai-chat")
    assert figures(result) == expect(50, 10)
    assert result["usage"]["provider"] == groq


def test_openai_responses_reads_the_completed_responses_usage():
    usage = {
        "input_tokens": 800,
        "input_tokens_details": {"cached_tokens": 500},
        "output_tokens": 250,
        "output_tokens_details": {"reasoning_tokens": 200},
        "total_tokens": 1050,
    }
    body = named_sse(
        ("response.created", {"response": {"id": "resp_1", "model": "gpt-5", "status": "in_progress"}}),
        ("response.completed", {"response": {"id": "resp_1", "model": "gpt-5", "status": "completed", "usage": usage}}),
    )  # fmt: skip
    result = analyze(body, "openai-responses")
    assert figures(result) == expect(800, 250, cache_read=500, reasoning=200)
    assert result["usage"]["provider"] == usage


def test_openai_realtime_reads_response_done_usage_with_its_input_token_details():
    usage = {
        "total_tokens": 330,
        "input_tokens": 300,
        "output_tokens": 30,
        "input_token_details": {"cached_tokens": 128, "text_tokens": 100, "audio_tokens": 200},
        "output_token_details": {"text_tokens": 10, "audio_tokens": 20},
    }
    result = realtime(usage)
    assert figures(result) == expect(300, 30, cache_read=128)
    assert result["usage"]["provider"] == usage


def test_anthropic_adds_the_cache_counts_to_input_and_message_delta_overrides_message_start():
    start = {"input_tokens": 10, "cache_creation_input_tokens": 200, "cache_read_input_tokens": 3000,
             "output_tokens": 1}  # fmt: skip
    # message_delta's usage is cumulative: its 450 replaces the 1 of message_start, it is not added to it
    result = analyze(anthropic(anthropic_events(start, {"output_tokens": 450})), "anthropic-messages")
    # input_tokens leaves the cached tokens out: 10 + 200 written + 3000 read
    assert figures(result) == expect(3210, 450, cache_read=3000, cache_write=200)
    assert result["usage"]["provider"] == {**start, "output_tokens": 450}


def test_anthropic_a_later_cumulative_input_count_wins_too():
    start = {"input_tokens": 10, "cache_read_input_tokens": 100, "output_tokens": 1}
    delta = {"input_tokens": 12, "cache_read_input_tokens": 100, "output_tokens": 7}
    result = analyze(anthropic(anthropic_events(start, delta)), "anthropic-messages")
    assert figures(result) == expect(112, 7, cache_read=100)


def test_bedrock_converse_adds_cache_read_and_write_to_input_from_the_metadata_event():
    usage = {"inputTokens": 40, "outputTokens": 25, "totalTokens": 565, "cacheReadInputTokens": 400,
             "cacheWriteInputTokens": 100}  # fmt: skip
    body = converse_frames(
        ("messageStart", {"role": "assistant"}),
        ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hi"}}),
        ("messageStop", {"stopReason": "end_turn"}),
        ("metadata", {"usage": usage, "metrics": {"latencyMs": 300}}),
    )
    result = analyze(body, "bedrock-converse")
    assert figures(result) == expect(540, 25, cache_read=400, cache_write=100)
    assert result["usage"]["provider"] == usage


def test_bedrock_invoke_reads_the_anthropic_usage_inside_its_chunks():
    start = {"input_tokens": 20, "cache_creation_input_tokens": 5, "cache_read_input_tokens": 70,
             "output_tokens": 1}  # fmt: skip
    metrics = {
        "inputTokenCount": 20,
        "outputTokenCount": 33,
        "invocationLatency": 900,
        "firstByteLatency": 300,
    }
    events = anthropic_events(
        start, {"output_tokens": 33}, stop={"amazon-bedrock-invocationMetrics": metrics}
    )
    result = analyze(invoke_frames(*events), "bedrock-invoke")
    assert figures(result) == expect(95, 33, cache_read=70, cache_write=5)
    # Bedrock's invocation metrics ride along in the provider's object; the figures come from Anthropic's
    assert result["usage"]["provider"] == {
        **start,
        "output_tokens": 33,
        "amazon-bedrock-invocationMetrics": metrics,
    }


def test_gemini_adds_thoughts_to_output_and_the_tool_use_prompt_to_input_and_takes_the_last_chunk():
    first = {"promptTokenCount": 1000, "totalTokenCount": 1300, "thoughtsTokenCount": 300}
    last = {
        "promptTokenCount": 1000,
        "toolUsePromptTokenCount": 50,
        "candidatesTokenCount": 200,
        "thoughtsTokenCount": 300,
        "cachedContentTokenCount": 600,
        "totalTokenCount": 1550,
    }
    body = sse(gemini_chunk(first), gemini_chunk(last, "STOP", text=""), done=False)
    result = analyze(body, "gemini")
    # input 1000 + 50; output 200 candidates + 300 thoughts; the cached tokens are inside promptTokenCount
    assert figures(result) == expect(1050, 500, cache_read=600, reasoning=300)
    assert result["usage"]["provider"] == last and result["usage"]["notes"] == []


@pytest.mark.parametrize("snake", [False, True], ids=["camelCase", "snake_case"])
def test_gemini_live_reads_response_token_count_in_either_spelling(snake):
    camel = {
        "promptTokenCount": 400,
        "toolUsePromptTokenCount": 20,
        "responseTokenCount": 60,
        "thoughtsTokenCount": 40,
        "cachedContentTokenCount": 100,
        "totalTokenCount": 520,
    }
    snake_case = {
        "prompt_token_count": 400,
        "tool_use_prompt_token_count": 20,
        "response_token_count": 60,
        "thoughts_token_count": 40,
        "cached_content_token_count": 100,
        "total_token_count": 520,
    }
    usage = snake_case if snake else camel
    result = gemini_live(usage, snake=snake)
    assert figures(result) == expect(420, 100, cache_read=100, reasoning=40)
    assert result["usage"]["provider"] == usage and result["usage"]["notes"] == []


def test_cohere_prefers_the_billed_units_to_the_tokens_used():
    usage = {
        "billed_units": {"input_tokens": 20, "output_tokens": 30},
        "tokens": {"input_tokens": 250, "output_tokens": 31},
        "cached_tokens": 8,
    }
    result = analyze(cohere(usage), "cohere-v2")
    assert figures(result) == expect(20, 30, cache_read=8)
    assert result["usage"]["provider"] == usage


def test_cohere_without_billed_units_falls_back_to_the_tokens_used():
    usage = {"tokens": {"input_tokens": 250, "output_tokens": 31}}
    result = analyze(cohere(usage), "cohere-v2")
    assert figures(result) == expect(250, 31)
    assert result["usage"]["provider"] == usage


def test_ollama_reads_prompt_eval_count_and_eval_count_from_the_final_line():
    counts = {"total_duration": 1823456789, "load_duration": 21345678, "prompt_eval_count": 152,
              "prompt_eval_duration": 101234567, "eval_count": 58, "eval_duration": 1654321098}  # fmt: skip
    head = {"model": "qwen3:8b", "created_at": "2026-01-01T00:00:00Z"}
    lines = [
        {**head, "message": {"role": "assistant", "content": "Hi"}, "done": False},
        {
            **head,
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": "stop",
            **counts,
        },
    ]
    result = analyze(b"".join(json.dumps(line).encode() + b"\n" for line in lines), "ollama-chat")
    assert figures(result) == expect(152, 58)
    # the provider's object is the final line's counts, not the whole line
    assert result["usage"]["provider"] == counts


# -- 2. counts that cannot be trusted: left out, named in a note; the others kept ---------------------------

GOOD = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}


def chat_usage(**changes) -> dict:
    """The result's usage for a Chat stream whose usage is GOOD with these fields changed (None: removed)."""
    usage = {**GOOD, **changes}
    result = analyze(chat(usage), "openai-chat")
    figures(result)  # the schema holds whatever the provider sent
    assert result["usage"]["provider"] == usage
    return result["usage"]


@pytest.mark.parametrize(
    ("field", "value", "shown"),
    [
        ("prompt_tokens", "100", "'100'"),
        ("prompt_tokens", -5, "-5"),
        ("prompt_tokens", True, "True"),
        ("prompt_tokens", 99.5, "99.5"),  # a float, but not a whole number
        ("completion_tokens", "20", "'20'"),
        ("completion_tokens", -1, "-1"),
        ("completion_tokens", False, "False"),
    ],
)
def test_a_field_that_is_no_whole_count_is_left_out_and_named_and_the_other_figure_kept(field, value, shown):
    usage = chat_usage(**{field: value})
    assert counts(usage) == (expect(None, 20) if field == "prompt_tokens" else expect(100, None))
    assert usage["notes"] == [f"{field} is {shown}, not a count: left out"]


def test_a_nested_detail_that_is_no_count_is_named_by_its_path():
    usage = chat_usage(prompt_tokens_details={"cached_tokens": "5"})
    assert counts(usage) == expect(100, 20)
    assert usage["notes"] == ["prompt_tokens_details.cached_tokens is '5', not a count: left out"]


def test_a_null_count_is_absent_and_the_note_says_there_is_none():
    usage = chat_usage(completion_tokens=None)
    assert counts(usage) == expect(100, None)
    assert usage["notes"] == ["no output count in the provider's usage"]


def test_an_integral_float_is_a_count():
    usage = chat_usage(prompt_tokens=100.0, completion_tokens=20.0)  # a gateway that wrote 100.0
    assert counts(usage) == expect(100, 20) and usage["notes"] == []


def test_an_output_larger_than_the_total_is_left_out():
    usage = chat_usage(completion_tokens=130)  # total 120
    assert counts(usage) == expect(100, None)
    assert usage["notes"] == ["output (130) is larger than the provider's total (120): left out"]


def test_an_input_larger_than_the_total_is_left_out():
    usage = chat_usage(prompt_tokens=121)
    assert counts(usage) == expect(None, 20)
    assert usage["notes"] == ["input (121) is larger than the provider's total (120): left out"]


def test_a_total_that_is_no_count_is_named_and_compares_nothing():
    usage = chat_usage(total_tokens="lots")
    assert counts(usage) == expect(100, 20)
    assert usage["notes"] == ["total_tokens is 'lots', not a count: left out"]


def test_cached_tokens_beyond_the_input_drop_both_cache_figures():
    usage = chat_usage(prompt_tokens_details={"cached_tokens": 90, "cache_write_tokens": 20})  # 110 > 100
    assert counts(usage) == expect(100, 20)  # both cache figures out, input and output kept
    assert usage["notes"] == ["cached tokens (110) exceed the input (100): the cache counts are left out"]


def test_cached_tokens_equal_to_the_input_are_kept():
    usage = chat_usage(prompt_tokens_details={"cached_tokens": 80, "cache_write_tokens": 20})
    assert counts(usage) == expect(100, 20, cache_read=80, cache_write=20) and usage["notes"] == []


def test_reasoning_beyond_the_output_is_left_out():
    usage = chat_usage(completion_tokens_details={"reasoning_tokens": 21})
    assert counts(usage) == expect(100, 20)
    assert usage["notes"] == ["reasoning (21) exceeds the output (20): left out"]


def test_reasoning_equal_to_the_output_is_kept():
    usage = chat_usage(completion_tokens_details={"reasoning_tokens": 20})
    assert counts(usage) == expect(100, 20, reasoning=20) and usage["notes"] == []


def test_one_bad_part_of_a_sum_leaves_out_the_whole_figure():
    # Anthropic's input is a sum: a negative cache count cannot give a trustworthy input either
    start = {"input_tokens": 10, "cache_read_input_tokens": -3, "output_tokens": 1}
    result = analyze(anthropic(anthropic_events(start, {"output_tokens": 9})), "anthropic-messages")
    assert figures(result) == expect(None, 9)
    assert "cache_read_input_tokens is -3, not a count: left out" in result["usage"]["notes"]


def test_normalised_with_a_formats_own_parts_reads_the_same_way():
    # build_result calls normalised() with the format's usage_parts: a bad part is named there too
    raw = {"promptTokenCount": 10, "responseTokenCount": -2, "totalTokenCount": 30}
    usage = normalised(usage_parts("gemini-live"), raw)
    assert counts(usage) == expect(10, None)
    assert usage["provider"] == raw
    assert usage["notes"] == ["responseTokenCount is -2, not a count: left out"]


# -- 3. no usage, and usage from a stream cut short -------------------------------------------------------


def test_a_stream_cut_before_its_usage_says_so():
    result = analyze(sse(chunk(choice(0, content="Hi")), done=False), "openai-chat")
    assert not result["complete"]
    assert figures(result) == NO_USAGE
    assert result["usage"]["provider"] is None
    assert result["usage"]["notes"] == ["the stream ended before its usage arrived"]


STREAMED_CHAT = {"model": "gpt-test", "stream": True, "messages": [{"role": "user", "content": "hi"}]}


def test_a_streamed_chat_request_that_did_not_ask_for_usage_is_the_reason_none_came():
    result = analyze(chat(None), "openai-chat", request=json.dumps(STREAMED_CHAT).encode())
    assert result["complete"] and figures(result) == NO_USAGE
    assert result["usage"]["notes"] == ["the request did not ask for usage (stream_options.include_usage)"]


def test_a_request_that_asked_for_usage_and_got_none_blames_the_provider():
    request = {**STREAMED_CHAT, "stream_options": {"include_usage": True}}
    result = analyze(chat(None), "openai-chat", request=json.dumps(request).encode())
    assert result["complete"] and figures(result) == NO_USAGE
    assert result["usage"]["notes"] == ["the provider sent no usage"]


def test_a_provider_error_without_usage_says_so():
    error = {"message": "overloaded", "type": "server_error"}
    result = analyze(sse(chunk(choice(0, content="Hi")), {"error": error}), "openai-chat")
    assert figures(result) == NO_USAGE
    assert result["usage"]["notes"] == ["the provider sent an error and no usage"]


def test_a_cut_stream_that_had_usage_keeps_it_and_says_it_may_be_partial():
    start = {"input_tokens": 10, "cache_read_input_tokens": 90, "output_tokens": 1}
    # cut mid-text: only message_start's usage came (its output count is the first token's)
    events = anthropic_events(start, {"output_tokens": 12})[:3]
    result = analyze(anthropic(events), "anthropic-messages")
    assert not result["complete"]
    assert figures(result) == expect(100, 1, cache_read=90)
    assert result["usage"]["notes"] == [
        "the stream did not complete: the counts are the last the provider sent, maybe partial"
    ]


def test_a_gemini_stream_cut_before_its_finish_keeps_the_last_cumulative_usage():
    usage = {"promptTokenCount": 30, "candidatesTokenCount": 4, "totalTokenCount": 34}
    result = analyze(sse(gemini_chunk(usage), done=False), "gemini")  # no finishReason
    assert not result["complete"]
    assert figures(result) == expect(30, 4)
    assert result["usage"]["notes"][-1].startswith("the stream did not complete")
