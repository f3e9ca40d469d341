"""Bedrock, the formats' shared base and the core's small modules: what a mutation run found untested (the
logic survivors of ``accumulator/formats/bedrock_converse.py``, ``bedrock_invoke.py``, ``base.py``, the
registry in ``formats/__init__.py``, ``exchange.py``, ``request.py``, ``timing.py`` and ``limits.py``; see
docs/mutation.md). Each test was checked by applying the mutation it guards against to the source by hand
and seeing it fail."""

from __future__ import annotations

import base64
import json

import pytest
from streams import DATA, aws_frame, codes, converse_frames, invoke_frames, warning

from accumulator import (
    Limits,
    StreamAccumulator,
    analyze,
    analyze_message,
    classify,
    formats,
    websocket_format,
)
from accumulator.echo import extract_echoes
from accumulator.exchange import HTTP_ERROR, STREAM
from accumulator.formats import WireFormat
from accumulator.formats.base import JsonDialect
from accumulator.request import request_facts

PRODUCTION = (DATA / "production_interleaved.sse").read_bytes()  # Chat: search_circulars, get_user_profile
CHAT_PATH = "/v1/chat/completions"


def event_headers(event_type: str = "chunk", message_type: str = "event") -> dict:
    return {":event-type": event_type, ":content-type": "application/json", ":message-type": message_type}


def calls(result: dict) -> list[tuple]:
    return [
        (c["id"], c["name"], c["arguments"], c["index"], c["first_event"], c["last_event"])
        for c in result["choices"][0]["tool_calls"]
    ]


def texts(result: dict) -> list[tuple]:
    return [(c["text"], c["reasoning"], c["finish_reason"]) for c in result["choices"]]


TOOL_START = (
    "contentBlockStart",
    {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "t1", "name": "f"}}},
)
TOOL_DELTA = ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"toolUse": {"input": '{"a":1}'}}})
MESSAGE_START = ("messageStart", {"role": "assistant"})
MESSAGE_STOP = ("messageStop", {"stopReason": "end_turn"})


# --- exchange.classify: a request body given as text that never says "stream" ---------------------------
# _asked_to_stream mutant 9 (a str without "stream" counted as asking for a stream).


def test_a_text_request_without_stream_asks_for_no_stream():
    request = '{"model": "m", "messages": []}'
    error = classify(path=CHAT_PATH, status=500, request=request)
    assert (error.kind, error.stream_asked) == (HTTP_ERROR, False)
    assert classify(path=CHAT_PATH, status=200, request=request) is None  # unlabelled, not asked: not ours
    asked = classify(path=CHAT_PATH, status=200, request='{"model": "m", "stream": true}')
    assert (asked.kind, asked.format) == (STREAM, "openai-chat")


# --- formats.websocket_format: the upgrade path's query and trailing slash -------------------------------
# websocket_format mutants 2 (rstrip(None)), 3 (lstrip) and 8 (rsplit on "?").


@pytest.mark.parametrize("path", ["/v1/realtime/", "/v1/realtime?model=gpt?x=1", "/v1/realtime/?model=x"])
def test_a_websocket_path_is_read_without_its_query_and_trailing_slash(path):
    assert websocket_format(path) == "openai-realtime"


# --- request reading bound to the format named -----------------------------------------------------------
# _readers mutant 2, request_tools 2, request_parallel 8, request_forced 4, request_echoes 1 and
# request.request_facts 13, 15, 17, 19, 21 (the format dropped: every shape read).

OTHER_SHAPES = {
    # Bedrock Converse's tools and forced tool, Anthropic's forced tool and parallel switch: none is Chat's.
    "toolConfig": {"tools": [{"toolSpec": {"name": "other"}}], "toolChoice": {"tool": {"name": "other"}}},
    "tool_choice": {"type": "tool", "name": "other", "disable_parallel_tool_use": True},
    "messages": [
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t9", "name": "other", "input": {}}}]}
    ],
}


def test_a_request_is_read_in_the_shape_of_the_format_named_only():
    assert request_facts(OTHER_SHAPES, "openai-chat") == request_facts({}, "openai-chat")
    assert request_facts(OTHER_SHAPES).tools == {"other": None}  # read in every shape, it declares
    result = analyze(PRODUCTION, "openai-chat", request=OTHER_SHAPES)
    assert codes(result) == ["recency-misroute"]  # no undeclared tool, no parallel or forced complaint
    assert extract_echoes(OTHER_SHAPES, "openai-chat") == ([], [])
    assert [c.id for c in extract_echoes(OTHER_SHAPES, "bedrock-converse")[0]] == ["t9"]


# request_facts mutant 11 (usage_asked left out): a streamed Chat request without include_usage.


def test_a_streamed_chat_request_without_include_usage_explains_the_missing_usage():
    request = {"model": "m", "stream": True, "messages": []}
    assert request_facts(request, "openai-chat").usage_asked is False
    result = analyze(PRODUCTION, "openai-chat", request=request)
    assert result["usage"]["notes"] == ["the request did not ask for usage (stream_options.include_usage)"]


# --- base.WireFormat: a format module's own mistakes are refused when it is built -------------------------
# WireFormat.__post_init__ mutants 1 (unknown = None), 3 (or -> and), 6 (websocket is not None), 7 (message).


def test_a_format_with_an_unknown_framing_or_with_no_way_to_travel_is_refused():
    with pytest.raises(ValueError, match="bogus"):
        WireFormat(name="x", dialect=JsonDialect, framings=("sse", "bogus"))
    with pytest.raises(ValueError, match="framings"):
        WireFormat(name="x", dialect=JsonDialect, framings=())
    assert WireFormat(name="x", dialect=JsonDialect, framings=("ndjson",)).over_http


# --- base.framings_allowed: a byte-order mark or blank lines before the first byte ------------------------
# framings_allowed mutants 7 (lstrip(None): a BOM kept) and 8 (rstrip: leading blanks kept).

OLLAMA_LINE = b'{"model":"m","created_at":"t","message":{"role":"assistant","content":"Hi"},"done":true}\n'


@pytest.mark.parametrize("lead", [b"\xef\xbb\xbf", b"\r\n \t", b"\xef\xbb\xbf\n"])
def test_a_body_after_a_bom_or_blank_lines_is_framed_by_its_first_real_byte(lead):
    assert formats.sniff_format(lead + OLLAMA_LINE) == "ollama-chat"
    assert analyze(lead + OLLAMA_LINE, None)["choices"][0]["text"] == "Hi"


# --- base.EventStreamDialect: each kind of AWS frame ------------------------------------------------------
# ops mutants 6 (an event frame's number), 21, 23, 26 (a bad frame's number and why), 29, 30, 37 (an
# exception's JSON not read), 31 (a text payload read as JSON), 33 (its number), 39 (the error's number),
# 45 (obj and ...), 48 (errors=None).


def frames_of(body: bytes) -> list[bytes]:
    out = []
    while body:
        size = int.from_bytes(body[:4], "big")
        out.append(body[:size])
        body = body[size:]
    return out


def exception(payload: bytes, kind: str = "throttlingException") -> bytes:
    return aws_frame(
        {":exception-type": kind, ":content-type": "application/json", ":message-type": "exception"}, payload
    )


def test_bad_event_frames_are_malformed_at_their_event_number_and_the_stream_goes_on():
    corrupt = bytearray(converse_frames(("contentBlockStop", {"contentBlockIndex": 5})))
    corrupt[-6] ^= 0xFF  # a payload byte: the message CRC no longer matches
    body = (
        converse_frames(MESSAGE_START)
        + aws_frame(event_headers("contentBlockDelta"), b"not json")  # event 2
        + bytes(corrupt)  # event 3
        + converse_frames(TOOL_START, TOOL_DELTA, ("messageStop", {"stopReason": "tool_use"}))
    )
    result = analyze(body, "bedrock-converse")
    malformed = [w for w in result["warnings"] if w["code"] == "malformed-event"]
    assert [w["event"] for w in malformed] == [2, 3]
    assert "not a JSON object" in malformed[0]["message"] and "not a valid frame" in malformed[1]["message"]
    assert calls(result) == [("t1", "f", '{"a":1}', 0, 4, 5)] and result["complete"]


@pytest.mark.parametrize(
    "payload,error,malformed",
    [
        (b'{"message": "Too many requests"}', {"message": "Too many requests"}, False),
        (b"Internal failure \xff", {"message": "Internal failure \ufffd"}, False),  # not JSON: kept as text
        (b"{cut", {"message": "{cut"}, True),  # looks like JSON, is not: said malformed too
    ],
)
def test_an_exception_frame_is_a_provider_error_at_its_event_with_its_json_or_its_text(
    payload, error, malformed
):
    body = converse_frames(MESSAGE_START, TOOL_START) + exception(payload)
    result = analyze(body, "bedrock-converse")
    found = warning(result, "provider-error")
    assert found["event"] == 3 and found["error"] == {"type": "throttlingException", **error}
    assert result["error"] == found["error"] and not result["complete"]
    said = ["malformed-event", "provider-error"] if malformed else ["provider-error"]
    assert codes(result) == [*said, "truncated-stream"]  # the call had not finished
    if malformed:
        assert warning(result, "malformed-event")["event"] == 3


# JsonDialect._load mutant 4 (the invalid-utf8 warning's message).


def test_an_event_with_bytes_that_are_not_utf8_is_said_so_naming_its_event():
    delta = b'{"contentBlockIndex": 0, "delta": {"text": "caf\xe9"}}'
    body = converse_frames(MESSAGE_START) + aws_frame(event_headers("contentBlockDelta"), delta)
    found = warning(analyze(body + converse_frames(MESSAGE_STOP), "bedrock-converse"), "invalid-utf8")
    assert found["event"] == 2 and "event 2" in found["message"]


# snippet mutants 12, 13 (always or never cut) and 14 (< for <=): a malformed event's data, at most 200
# characters.


@pytest.mark.parametrize(
    "size,data", [(5, "y" * 5), (200, "y" * 200), (201, "y" * 200 + "…"), (900, "y" * 200 + "…")]
)
def test_a_malformed_events_data_is_cut_after_200_characters(size, data):
    body = converse_frames(MESSAGE_START) + aws_frame(event_headers("contentBlockDelta"), b"y" * size)
    assert warning(analyze(body, "bedrock-converse"), "malformed-event")["data"] == data


# as_int mutant 2 (any value an index): a block index that is not an integer is no index.


def test_a_block_index_that_is_not_an_integer_is_none():
    start = (
        "contentBlockStart",
        {"contentBlockIndex": "0", "start": {"toolUse": {"toolUseId": "t1", "name": "f"}}},
    )
    delta = ("contentBlockDelta", {"contentBlockIndex": "0", "delta": {"toolUse": {"input": "{}"}}})
    result = analyze(converse_frames(MESSAGE_START, start, delta, MESSAGE_STOP), "bedrock-converse")
    assert [c["index"] for c in result["choices"][0]["tool_calls"]] == [None]


# --- base.declare, Bedrock's _tools: which schema a tool declared twice or oddly keeps ---------------------
# declare mutants 10 (a later schema replaces the first) and 13 (a schema that is not an object kept),
# bedrock_converse._tools mutants 14 (tools that are not a list iterated) and 43 (an inputSchema that is
# not an object asked for "json").

CALL_F = converse_frames(MESSAGE_START, TOOL_START, TOOL_DELTA, ("messageStop", {"stopReason": "tool_use"}))
NEEDS_B = {"type": "object", "required": ["b"]}


def spec(schema=None, **extra) -> dict:
    return {"toolSpec": {"name": "f", **({"inputSchema": schema} if schema is not None else {}), **extra}}


@pytest.mark.parametrize(
    "tools,expected",
    [
        ([spec(), spec({"json": NEEDS_B})], ["schema-mismatch"]),  # the first gave none: the second's counts
        ([spec({"json": NEEDS_B}), spec({"json": {}})], ["schema-mismatch"]),  # the first one given wins
        ([spec({"json": False})], []),  # a schema that is not an object is not judged by
        ([spec("not an object")], []),
        ([spec({"json": {}})], []),
        (None, ["undeclared-tool"]),  # a tools key that is no list: nothing declared
        ({"f": spec()}, ["undeclared-tool"]),
    ],
)
def test_a_bedrock_tool_keeps_the_first_object_schema_declared_for_it(tools, expected):
    request = {"toolConfig": {"tools": tools}}
    assert codes(analyze(CALL_F, "bedrock-converse", request=request)) == expected


# forced_by_type mutant 6 (a tool_choice of any type forces its name): Anthropic's, inside Bedrock Invoke.

ANTHROPIC_CALL = [
    {"type": "message_start", "message": {"id": "m", "model": "x", "content": [], "usage": {}}},
    {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "tool_use", "id": "t0", "name": "f"},
    },
    {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{}"}},
    {"type": "content_block_stop", "index": 0},
    {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 3}},
    {"type": "message_stop"},
]


@pytest.mark.parametrize("kind,ignored", [("tool", True), ("auto", False), ("any", False)])
def test_only_a_tool_choice_of_type_tool_forces_its_name(kind, ignored):
    request = {"tool_choice": {"type": kind, "name": "g"}}
    result = analyze(invoke_frames(*ANTHROPIC_CALL), "bedrock-invoke", request=request)
    assert ("tool-choice-ignored" in codes(result)) is ignored


# --- bedrock_converse: a stream's text, reasoning, calls and usage ---------------------------------------
# frame_ops mutants 39, 40 (text never read), 46 (its event), 60, 61, 66, 67 (reasoning never read), 73 (its
# event), 106 and 20 (a call's first and last events), 152 (usage from any event).


def text_delta(index: int, text=None, reasoning=None) -> tuple:
    delta = {"text": text} if text is not None else {"reasoningContent": {"text": reasoning}}
    return ("contentBlockDelta", {"contentBlockIndex": index, "delta": delta})


@pytest.mark.parametrize("reasoning_first", [False, True])
def test_a_converse_streams_text_and_reasoning_are_kept_and_the_first_is_the_first_token(reasoning_first):
    text = [text_delta(1, text="Hi"), text_delta(1, text=""), text_delta(1, text=" there")]
    reasoning = [text_delta(0, reasoning="Hm"), text_delta(0, reasoning=""), text_delta(0, reasoning=" ok")]
    events = [*reasoning, *text] if reasoning_first else [*text, *reasoning]
    result = analyze(converse_frames(MESSAGE_START, *events, MESSAGE_STOP), "bedrock-converse")
    assert texts(result) == [("Hi there", "Hm ok", "end_turn")]
    assert result["timing"]["first_token_event"] == 2


def test_a_converse_calls_first_and_last_events_are_its_start_and_its_last_delta():
    more = ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"toolUse": {"input": ""}}})
    body = converse_frames(
        MESSAGE_START, TOOL_START, TOOL_DELTA, more, ("messageStop", {"stopReason": "tool_use"})
    )
    result = analyze(body, "bedrock-converse")
    assert calls(result) == [("t1", "f", '{"a":1}', 0, 2, 4)]
    assert result["timing"]["first_token_event"] == 2


def test_only_the_metadata_events_usage_is_the_usage():
    start = ("messageStart", {"role": "assistant", "usage": {"inputTokens": 99, "outputTokens": 99}})
    result = analyze(converse_frames(start, TOOL_START, TOOL_DELTA, MESSAGE_STOP), "bedrock-converse")
    assert result["usage"]["provider"] is None
    metadata = ("metadata", {"usage": {"inputTokens": 5, "outputTokens": 9}})
    result = analyze(
        converse_frames(start, TOOL_START, TOOL_DELTA, MESSAGE_STOP, metadata), "bedrock-converse"
    )
    assert result["usage"]["provider"] == {"inputTokens": 5, "outputTokens": 9}


# message_ops mutants 3 (a bad body's event), 37 (its calls' events), 105 (a reasoning text that is not a
# string), 152 (no end marker: a message without a stop reason said truncated).


def converse_message(*content, **extra) -> bytes:
    return json.dumps(
        {"output": {"message": {"role": "assistant", "content": list(content)}}, **extra}
    ).encode()


def reasoning_block(text) -> dict:
    return {"reasoningContent": {"reasoningText": {"text": text}}}


def test_a_whole_converse_messages_calls_are_at_event_one_and_it_needs_no_stop_reason_to_be_complete():
    tool = {"toolUse": {"toolUseId": "t1", "name": "f", "input": {"a": 1}}}
    result = analyze_message(converse_message(tool, {"text": "Hi"}), "bedrock-converse")
    assert calls(result) == [("t1", "f", '{"a":1}', 0, 1, 1)]
    assert (texts(result), result["complete"], result["warnings"]) == ([("Hi", None, None)], True, [])
    result = analyze_message(converse_message(reasoning_block(42), reasoning_block("Hm")), "bedrock-converse")
    assert (texts(result), result["complete"]) == ([(None, "Hm", None)], True)


def test_a_converse_message_that_is_not_json_is_malformed_at_event_one():
    result = analyze_message(b"{not json", "bedrock-converse")
    assert warning(result, "malformed-event")["event"] == 1


# _echoes mutant 24 (every echo's turn lost): the assistant message each echoed call was in.


def test_a_converse_requests_echoes_carry_their_turn():
    def turn(*calls) -> dict:
        blocks = [{"toolUse": {"toolUseId": i, "name": "f", "input": {}}} for i in calls]
        return {"role": "assistant", "content": blocks}

    user = {"role": "user", "content": [{"text": "go"}]}
    request = {"messages": [user, turn("t1"), user, turn("t2", "t3")]}
    echoed, _ = extract_echoes(request, "bedrock-converse")
    assert [(c.id, c.turn) for c in echoed] == [("t1", 2), ("t2", 4), ("t3", 4)]


# --- bedrock_invoke: chunks that are not Anthropic events -----------------------------------------------
# frame_ops mutants 5 (a chunk without string bytes, or another frame with them, read), 19, 22 (why a
# payload is malformed), 28, 31 (a payload that is not JSON), 35 (the inner events' numbers).


def test_invoke_frames_other_than_chunks_of_base64_json_add_nothing_but_a_malformed_event():
    sneaky = base64.b64encode(json.dumps(ANTHROPIC_CALL[2]).encode()).decode()
    odd = (
        aws_frame(event_headers("chunk"), json.dumps({"bytes": 5}).encode())  # event 3
        + aws_frame(event_headers("other"), json.dumps({"bytes": sneaky}).encode())  # event 4
        + aws_frame(
            event_headers("chunk"), json.dumps({"bytes": base64.b64encode(b"nope").decode()}).encode()
        )
        + aws_frame(event_headers("chunk"), json.dumps({"bytes": "@@@@"}).encode())  # event 6
    )
    body = invoke_frames(*ANTHROPIC_CALL[:2]) + odd + invoke_frames(*ANTHROPIC_CALL[2:])
    result = analyze(body, "bedrock-invoke")
    assert calls(result) == [("t0", "f", "{}", 0, 2, 7)]
    malformed = [(w["code"], w["event"], w["data"]) for w in result["warnings"]]
    assert malformed == [("malformed-event", 5, "nope"), ("malformed-event", 6, "@@@@")]
    assert "not base64" in result["warnings"][1]["message"]


# --- timing: a caller with a clock but no request time, and events that come in one moment -------------
# StreamTiming.on_bytes mutant 3 and facts 10 (no duration without an end), facts 3 and 25 (times counted
# from nothing, or a first byte counted from itself), on_events 5 (a silence of no time at all).


def test_without_a_request_time_times_count_from_the_first_byte_and_the_end_is_the_last_byte():
    accumulator = StreamAccumulator("openai-chat")
    events = [part + b"\n\n" for part in PRODUCTION.split(b"\n\n") if part]
    accumulator.feed(b"".join(events[:2]), 10.0)
    accumulator.feed(b"".join(events[2:4]), 10.0)  # the same moment: no silence between them
    accumulator.feed(b"".join(events[4:]), 12.5)
    timing = accumulator.finish()["timing"]  # no end time given
    assert timing["clock"] is True and timing["time_to_first_byte"] is None
    assert (timing["time_to_first_event"], timing["time_to_first_token"], timing["duration"]) == (
        0.0,
        0.0,
        2.5,
    )
    assert (timing["longest_gap"], timing["longest_gap_after_event"]) == (2.5, 4)


def test_events_that_all_come_in_one_moment_have_no_gap():
    accumulator = StreamAccumulator("openai-chat", started_at=9.0)
    events = [part + b"\n\n" for part in PRODUCTION.split(b"\n\n") if part]
    for event in events:
        accumulator.feed(event, 10.0)
    timing = accumulator.finish()["timing"]
    assert (timing["longest_gap"], timing["longest_gap_after_event"]) == (None, None)
    assert (timing["time_to_first_byte"], timing["duration"]) == (1.0, 1.0)


# --- limits.checked_strategies: a library caller's unknown strategy is named -------------------------------
# checked_strategies mutant 4 (ValueError(None): the caller told nothing; the addon and the CLI check
# their options themselves).


def test_an_unknown_strategy_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown strategies.*'bogus'.*known: "):
        Limits(strategies=("recency", "bogus"))


# --- bedrock_invoke.inner_event: which frames the rewriter reads as Anthropic events ----------------------
# inner_event mutants 2, 3 (a chunk without a JSON object or string bytes read anyway: the rewriter raised
# and gave up)
# and 17, 19, 22 (base64 read loosely: a chunk the analysis calls malformed moved as a fragment).


def serialized(body: bytes) -> bytes:
    from accumulator.rewrite import StreamRewriter

    rewriter = StreamRewriter("bedrock-invoke", repair=["serialize"])
    out = b"".join(rewriter.feed(body) + rewriter.finish())
    assert rewriter.report()["stopped"] is None  # it never gave up (to pass the rest through unchanged)
    return out


def block_delta(index: int, fragment: str) -> dict:
    return {
        "type": "content_block_delta",
        "index": index,
        "delta": {"type": "input_json_delta", "partial_json": fragment},
    }


INTERLEAVED = [
    ANTHROPIC_CALL[0],
    ANTHROPIC_CALL[1],
    block_delta(0, '{"a":'),
    {
        "type": "content_block_start",
        "index": 1,
        "content_block": {"type": "tool_use", "id": "t1", "name": "g"},
    },
    block_delta(1, '{"b":2}'),
]
REST = [
    block_delta(0, "1}"),
    {"type": "content_block_stop", "index": 0},
    {"type": "content_block_stop", "index": 1},
]
LOOSE = base64.b64encode(json.dumps(block_delta(0, "")).encode()).decode()


@pytest.mark.parametrize(
    "payload",
    [
        json.dumps({"bytes": 5}).encode(),
        b"not json",
        json.dumps({"bytes": LOOSE[:4] + "!" + LOOSE[4:]}).encode(),
    ],
)
def test_a_chunk_that_is_no_anthropic_event_ends_the_rewriters_run_in_place(payload):
    head, tail = invoke_frames(*INTERLEAVED), invoke_frames(*REST, ANTHROPIC_CALL[-1])
    assert serialized(head + tail) != head + tail  # interleaved calls, serialized
    body = head + aws_frame(event_headers("chunk"), payload) + tail
    assert serialized(body) == body  # the odd chunk comes between the fragments: nothing moves past it
