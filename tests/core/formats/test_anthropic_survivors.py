"""Anthropic Messages: what a mutation run found untested (the logic survivors of
``accumulator/formats/anthropic.py``; see docs/mutation.md). Each test was checked by applying the mutation
it guards against to the source by hand and seeing it fail."""

from __future__ import annotations

import json

from streams import warning

from accumulator import analyze, analyze_message

FORMAT = "anthropic-messages"
START = {"type": "message_start", "message": {"id": "msg_1", "model": "claude-test", "content": []}}
STOP = {"type": "message_stop"}


def stream(*events: dict) -> bytes:
    """SSE with ``event:`` lines, one per event, named by its ``type``."""
    return b"".join(f"event: {e.get('type')}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def tool_start(index: int, call_id: str, name: str = "lookup", **block) -> dict:
    content_block = {"type": "tool_use", "id": call_id, "name": name, **block}
    return {"type": "content_block_start", "index": index, "content_block": content_block}


def json_delta(index: int, fragment: str) -> dict:
    return {
        "type": "content_block_delta",
        "index": index,
        "delta": {"type": "input_json_delta", "partial_json": fragment},
    }


def block_start(index: int, **block) -> dict:
    return {"type": "content_block_start", "index": index, "content_block": block}


def text_delta(index: int, kind: str, field: str, text) -> dict:
    return {"type": "content_block_delta", "index": index, "delta": {"type": kind, field: text}}


def stop(index: int) -> dict:
    return {"type": "content_block_stop", "index": index}


def calls(result: dict) -> list[tuple]:
    return [(c["id"], c["name"], c["arguments"]) for c in result["choices"][0]["tool_calls"]]


# --- event numbers: what the result says about where things happened ----------------------------------------


def test_a_malformed_event_is_reported_with_its_event_number():
    body = stream(START) + b"event: ping\ndata: {not json\n\n" + stream(STOP)
    assert warning(analyze(body, FORMAT), "malformed-event")["event"] == 2


def test_a_calls_first_and_last_event_are_its_start_and_its_last_delta():
    body = stream(
        START, tool_start(0, "toolu_a"), json_delta(0, '{"q": '), json_delta(0, '"x"}'), stop(0), STOP
    )
    result = analyze(body, FORMAT)
    (call,) = result["choices"][0]["tool_calls"]
    assert (call["first_event"], call["last_event"]) == (2, 4)
    assert result["timing"]["first_token_event"] == 2


def test_a_start_blocks_whole_input_is_applied_at_the_blocks_stop_event():
    body = stream(START, tool_start(0, "toolu_a", input={"q": "x"}), stop(0), STOP)
    (call,) = analyze(body, FORMAT)["choices"][0]["tool_calls"]
    assert (call["first_event"], call["last_event"]) == (2, 3)


def test_a_provider_error_in_a_stream_names_its_event_and_keeps_the_inner_error_object():
    inner = {"type": "overloaded_error", "message": "Overloaded"}
    result = analyze(stream(START, {"type": "error", "error": inner}), FORMAT)
    found = warning(result, "provider-error")
    assert found["event"] == 2 and found["error"] == inner


# --- a start block's own input ----------------------------------------------------------------------------


def test_a_start_input_is_only_a_fallback_once_deltas_arrive_for_its_block():
    # A gateway puts the whole input in the start AND streams it: the deltas win, nothing is appended at stop.
    body = stream(
        START,
        tool_start(0, "toolu_a", input={"q": "x"}),
        json_delta(0, '{"q": '),
        json_delta(0, '"x"}'),
        stop(0),
        STOP,
    )
    result = analyze(body, FORMAT)
    assert calls(result) == [("toolu_a", "lookup", '{"q": "x"}')] and result["warnings"] == []


def test_whole_start_inputs_of_two_calls_each_go_to_their_own_call():
    body = stream(
        START,
        tool_start(0, "toolu_a", name="one", input={"a": 1}),
        tool_start(1, "toolu_b", name="two", input={"b": 2}),
        stop(0),
        stop(1),
        STOP,
    )
    assert calls(analyze(body, FORMAT)) == [("toolu_a", "one", '{"a":1}'), ("toolu_b", "two", '{"b":2}')]


def test_a_tool_start_without_input_or_with_a_non_object_input_is_no_seed():
    body = stream(
        START,
        tool_start(0, "toolu_a"),  # no input key at all
        json_delta(0, "{}"),
        stop(0),
        tool_start(1, "toolu_b", input="not an object"),
        stop(1),
        STOP,
    )
    result = analyze(body, FORMAT)
    assert calls(result) == [("toolu_a", "lookup", "{}"), ("toolu_b", "lookup", "{}")]


# --- text, thinking and redacted thinking ---------------------------------------------------------------


def test_text_in_a_text_blocks_start_is_kept_and_is_the_first_token():
    body = stream(
        START, block_start(0, type="text", text="Hi"), text_delta(0, "text_delta", "text", " there"), STOP
    )
    result = analyze(body, FORMAT)
    assert [(c["index"], c["text"], c["reasoning"]) for c in result["choices"]] == [(0, "Hi there", None)]
    assert result["timing"]["first_token_event"] == 2


def test_thinking_in_a_thinking_blocks_start_is_kept_as_reasoning_and_is_the_first_token():
    body = stream(
        START,
        block_start(0, type="thinking", thinking="Hm"),
        text_delta(0, "thinking_delta", "thinking", " ok"),
        STOP,
    )
    result = analyze(body, FORMAT)
    assert [(c["index"], c["text"], c["reasoning"]) for c in result["choices"]] == [(0, None, "Hm ok")]
    assert result["timing"]["first_token_event"] == 2


def test_a_redacted_thinking_block_is_reasoning_said_as_redacted():
    body = stream(START, block_start(0, type="redacted_thinking", data="Enc..."), STOP)
    result = analyze(body, FORMAT)
    assert [(c["index"], c["text"], c["reasoning"]) for c in result["choices"]] == [
        (0, None, "[redacted thinking]")
    ]
    assert result["timing"]["first_token_event"] == 2


def test_empty_text_and_thinking_are_no_first_token_and_a_text_delta_is():
    # The usual start blocks carry "" (text) and "" (thinking); an empty delta adds nothing either.
    body = stream(
        START,
        block_start(0, type="thinking", thinking=""),
        text_delta(0, "thinking_delta", "thinking", ""),
        block_start(1, type="text", text=""),
        text_delta(1, "text_delta", "text", "Hi"),
        STOP,
    )
    result = analyze(body, FORMAT)
    assert result["timing"]["first_token_event"] == 5
    assert [(c["text"], c["reasoning"]) for c in result["choices"]] == [("Hi", None)]


def test_a_text_delta_whose_text_is_not_a_string_is_ignored():
    body = stream(
        START, text_delta(0, "text_delta", "text", 42), text_delta(0, "text_delta", "text", "Hi"), STOP
    )
    result = analyze(body, FORMAT)
    assert result["choices"][0]["text"] == "Hi" and result["timing"]["first_token_event"] == 3


def test_an_unknown_block_with_a_text_or_thinking_field_adds_no_text():
    body = stream(
        START,
        block_start(0, type="citation_holder", text="not said", thinking="not thought"),
        block_start(1, type="text"),  # no text field at all
        block_start(2, type="thinking"),  # no thinking field at all
        STOP,
    )
    result = analyze(body, FORMAT)
    assert result["choices"] == [] and result["timing"]["first_token_event"] is None


# --- a second message_start -------------------------------------------------------------------------------


def test_the_same_message_started_again_after_a_block_start_is_a_splice_not_a_duplicate():
    # Only a content_block_start came between: that is already content, so the second start is a new generation.
    body = stream(START, tool_start(0, "toolu_a"), START, tool_start(0, "toolu_b"), json_delta(0, "{}"), STOP)
    restart = warning(analyze(body, FORMAT), "message-restart")
    assert restart["duplicate"] is False


# --- usage ------------------------------------------------------------------------------------------------


def test_message_starts_usage_stands_when_no_message_delta_follows():
    start = {**START, "message": {**START["message"], "usage": {"input_tokens": 7, "output_tokens": 1}}}
    result = analyze(stream(start, block_start(0, type="text", text="Hi")), FORMAT)
    assert result["usage"]["provider"] == {"input_tokens": 7, "output_tokens": 1}


def test_bedrock_invocation_metrics_on_message_stop_join_the_usage_and_only_when_present():
    start = {**START, "message": {**START["message"], "usage": {"input_tokens": 7, "output_tokens": 1}}}
    metrics = {"inputTokenCount": 7, "outputTokenCount": 3}
    delta = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}}
    with_metrics = analyze(
        stream(start, delta, {**STOP, "amazon-bedrock-invocationMetrics": metrics}), FORMAT
    )
    assert with_metrics["usage"]["provider"] == {
        "input_tokens": 7,
        "output_tokens": 3,
        "amazon-bedrock-invocationMetrics": metrics,
    }
    plain = analyze(stream(start, delta, STOP), FORMAT)
    assert plain["usage"]["provider"] == {"input_tokens": 7, "output_tokens": 3}
    assert plain["complete"] is True and plain["warnings"] == []


def test_message_stop_ends_the_stream():
    body = stream(START, block_start(0, type="text", text="Hi"), stop(0))
    assert analyze(body, FORMAT)["complete"] is False
    assert analyze(body + stream(STOP), FORMAT)["complete"] is True


# --- whole (non-streamed) messages ------------------------------------------------------------------------


def test_a_whole_message_that_is_not_json_is_reported_as_event_1():
    assert warning(analyze_message(b"{not json", FORMAT), "malformed-event")["event"] == 1


def test_a_whole_error_message_names_event_1_and_keeps_the_inner_error_object():
    inner = {"type": "overloaded_error", "message": "Overloaded"}
    result = analyze_message(json.dumps({"type": "error", "error": inner}).encode(), FORMAT)
    found = warning(result, "provider-error")
    assert found["event"] == 1 and found["error"] == inner


def test_a_whole_messages_call_is_at_event_1_beside_its_text_and_thinking():
    message = {
        "id": "msg_1",
        "type": "message",
        "model": "claude-test",
        "content": [
            {"type": "thinking", "thinking": "Hm"},
            {"type": "text", "text": "Hi"},
            {"type": "tool_use", "id": "toolu_a", "name": "lookup", "input": {"q": "x"}},
        ],
    }
    result = analyze_message(json.dumps(message).encode(), FORMAT)
    (call,) = result["choices"][0]["tool_calls"]
    assert (call["first_event"], call["last_event"]) == (1, 1)
    assert (result["choices"][0]["text"], result["choices"][0]["reasoning"]) == ("Hi", "Hm")


def test_a_whole_messages_empty_or_fieldless_text_and_thinking_blocks_add_nothing():
    message = {
        "id": "msg_1",
        "type": "message",
        "content": [
            {"type": "thinking", "thinking": ""},
            {"type": "thinking", "signature": "sig"},
            {"type": "text", "text": ""},
            {"type": "text"},
            {"type": "citation_holder", "text": "not said", "thinking": "not thought"},
        ],
    }
    assert analyze_message(json.dumps(message).encode(), FORMAT)["choices"] == []


def test_a_delta_of_another_block_leaves_a_kept_start_input_alone():
    # Call a came whole in its start; call b streams while a's block is still open.
    body = stream(
        START,
        tool_start(0, "toolu_a", name="one", input={"a": 1}),
        tool_start(1, "toolu_b", name="two"),
        json_delta(1, "{}"),
        stop(0),
        stop(1),
        STOP,
    )
    assert calls(analyze(body, FORMAT)) == [("toolu_a", "one", '{"a":1}'), ("toolu_b", "two", "{}")]
