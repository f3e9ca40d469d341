"""Every wire format: the reference examples, interleaved and sequential calls, and each format's quirks."""

from __future__ import annotations

import json

import pytest
from streams import (
    CALL_NAMES,
    DATA,
    EXPECTED_ARGS,
    INTERLEAVED_STEPS,
    SEQUENTIAL_STEPS,
    all_calls,
    aws_frame,
    codes,
    converse_frames,
    invoke_frames,
    named_sse,
    warning,
)

from accumulator import FORMATS, StreamAccumulator, analyze, analyze_message, detect_format

# --- builders: the same steps in each format's own events --------------------------------------------


def responses_stream(steps, *, rotate_item_ids=False, drop_output_index=False, end=True) -> bytes:
    events = [("response.created", {"response": {"id": "resp_1", "model": "gpt-5", "status": "in_progress"}})]
    for n, step in enumerate(steps):
        call = step[1]
        if step[0] == "start":
            item = {"id": f"fc_{call}", "type": "function_call", "status": "in_progress", "arguments": ""}
            item |= {"call_id": f"call_{call}", "name": CALL_NAMES[call]}
            events.append(("response.output_item.added", {"output_index": call, "item": item}))
        else:
            delta = {"item_id": f"fc_{call}" + (f"_{n}" if rotate_item_ids else ""), "delta": step[2]}
            if not drop_output_index:
                delta["output_index"] = call
            events.append(("response.function_call_arguments.delta", delta))
    if end:
        usage = {"input_tokens": 9, "output_tokens": 9, "total_tokens": 18}
        response = {"id": "resp_1", "model": "gpt-5", "status": "completed", "usage": usage}
        events.append(("response.completed", {"response": response}))
    return named_sse(*events)


def anthropic_events(steps, *, end=True) -> list[dict]:
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test", "content": []}
    events = [
        {"type": "message_start", "message": {**message, "usage": {"input_tokens": 5, "output_tokens": 1}}}
    ]
    for step in steps:
        call = step[1]
        if step[0] == "start":
            block = {"type": "tool_use", "id": f"toolu_{call}", "name": CALL_NAMES[call], "input": {}}
            events.append({"type": "content_block_start", "index": call + 1, "content_block": block})
        else:
            delta = {"type": "input_json_delta", "partial_json": step[2]}
            events.append({"type": "content_block_delta", "index": call + 1, "delta": delta})
    if end:
        events.append(
            {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 40}}
        )
        events.append({"type": "message_stop"})
    return events


def anthropic_stream(steps, **kw) -> bytes:
    return named_sse(*[(e["type"], e) for e in anthropic_events(steps, **kw)])


def converse_stream(steps, *, end=True) -> bytes:
    events = [("messageStart", {"role": "assistant"})]
    for step in steps:
        call = step[1]
        if step[0] == "start":
            tool = {"toolUseId": f"tooluse_{call}", "name": CALL_NAMES[call]}
            events.append(("contentBlockStart", {"contentBlockIndex": call, "start": {"toolUse": tool}}))
        else:
            delta = {"toolUse": {"input": step[2]}}
            events.append(("contentBlockDelta", {"contentBlockIndex": call, "delta": delta}))
    if end:
        events.append(("messageStop", {"stopReason": "tool_use"}))
        events.append(("metadata", {"usage": {"inputTokens": 5, "outputTokens": 9, "totalTokens": 14}}))
    return converse_frames(*events)


def invoke_stream(steps, **kw) -> bytes:
    return invoke_frames(*anthropic_events(steps, **kw))


def cohere_stream(steps, *, end=True) -> bytes:
    events = [("message-start", {"id": "c-1", "delta": {"message": {"role": "assistant"}}})]
    for step in steps:
        call = step[1]
        if step[0] == "start":
            tool = {"id": f"{CALL_NAMES[call]}_x{call}", "type": "function"}
            tool["function"] = {"name": CALL_NAMES[call], "arguments": ""}
            events.append(("tool-call-start", {"index": call, "delta": {"message": {"tool_calls": tool}}}))
        else:
            tool = {"function": {"arguments": step[2]}}
            events.append(("tool-call-delta", {"index": call, "delta": {"message": {"tool_calls": tool}}}))
    if end:
        events.append(("message-end", {"delta": {"finish_reason": "TOOL_CALL", "usage": {"tokens": {}}}}))
    return named_sse(*events)


FRAGMENTED = {
    "openai-responses": (responses_stream, ["call_0", "call_1"]),
    "anthropic-messages": (anthropic_stream, ["toolu_0", "toolu_1"]),
    "bedrock-converse": (converse_stream, ["tooluse_0", "tooluse_1"]),
    "bedrock-invoke": (invoke_stream, ["toolu_0", "toolu_1"]),
    "cohere-v2": (cohere_stream, ["search_circulars_x0", "get_user_profile_x1"]),
}


@pytest.mark.parametrize("format", FRAGMENTED)
def test_interleaved_fragments_give_correct_calls_and_recency_misroute(format):
    build, ids = FRAGMENTED[format]
    body = build(INTERLEAVED_STEPS)
    assert detect_format(body) == format
    result = analyze(body, format)
    assert result["format"] == format and result["complete"] is True
    assert all_calls(result) == list(zip(ids, CALL_NAMES, EXPECTED_ARGS, strict=True))
    misroute = warning(result, "recency-misroute")
    assert misroute["would_build"][1]["arguments"] == '{"query": "RBI{"user_id": "u circulars"}123"}'
    assert codes(result) == ["recency-misroute"]


@pytest.mark.parametrize("format", FRAGMENTED)
def test_sequential_fragments_raise_nothing(format):
    build, ids = FRAGMENTED[format]
    result = analyze(build(SEQUENTIAL_STEPS), format)
    assert all_calls(result) == list(zip(ids, CALL_NAMES, EXPECTED_ARGS, strict=True))
    assert result["warnings"] == [] and result["complete"] is True


@pytest.mark.parametrize("format", FRAGMENTED)
def test_a_stream_without_its_end_marker_is_truncated(format):
    build, _ = FRAGMENTED[format]
    result = analyze(build(SEQUENTIAL_STEPS[:3], end=False), format)
    assert result["complete"] is False and "truncated-stream" in codes(result)


@pytest.mark.parametrize("format", FRAGMENTED)
def test_any_chunking_gives_the_same_result(format):
    build, _ = FRAGMENTED[format]
    body = build(INTERLEAVED_STEPS)
    whole = analyze(body, format)
    for size in (1, 2, 7, 64):
        accumulator = StreamAccumulator(format)
        for i in range(0, len(body), size):
            accumulator.feed(body[i : i + size])
        assert accumulator.finish() == whole


# --- the reference examples --------------------------------------------------------------------------

EXAMPLES = [
    ("openai_responses_parallel.sse", "openai-responses", "completed"),
    ("anthropic_messages_parallel.sse", "anthropic-messages", "tool_use"),
    ("gemini_parallel.sse", "gemini", "STOP"),
    ("gemini_parallel.json", "gemini", "STOP"),
    ("gemini_vertex_partialargs_parallel.sse", "gemini", "STOP"),
    ("bedrock_converse_parallel.bin", "bedrock-converse", "tool_use"),
    ("bedrock_invoke_anthropic_parallel.bin", "bedrock-invoke", "tool_use"),
    ("cohere_v2_parallel.sse", "cohere-v2", "TOOL_CALL"),
    ("ollama_chat_parallel.ndjson", "ollama-chat", "stop"),
]


@pytest.mark.parametrize("name,format,finish", EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_reference_example_reconstructs(name, format, finish):
    body = (DATA / name).read_bytes()
    assert detect_format(body) == format
    result = analyze(body, format)
    assert result["warnings"] == [] and result["complete"] is True
    names = [c[1] for c in all_calls(result)]
    assert names == ["get_weather", "get_time"]
    arguments = [json.loads(c[2]) for c in all_calls(result)]
    assert arguments == [{"city": "Paris"}, {"tz": "Europe/Paris"}]
    assert result["choices"][0]["finish_reason"] == finish
    assert result["usage"]["provider"]


def test_examples_keep_text_and_reasoning():
    anthropic = analyze((DATA / "anthropic_messages_parallel.sse").read_bytes(), "anthropic-messages")
    assert anthropic["choices"][0]["reasoning"] == "Two independent lookups; call both tools at once."
    assert anthropic["choices"][0]["text"] == "Checking both now."
    responses = analyze((DATA / "openai_responses_parallel.sse").read_bytes(), "openai-responses")
    assert responses["choices"][0]["reasoning"] == "**Planning two lookups**"
    assert responses["model"] == "gpt-5-2025-08-07" and responses["usage"]["provider"]["total_tokens"] == 155
    cohere = analyze((DATA / "cohere_v2_parallel.sse").read_bytes(), "cohere-v2")
    assert cohere["choices"][0]["reasoning"] == "I will look up the weather and the time."
    ollama = analyze((DATA / "ollama_chat_parallel.ndjson").read_bytes(), "ollama-chat")
    assert ollama["choices"][0]["reasoning"] == "User wants weather and time."
    assert ollama["usage"]["provider"]["eval_count"] == 58 and ollama["model"] == "qwen3:8b"
    gemini = analyze((DATA / "gemini_parallel.sse").read_bytes(), "gemini")
    assert gemini["choices"][0]["reasoning"].startswith("**Planning lookups**")
    assert [c[0] for c in all_calls(gemini)] == ["call_4162774", "call_4162775"]
    assert gemini["model"] == "gemini-3-flash-preview"


def test_gemini_sse_and_json_array_give_the_same_calls():
    sse = analyze((DATA / "gemini_parallel.sse").read_bytes(), "gemini")
    array = analyze((DATA / "gemini_parallel.json").read_bytes(), "gemini")
    assert all_calls(sse) == all_calls(array)


def test_every_format_has_an_example_or_a_builder():
    covered = {format for _, format, _ in EXAMPLES} | set(FRAGMENTED) | {"openai-chat"}
    assert covered == set(FORMATS)


# --- quirks ------------------------------------------------------------------------------------------


def test_responses_item_id_rotating_per_event_is_routed_by_output_index():
    # Q19: GitHub Copilot's /responses gives every event a new item_id.
    result = analyze(responses_stream(INTERLEAVED_STEPS, rotate_item_ids=True), "openai-responses")
    assert [c[2] for c in all_calls(result)] == EXPECTED_ARGS


def test_responses_without_output_index_falls_back_to_item_id():
    result = analyze(responses_stream(INTERLEAVED_STEPS, drop_output_index=True), "openai-responses")
    assert [c[2] for c in all_calls(result)] == EXPECTED_ARGS


def _responses_done(arguments: str, *, deltas: list[str]) -> bytes:
    item = {"id": "fc_9", "type": "function_call", "call_id": "call_9", "name": "weather", "arguments": ""}
    events = [("response.output_item.added", {"output_index": 0, "item": item})]
    events += [
        ("response.function_call_arguments.delta", {"item_id": "fc_9", "output_index": 0, "delta": d})
        for d in deltas
    ]
    events.append(
        (
            "response.function_call_arguments.done",
            {"item_id": "fc_9", "output_index": 0, "arguments": arguments},
        )
    )
    events.append(
        ("response.output_item.done", {"output_index": 0, "item": {**item, "arguments": arguments}})
    )
    events.append(("response.completed", {"response": {"id": "r", "status": "completed"}}))
    return named_sse(*events)


def test_responses_arguments_only_in_the_done_events_are_used_once():
    # LM Studio sends no argument deltas: only .done and output_item.done carry them.
    result = analyze(_responses_done('{"location":"SF"}', deltas=[]), "openai-responses")
    assert all_calls(result) == [("call_9", "weather", '{"location":"SF"}')]
    assert result["warnings"] == []


def test_responses_deltas_that_disagree_with_done_are_flagged():
    result = analyze(
        _responses_done('{"location":"SF"}', deltas=['{"location":', '"LA"}']), "openai-responses"
    )
    assert all_calls(result) == [("call_9", "weather", '{"location":"LA"}')]  # what the deltas built
    mismatch = warning(result, "arguments-mismatch")
    assert mismatch["final"] == '{"location":"SF"}'
    assert codes(result).count("arguments-mismatch") == 1


def test_responses_error_event_and_failed_response():
    events = [
        ("response.created", {"response": {"id": "r", "model": "m"}}),
        ("error", {"error": {"type": "insufficient_quota", "message": "quota"}}),
        ("response.failed", {"response": {"id": "r", "status": "failed", "error": {"code": "server_error"}}}),
    ]
    result = analyze(named_sse(*events), "openai-responses")
    assert result["complete"] is False and codes(result).count("provider-error") == 2
    assert result["choices"][0]["finish_reason"] == "failed"


def test_anthropic_midstream_error_example():
    result = analyze((DATA / "anthropic_messages_midstream_error.sse").read_bytes(), "anthropic-messages")
    assert result["complete"] is False
    assert "Overloaded" in warning(result, "provider-error")["message"]
    assert "truncated-stream" in codes(result) and "invalid-arguments" in codes(result)


def test_anthropic_zero_argument_call_is_valid():
    events = anthropic_events([("start", 0), ("args", 0, "")])
    result = analyze(named_sse(*[(e["type"], e) for e in events]), "anthropic-messages")
    # Anthropic's input is an object: no fragment at all means {} (Chat keeps "", a string as sent).
    assert all_calls(result) == [("toolu_0", "search_circulars", "{}")] and result["warnings"] == []


def test_anthropic_duplicate_message_start_is_ignored_but_flagged():
    events = anthropic_events(SEQUENTIAL_STEPS)
    events.insert(1, events[0])
    result = analyze(named_sse(*[(e["type"], e) for e in events]), "anthropic-messages")
    assert [c[2] for c in all_calls(result)] == EXPECTED_ARGS
    restart = warning(result, "message-restart")
    assert restart["duplicate"] is True and codes(result) == ["message-restart"]


def test_anthropic_spliced_second_message_keeps_both_calls():
    # Q20: an intermediary retried mid-generation and spliced a second message into the body.
    first = anthropic_events([("start", 0), ("args", 0, '{"query": "RB')], end=False)
    second = anthropic_events(SEQUENTIAL_STEPS[:3])
    second[0]["message"]["id"] = "msg_2"
    second[1]["content_block"]["id"] = "toolu_retry"  # the retried generation names its own call
    result = analyze(named_sse(*[(e["type"], e) for e in first + second]), "anthropic-messages")
    assert [c[2] for c in all_calls(result)] == ['{"query": "RB', EXPECTED_ARGS[0]]
    restart = warning(result, "message-restart")
    assert restart["duplicate"] is False and restart["second_id"] == "msg_2"
    assert "invalid-arguments" in codes(result)


def test_anthropic_whole_input_in_the_start_block_is_used_when_no_delta_follows():
    events = anthropic_events([("start", 0)])
    events[1]["content_block"]["input"] = {"query": "x"}
    events.insert(2, {"type": "content_block_stop", "index": 1})
    result = analyze(named_sse(*[(e["type"], e) for e in events]), "anthropic-messages")
    assert all_calls(result) == [("toolu_0", "search_circulars", '{"query":"x"}')]


def test_bedrock_exception_frame_is_a_provider_error():
    body = converse_stream(SEQUENTIAL_STEPS[:2], end=False) + aws_frame(
        {
            ":exception-type": "throttlingException",
            ":content-type": "application/json",
            ":message-type": "exception",
        },
        b'{"message":"Too many requests"}',
    )
    result = analyze(body, "bedrock-converse")
    error = warning(result, "provider-error")
    assert error["error"]["type"] == "throttlingException" and result["complete"] is False


def test_bedrock_corrupt_frame_is_malformed_and_the_stream_goes_on():
    good = converse_stream(SEQUENTIAL_STEPS)
    frames = []
    rest = good
    while rest:
        size = int.from_bytes(rest[:4], "big")
        frames.append(rest[:size])
        rest = rest[size:]
    broken = bytearray(frames[2])
    broken[-6] ^= 0xFF  # payload byte: the message CRC no longer matches
    body = b"".join(frames[:2]) + bytes(broken) + b"".join(frames[3:])
    result = analyze(body, "bedrock-converse")
    assert "malformed-event" in codes(result)
    assert [c[1] for c in all_calls(result)] == CALL_NAMES  # later frames still read


def test_gemini_parts_without_ids_are_separate_calls():
    chunk = {
        "candidates": [
            {
                "content": {
                    "parts": [
                        {"functionCall": {"name": "a", "args": {"x": 1}}},
                        {"functionCall": {"name": "a", "args": {"x": 2}}},
                    ]
                },
                "finishReason": "STOP",
            }
        ]
    }
    body = f"data: {json.dumps(chunk)}\r\n\r\n".encode()
    result = analyze(body, "gemini")
    assert all_calls(result) == [(None, "a", '{"x":1}'), (None, "a", '{"x":2}')]
    assert result["warnings"] == [] and result["complete"] is True


def test_gemini_without_finish_reason_is_truncated_and_error_chunk_is_reported():
    body = b'data: {"candidates":[{"content":{"parts":[{"text":"hi"}]}}]}\r\n\r\n'
    body += b'data: {"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}\r\n\r\n'
    result = analyze(body, "gemini")
    assert result["complete"] is False
    assert "provider-error" in codes(result) and "truncated-stream" in codes(result)


def test_gemini_json_array_cut_before_its_end():
    body = (DATA / "gemini_parallel.json").read_bytes()
    result = analyze(body[: body.rindex(b"]")], "gemini")  # no closing bracket, last chunk still has STOP
    assert result["complete"] is True and [c[1] for c in all_calls(result)] == ["get_weather", "get_time"]
    cut = analyze(body[: body.index(b"get_time")], "gemini")
    assert cut["complete"] is False and "truncated-stream" in codes(cut)


def test_gemini_partial_args_cut_mid_call_shows_what_arrived():
    body = (DATA / "gemini_vertex_partialargs_parallel.sse").read_bytes()
    result = analyze(body[: body.index(b'"stringValue":"is"')], "gemini")
    assert all_calls(result) == [(None, "get_weather", '{"city":"Par"}')]
    assert result["complete"] is False


def test_ollama_whole_calls_sharing_an_index_stay_separate():
    lines = [
        {
            "model": "llama3",
            "message": {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"index": 0, "name": "add_new_task", "arguments": {"t": 1}}}],
            },
            "done": False,
        },
        {
            "model": "llama3",
            "message": {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"index": 0, "name": "add_ideas", "arguments": {"i": 2}}}],
            },
            "done": False,
        },
        {
            "model": "llama3",
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": "stop",
        },
    ]
    body = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    result = analyze(body, "ollama-chat")
    assert all_calls(result) == [(None, "add_new_task", '{"t":1}'), (None, "add_ideas", '{"i":2}')]
    assert codes(result) == ["index-collision"]  # an index-keyed client builds add_new_taskadd_ideas


def test_ollama_error_line():
    body = b'{"model":"m","message":{"role":"assistant","content":"hi"},"done":false}\n{"error":"model crashed"}\n'
    result = analyze(body, "ollama-chat")
    assert "model crashed" in warning(result, "provider-error")["message"]
    assert result["complete"] is False


def test_cohere_error_finish():
    body = cohere_stream([])[:-1]
    body = named_sse(("message-start", {"id": "c"}), ("message-end", {"delta": {"finish_reason": "ERROR"}}))
    result = analyze(body, "cohere-v2")
    assert result["complete"] is False and "provider-error" in codes(result)


# --- non-streamed responses of each API --------------------------------------------------------------

MESSAGES = {
    "openai-responses": {
        "object": "response",
        "status": "completed",
        "model": "gpt-5",
        "output": [{"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"a":1}'}],
    },
    "anthropic-messages": {
        "type": "message",
        "model": "claude",
        "content": [
            {"type": "text", "text": "ok"},
            {"type": "tool_use", "id": "c1", "name": "f", "input": {"a": 1}},
        ],
        "stop_reason": "tool_use",
    },
    "gemini": {
        "candidates": [
            {
                "content": {"parts": [{"functionCall": {"id": "c1", "name": "f", "args": {"a": 1}}}]},
                "finishReason": "STOP",
            }
        ]
    },
    "bedrock-converse": {
        "output": {
            "message": {"content": [{"toolUse": {"toolUseId": "c1", "name": "f", "input": {"a": 1}}}]}
        },
        "stopReason": "tool_use",
    },
    "cohere-v2": {
        "id": "x",
        "finish_reason": "TOOL_CALL",
        "message": {"tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": '{"a":1}'}}]},
    },
    "ollama-chat": {
        "model": "m",
        "message": {"tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": {"a": 1}}}]},
        "done": True,
    },
}


@pytest.mark.parametrize("format", MESSAGES)
def test_non_streamed_responses(format):
    result = analyze_message(json.dumps(MESSAGES[format]).encode(), format)
    assert result["streamed"] is False and result["complete"] is True
    assert [(c[0], c[1], json.loads(c[2])) for c in all_calls(result)] == [("c1", "f", {"a": 1})]
    assert result["warnings"] == []


# --- compressed streams ------------------------------------------------------------------------------


def _compress(body: bytes, encoding: str) -> bytes:
    from mitmproxy.net.encoding import encode  # the test's encoder; the core decodes on its own

    return encode(body, encoding)


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br", "zstd"])
@pytest.mark.parametrize("format", ["anthropic-messages", "bedrock-converse"])
def test_compressed_streams_are_decoded_incrementally(format, encoding):
    build, _ = FRAGMENTED[format]
    body = build(INTERLEAVED_STEPS)
    wire = _compress(body, encoding)
    accumulator = StreamAccumulator(format, encoding=encoding)
    for i in range(0, len(wire), 3):
        accumulator.feed(wire[i : i + 3])
    result = accumulator.finish()
    plain = analyze(body, format)
    assert result == {**plain, "stats": {**plain["stats"], "bytes": len(wire)}}


def test_unknown_format_behind_compression_is_still_recognised():
    body = (DATA / "cohere_v2_parallel.sse").read_bytes()
    result = analyze(_compress(body, "gzip"), None, encoding="gzip")
    assert result["format"] == "cohere-v2" and len(all_calls(result)) == 2


def test_decompression_bomb_stops_analysis_with_a_warning():
    import zlib

    bomb = zlib.compressobj(9, zlib.DEFLATED, 31)
    wire = bomb.compress(b"data: " + b"x" * (50 * 1024 * 1024)) + bomb.flush()  # 50 MiB from ~50 KiB
    accumulator = StreamAccumulator("openai-chat", encoding="gzip", max_decoded_bytes=1024 * 1024)
    for i in range(0, len(wire), 16384):
        accumulator.feed(wire[i : i + 16384])
    result = accumulator.finish()
    assert "decoded-size-cap" in codes(result) and result["complete"] is False
    assert result["stats"]["bytes"] == len(wire)


@pytest.mark.parametrize(
    "encoding,wire,message",
    [("gzip", b"\x1f\x8b\x08\x00garbage-not-deflate", "corrupt"), ("compress", b"whatever", "unsupported")],
)
def test_undecodable_bodies_stop_analysis_with_a_warning(encoding, wire, message):
    accumulator = StreamAccumulator("openai-chat", encoding=encoding)
    accumulator.feed(wire)
    result = accumulator.finish()
    failed = warning(result, "decoding-failed")
    assert message in failed["message"] and result["complete"] is False


def test_a_whole_bedrock_converse_message_keeps_its_reasoning_text_calls_in_place_and_usage():
    message = {
        "output": {
            "message": {
                "content": [
                    {
                        "reasoningContent": {
                            "reasoningText": {"text": "Weather, then time.", "signature": "s"}
                        }
                    },
                    {"text": "Checking both."},
                    "not a block",
                    {"text": ""},
                    {"toolUse": {"toolUseId": "t1", "name": "get_weather", "input": {"city": "Paris"}}},
                    {"reasoningContent": {"redactedContent": "eA=="}},
                    {"toolUse": {"toolUseId": "t2", "name": "get_time", "input": {"tz": "CET"}}},
                ]
            }
        },
        "stopReason": "tool_use",
        "usage": {"inputTokens": 12, "outputTokens": 7, "totalTokens": 19},
    }
    result = analyze_message(json.dumps(message).encode(), "bedrock-converse")
    [choice] = result["choices"]
    assert (choice["reasoning"], choice["text"], choice["finish_reason"]) == (
        "Weather, then time.",
        "Checking both.",
        "tool_use",
    )
    assert [(c["id"], c["name"], json.loads(c["arguments"]), c["index"]) for c in choice["tool_calls"]] == [
        ("t1", "get_weather", {"city": "Paris"}, 4),
        ("t2", "get_time", {"tz": "CET"}, 6),
    ]
    assert result["usage"]["provider"] == message["usage"] and result["complete"] and result["warnings"] == []


def test_bedrock_tools_are_declared_by_tool_spec_or_system_tool_and_odd_entries_are_skipped():
    body = (DATA / "bedrock_converse_parallel.bin").read_bytes()
    spec = {"toolSpec": {"name": "get_weather", "inputSchema": {"json": {"type": "object"}}}}
    declared = {"toolConfig": {"tools": ["odd", spec, {"systemTool": {"name": "get_time"}}]}}
    result = analyze(body, "bedrock-converse", request=declared)
    assert "undeclared-tool" not in codes(result)
    missing = {"toolConfig": {"tools": [spec, "odd"]}}
    result = analyze(body, "bedrock-converse", request=missing)
    assert [w["name"] for w in result["warnings"] if w["code"] == "undeclared-tool"] == ["get_time"]


def test_a_whole_responses_response_keeps_reasoning_text_refusal_calls_in_place_usage_and_status():
    response = {
        "object": "response",
        "id": "resp_1",
        "model": "gpt-x",
        "status": "incomplete",
        "usage": {"input_tokens": 9, "output_tokens": 4, "total_tokens": 13},
        "output": [
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Plan. "}, "odd", {"text": ""}],
             "content": [{"type": "reasoning_text", "text": "Think."}]},
            "odd",
            {"type": "message", "content": [
                {"type": "output_text", "text": "Hello"}, {"type": "output_text", "text": ""},
                "odd", {"type": "refusal", "refusal": "No."}, {"type": "refusal", "refusal": ""},
                {"type": "other", "text": "x"},
            ]},
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "one", "arguments": '{"a":1}'},
            {"type": "web_search_call", "id": "ws_1"},
            {"type": "function_call", "id": "fc_2", "name": "two", "arguments": "{}"},
        ],
    }  # fmt: skip
    result = analyze_message(json.dumps(response).encode(), "openai-responses")
    [choice] = result["choices"]
    assert (choice["reasoning"], choice["text"], choice["refusal"]) == ("Plan. Think.", "Hello", "No.")
    assert [(c["id"], c["name"], c["arguments"], c["index"]) for c in choice["tool_calls"]] == [
        ("call_1", "one", '{"a":1}', 3),
        ("fc_2", "two", "{}", 5),  # no call_id: the item's id
    ]
    assert (result["model"], result["response_id"], result["usage"]["provider"]) == ("gpt-x", "resp_1", response["usage"])
    assert choice["finish_reason"] == "incomplete"
    failed = {"object": "response", "status": "failed", "error": {"code": "server_error"}, "output": []}
    result = analyze_message(json.dumps(failed).encode(), "openai-responses")
    assert [w["error"] for w in result["warnings"] if w["code"] == "provider-error"] == [
        {"code": "server_error"}
    ]


@pytest.mark.parametrize(
    "format, body",
    [
        ("openai-chat", {"error": {"message": "bad key"}}),
        ("openai-responses", {"error": {"message": "bad key"}}),
        (
            "anthropic-messages",
            {"type": "error", "error": {"type": "authentication_error", "message": "bad key"}},
        ),
    ],
)
def test_a_whole_error_message_is_a_provider_error_and_no_truncated_stream(format, body):
    result = analyze_message(json.dumps(body).encode(), format)
    assert [w["code"] for w in result["warnings"]] == ["provider-error"]
    assert "bad key" in result["warnings"][0]["message"] and result["complete"] is False


def test_a_responses_call_item_without_a_call_id_is_known_by_its_item_id():
    def event(obj):
        return b"event: " + obj["type"].encode() + b"\ndata: " + json.dumps(obj).encode() + b"\n\n"

    item = {"type": "function_call", "id": "fc_9", "name": "one", "arguments": ""}
    body = b"".join(
        event(e)
        for e in (
            {"type": "response.created", "response": {"id": "r", "model": "m"}},
            {"type": "response.output_item.added", "output_index": 0, "item": item},
            {
                "type": "response.function_call_arguments.delta",
                "output_index": 0,
                "item_id": "fc_9",
                "delta": "{}",
            },
            {"type": "response.completed", "response": {"id": "r", "status": "completed"}},
        )
    )
    [call] = analyze(body, "openai-responses")["choices"][0]["tool_calls"]
    assert (call["id"], call["name"], call["arguments"]) == ("fc_9", "one", "{}")


# A whole message of each format with everything a message holds, odd entries among them: what each
# reader keeps (a mutation run found only the one-call message of each tested).
RICH_MESSAGES = {
    "anthropic-messages": {
        "type": "message", "id": "msg_1", "model": "claude-x", "stop_reason": "tool_use",
        "usage": {"input_tokens": 5, "output_tokens": 3},
        "content": [
            {"type": "thinking", "thinking": "Plan."}, {"type": "thinking", "thinking": ""}, "odd",
            {"type": "text", "text": "Hi"}, {"type": "text", "text": ""},
            {"type": "tool_use", "id": "c1", "name": "one", "input": {"a": 1}},
            {"type": "image"},
            {"type": "tool_use", "id": "c2", "name": "two", "input": {}},
        ],
    },
    "cohere-v2": {
        "id": "co_1", "finish_reason": "TOOL_CALL", "usage": {"tokens": {"input_tokens": 5}},
        "message": {
            "tool_plan": "Plan.",
            "content": [{"type": "thinking", "text": " More."}, {"type": "text", "text": "Hi"}, "odd", {"text": ""}],
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "one", "arguments": '{"a":1}'}},
                "odd",
                {"id": "c2", "type": "function", "function": {"name": "two", "arguments": "{}"}},
            ],
        },
    },
}  # fmt: skip
RICH_EXPECTED = {
    "anthropic-messages": ("Plan.", "Hi", [("c1", "one", {"a": 1}, 5), ("c2", "two", {}, 7)], "tool_use"),
    "cohere-v2": ("Plan. More.", "Hi", [("c1", "one", {"a": 1}, 0), ("c2", "two", {}, 2)], "TOOL_CALL"),
}


@pytest.mark.parametrize("format", RICH_MESSAGES)
def test_a_whole_message_keeps_reasoning_text_calls_in_place_usage_and_finish(format):
    body = RICH_MESSAGES[format]
    result = analyze_message(json.dumps(body).encode(), format)
    [choice] = result["choices"]
    reasoning, text, calls, finish = RICH_EXPECTED[format]
    assert (choice["reasoning"], choice["text"], choice["finish_reason"]) == (reasoning, text, finish)
    assert [
        (c["id"], c["name"], json.loads(c["arguments"]), c["index"]) for c in choice["tool_calls"]
    ] == calls
    assert result["usage"]["provider"] == body["usage"] and result["response_id"] == body["id"]
    assert result["model"] == body.get("model") and result["warnings"] == []


def test_anthropic_message_start_names_the_model_id_and_usage_and_a_restart_says_which_messages():
    result = analyze(anthropic_stream(SEQUENTIAL_STEPS), "anthropic-messages")
    assert (result["model"], result["response_id"]) == ("claude-test", "msg_1")
    assert result["usage"]["provider"]["input_tokens"] == 5 and result["usage"]["provider"]["output_tokens"] == 40
    # Sent twice before any block: the same message; the warning says so and names it.
    events = anthropic_events(SEQUENTIAL_STEPS)
    events.insert(1, events[0])
    restart = warning(
        analyze(named_sse(*[(e["type"], e) for e in events]), "anthropic-messages"), "message-restart"
    )
    assert (restart["event"], restart["first_id"], restart["second_id"]) == (2, "msg_1", "msg_1")
    assert "sent twice" in restart["message"]
    # The same id again after a block: a second generation, not a duplicate.
    events = anthropic_events(SEQUENTIAL_STEPS[:2], end=False) + anthropic_events(SEQUENTIAL_STEPS[2:])
    result = analyze(named_sse(*[(e["type"], e) for e in events]), "anthropic-messages")
    restart = warning(result, "message-restart")
    assert restart["duplicate"] is False and "two generations spliced" in restart["message"]


def _cohere(event_type: str | None, obj: dict) -> bytes:
    line = f"event: {event_type}\n".encode() if event_type else b""
    return line + b"data: " + json.dumps(obj).encode() + b"\n\n"


def test_a_cohere_stream_keeps_its_id_plan_thinking_text_calls_usage_and_an_error_end():
    def message(**fields):
        return {"delta": {"message": fields}}

    call = {"id": "c1", "type": "function", "function": {"name": "one", "arguments": ""}}
    body = b"".join(
        [
            _cohere("message-start", {"type": "message-start", "id": "co_9", **message(role="assistant")}),
            _cohere("tool-plan-delta", {"type": "tool-plan-delta", **message(tool_plan="Plan.")}),
            _cohere("tool-plan-delta", {"type": "tool-plan-delta", **message(tool_plan="")}),
            _cohere("content-delta", {"type": "content-delta", "index": 0, **message(content={"thinking": " Hm."})}),
            _cohere("content-delta", {"type": "content-delta", "index": 0, **message(content={"text": "Hi"})}),
            _cohere(None, {"type": "tool-call-start", "index": 1, **message(tool_calls=call)}),  # type alone
            _cohere("tool-call-delta", {"index": 1, **message(tool_calls={"function": {"arguments": "{}"}})}),
            b"data: [DONE]\n\n",
            _cohere(
                "message-end",
                {"type": "message-end", "delta": {"finish_reason": "ERROR", "error": {"message": "over"},
                                                  "usage": {"tokens": {"output_tokens": 2}}}},
            ),
        ]
    )  # fmt: skip
    result = analyze(body, "cohere-v2")
    [choice] = result["choices"]
    assert result["response_id"] == "co_9" and result["usage"]["provider"] == {"tokens": {"output_tokens": 2}}
    assert (choice["reasoning"], choice["text"], choice["finish_reason"]) == ("Plan. Hm.", "Hi", "ERROR")
    assert [(c["id"], c["name"], c["arguments"], c["index"]) for c in choice["tool_calls"]] == [
        ("c1", "one", "{}", 1)
    ]
    (error,) = result["warnings"]  # the [DONE] its SDK tolerates says nothing
    assert error["code"] == "provider-error" and error["error"] == {
        "finish_reason": "ERROR",
        "message": "over",
    }


def test_chat_tools_are_declared_by_tools_custom_tools_and_the_legacy_functions():
    def called(*names: str) -> bytes:
        chunks = [
            {"choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": n, "id": f"c{n}", "type": "function", "function": {"name": name, "arguments": arguments}}
            ]}, "finish_reason": None}]}
            for n, (name, arguments) in enumerate(names)
        ]  # fmt: skip
        chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
        return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"

    request = {
        "tools": ["odd", {"type": "custom", "custom": {"name": "grep"}},
                  {"type": "function", "function": {"name": "fetch", "parameters": {"type": "object", "required": ["url"]}}}],
        "functions": ["odd", {"name": "legacy", "parameters": {"type": "object", "required": ["q"]}}],
    }  # fmt: skip
    body = called(("grep", "{}"), ("fetch", '{"url": "u"}'), ("legacy", "{}"), ("other", "{}"))
    result = analyze(body, "openai-chat", request=request)
    assert [w["name"] for w in result["warnings"] if w["code"] == "undeclared-tool"] == ["other"]
    # The legacy function's schema is checked too: its required "q" is missing.
    assert [w["name"] for w in result["warnings"] if w["code"] == "schema-mismatch"] == ["legacy"]
    only_functions = analyze(
        called(("legacy", '{"q": 1}')), "openai-chat", request={"functions": request["functions"]}
    )
    assert only_functions["warnings"] == []
    tools_not_a_list = analyze(
        called(("legacy", '{"q": 1}')),
        "openai-chat",
        request={"tools": "x", "functions": request["functions"]},
    )
    assert tools_not_a_list["warnings"] == []


def test_an_ollama_stream_keeps_text_calls_by_their_events_the_model_once_usage_and_errors():
    def line(obj: dict) -> bytes:
        return json.dumps(obj).encode() + b"\n"

    call = {"function": {"index": 0, "name": "one", "arguments": {"a": 1}}}
    body = b"".join(
        [
            line(
                {
                    "model": "m1",
                    "message": {"role": "assistant", "thinking": "Hm. ", "content": ""},
                    "done": False,
                }
            ),
            line({"model": "m1", "message": {"content": "Hi"}, "done": False}),
            line({"model": "m1", "message": {"tool_calls": ["odd", call]}, "done": False}),
            line({"model": "m1", "error": "model overloaded", "done": False}),
            line({"model": "m1", "message": {"content": " there"}, "done": True, "eval_count": 7}),
        ]
    )
    result = analyze(body, "ollama-chat")
    [choice] = result["choices"]
    assert (choice["reasoning"], choice["text"], choice["finish_reason"]) == ("Hm. ", "Hi there", "stop")
    [one] = choice["tool_calls"]
    assert (one["name"], json.loads(one["arguments"]), one["first_event"], one["last_event"]) == (
        "one",
        {"a": 1},
        3,
        3,
    )
    assert result["model"] == "m1" and result["usage"]["provider"] == {"eval_count": 7}
    (error,) = [w for w in result["warnings"] if w["code"] == "provider-error"]
    assert error["event"] == 4 and "model overloaded" in error["message"]
    message = analyze_message(
        line({"model": "m2", "message": {"content": "Yes"}, "done": True, "done_reason": "length"}),
        "ollama-chat",
    )
    assert (message["choices"][0]["text"], message["choices"][0]["finish_reason"], message["model"]) == (
        "Yes",
        "length",
        "m2",
    )


def test_a_bedrock_invoke_frame_whose_payload_is_not_base64_is_malformed_and_the_stream_goes_on():
    from streams import aws_frame

    good = anthropic_events(SEQUENTIAL_STEPS)
    bad = aws_frame(
        {":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"},
        json.dumps({"bytes": "not base64 at all!", "p": "x"}).encode(),
    )
    body = invoke_frames(*good[:2]) + bad + invoke_frames(*good[2:])
    result = analyze(body, "bedrock-invoke")
    assert [c[2] for c in all_calls(result)] == EXPECTED_ARGS
    (malformed,) = [w for w in result["warnings"] if w["code"] == "malformed-event"]
    assert malformed["event"] == 3 and "not base64" in malformed["message"]
    assert malformed["data"].startswith("not base64")
    # Strict: characters outside the alphabet are not skipped into a payload that happens to decode.
    import base64

    ping = base64.b64encode(b'{"type": "ping"}').decode()
    stray = aws_frame(
        {":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"},
        json.dumps({"bytes": ping[:4] + "!" + ping[4:], "p": "x"}).encode(),
    )
    result = analyze(invoke_frames(*good[:2]) + stray + invoke_frames(*good[2:]), "bedrock-invoke")
    assert [w["code"] for w in result["warnings"]] == ["malformed-event"]
