"""What a mutation run found untested in stream.py (docs/mutation.md): ``has_call``, ``name_model`` and
``snapshot`` before any frame and after the end, whole events' byte cap and clock, the decoded-size cap and
a corrupt body's details, the head held while the format is told (empty, fed in small pieces, a body we do
not read, a Gemini body starting blank), and what ``analyze_message`` and ``analyze_http_error`` say."""

from __future__ import annotations

import gzip
import json
import tracemalloc

import pytest
from schemas import check_result
from streams import call, calls_of, chat_message, choice, chunk, codes, sse, tool_chunk, warning
from websocket_messages import REALTIME

import accumulator.stream
from accumulator import StreamAccumulator, analyze, analyze_http_error, analyze_message
from accumulator.formats import SNIFF_BYTES

CHAT = sse(
    tool_chunk(call(0, "call_1", "lookup", '{"q": ')),
    tool_chunk(call(0, None, None, '"x"}')),
    chunk(choice(0, "tool_calls")),
)
GEMINI_ARRAY = json.dumps(
    [
        {
            "candidates": [
                {
                    "content": {"parts": [{"functionCall": {"name": "lookup", "args": {"q": "x"}}}]},
                    "finishReason": "STOP",
                }
            ]
        }
    ]
).encode()


def _pieces(body: bytes, size: int) -> list[bytes]:
    return [body[i : i + size] for i in range(0, len(body), size)]


# -- has_call, name_model, snapshot ---------------------------------------------------------------------------


def test_has_call_is_true_only_for_a_call_that_opened_and_false_before_any_frame():
    stream = StreamAccumulator(None)  # the format is told from the first bytes: nothing is set up yet
    assert stream.has_call("call_1") is False
    stream.feed(CHAT)
    assert stream.has_call("call_1") is True
    assert stream.has_call("call_2") is False


def test_name_model_before_any_frame_does_nothing_and_never_overrides_the_model_the_events_name():
    stream = StreamAccumulator(None)
    stream.name_model("front-door-model")  # no assembly yet: nothing to name
    stream.feed(CHAT)
    stream.name_model("front-door-model")
    assert stream.finish()["model"] == "gpt-test"


def test_snapshot_is_none_before_any_frame_and_after_the_end():
    stream = StreamAccumulator(None)
    assert stream.snapshot() is None
    stream.feed(CHAT)
    assert stream.snapshot()["choices"][0]["tool_calls"][0]["id"] == "call_1"
    stream.finish()
    assert stream.snapshot() is None


# -- feed_object: whole events ------------------------------------------------------------------------------

_REALTIME_SERVER = [obj for from_client, obj in REALTIME if not from_client]


def test_whole_events_are_capped_on_the_sum_of_their_sizes_with_the_cap_named():
    stream = StreamAccumulator("openai-realtime", max_decoded_bytes=100)
    stream.feed_object(_REALTIME_SERVER[0], 60)
    stream.feed_object(_REALTIME_SERVER[1], 60)  # 120 bytes in all: past the cap, though each is under it
    result = stream.finish()
    check_result(result)
    cap = warning(result, "decoded-size-cap")
    assert cap["limit"] == 100
    assert result["stats"]["bytes"] == 120
    assert result["stats"]["events"] == 1  # the second was counted, not read


def test_whole_events_exactly_at_the_byte_cap_are_read():
    stream = StreamAccumulator("openai-realtime", max_decoded_bytes=100)
    stream.feed_object(_REALTIME_SERVER[0], 100)
    result = stream.finish()
    assert "decoded-size-cap" not in codes(result)
    assert result["stats"]["events"] == 1


def test_whole_events_carry_their_arrival_time_to_the_first_event_and_first_token():
    stream = StreamAccumulator("openai-realtime", started_at=100.0)
    for offset, obj in enumerate(_REALTIME_SERVER):
        stream.feed_object(obj, 50, now=101.0 + offset)
    timing = stream.finish()["timing"]
    assert timing["time_to_first_event"] == 1.0
    assert timing["time_to_first_token"] is not None


# -- content decoding -----------------------------------------------------------------------------------------


def test_a_compressed_stream_of_unknown_format_fed_byte_by_byte_is_recognised():
    # The decompressor hands out a few bytes at a time: a short first piece is held, not taken as the end.
    stream = StreamAccumulator(None, encoding="gzip")
    for byte in _pieces(gzip.compress(CHAT), 1):
        stream.feed(byte)
    result = stream.finish()
    assert result is not None
    assert calls_of(result) == [("call_1", "lookup", '{"q": "x"}')]


def test_a_corrupt_compressed_body_names_the_decoders_error():
    body = gzip.compress(CHAT)
    result = analyze(body[:20] + b"\x00" * 20 + body[40:], "openai-chat", encoding="gzip")
    check_result(result)
    failed = warning(result, "decoding-failed")
    assert isinstance(failed["error"], str) and failed["error"]


def test_past_the_decoded_size_cap_nothing_more_is_analysed_and_the_cap_is_named():
    big = sse(chunk(choice(0, content="x" * 5000)), done=False)
    stream = StreamAccumulator("openai-chat", encoding="gzip", max_decoded_bytes=1000)
    stream.feed(gzip.compress(big))
    # Whatever comes after the cap is not read, even bytes that would end the event cut there and add a call.
    stream.feed(b"\n\n" + sse(tool_chunk(call(0, "call_late", "f", "{}")), chunk(choice(0, "tool_calls"))))
    result = stream.finish()
    check_result(result)
    assert warning(result, "decoded-size-cap")["limit"] == 1000
    assert calls_of(result) == []


# -- the head held while the format is told -------------------------------------------------------------------


def test_an_empty_body_of_unknown_format_is_none_we_read():
    assert analyze(b"", None) is None


def test_a_stream_of_unknown_format_in_small_pieces_is_recognised_before_it_ends():
    stream = StreamAccumulator(None)
    for piece in _pieces(CHAT, 8):
        stream.feed(piece)
    snapshot = stream.snapshot()  # live progress, before finish()
    assert snapshot is not None and snapshot["format"] == "openai-chat"
    assert snapshot["choices"][0]["tool_calls"][0]["arguments"] == '{"q": "x"}'


def test_sniffing_a_head_fed_byte_by_byte_is_repeated_only_as_it_doubles(monkeypatch):
    sniffs = []
    real = accumulator.stream.sniff_format

    def counting(head):
        sniffs.append(len(head))
        return real(head)

    monkeypatch.setattr(accumulator.stream, "sniff_format", counting)
    stream = StreamAccumulator(None)
    for byte in _pieces(b"x" * 5000, 1):  # not a stream we read, but not yet past the sniffing cap
        stream.feed(byte)
    assert stream.finish() is None
    assert 1 <= len(sniffs) <= 10, sniffs[:20]  # 16, 272, 544, ... bytes: not one per feed


def test_a_body_not_recognised_in_its_first_bytes_is_given_up_whatever_follows():
    stream = StreamAccumulator(None)
    stream.feed(b"x" * SNIFF_BYTES)  # no stream we read: given up here
    stream.feed(CHAT)
    assert stream.finish() is None


def test_a_body_not_recognised_holds_no_more_bytes_after_the_sniffing_cap():
    stream = StreamAccumulator(None)
    piece = b"x" * (64 * 1024)
    tracemalloc.start()
    try:
        for _ in range(128):  # 8 MiB
            stream.feed(piece)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert stream.finish() is None
    assert peak < 2 * 1024 * 1024


def test_a_gemini_body_fed_in_pieces_is_read_before_it_ends():
    stream = StreamAccumulator("gemini")
    for piece in _pieces(GEMINI_ARRAY[:-1], 16):
        stream.feed(piece)
    snapshot = stream.snapshot()
    assert snapshot is not None and snapshot["choices"][0]["tool_calls"][0]["name"] == "lookup"


@pytest.mark.parametrize(
    "blank", [b"\n", b"\xef\xbb\xbf", b"\xef\xbb\xbf \r\n"], ids=["newline", "bom", "bom+space"]
)
def test_a_gemini_body_whose_first_piece_is_blank_waits_for_a_byte_that_tells_its_framing(blank):
    stream = StreamAccumulator("gemini")
    stream.feed(blank)
    stream.feed(GEMINI_ARRAY)
    result = stream.finish()
    assert [(c["name"], c["arguments"]) for c in result["choices"][0]["tool_calls"]] == [
        ("lookup", '{"q":"x"}')
    ]


# -- analyze_message ------------------------------------------------------------------------------------------


def test_a_message_counts_one_event_when_it_reads_anything_and_none_for_an_empty_body():
    message = b'{"oops": 1}'
    assert analyze_message(message, "openai-chat")["stats"] == {
        "events": 1,
        "bytes": len(message),
        "warnings_suppressed": 0,
        "calls_dropped": 0,
        "deltas_dropped": 0,
    }
    assert analyze_message(b"", "openai-chat")["stats"]["events"] == 0


@pytest.mark.parametrize(
    "format,body",
    [
        (
            "gemini",
            b'{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f"}}]},"finishReason":"STOP"}]}',
        ),
        ("ollama-chat", b'{"model":"m","message":{"tool_calls":[{"function":{"name":"f"}}]},"done":true}'),
    ],
)
def test_a_message_call_without_arguments_shows_the_formats_empty_arguments(format, body):
    assert analyze_message(body, format)["choices"][0]["tool_calls"][0]["arguments"] == "{}"


def test_a_messages_calls_are_checked_against_the_tools_declared_in_its_own_formats_shape():
    body = chat_message([("call_1", "lookup", "{}")])
    # Declared in Anthropic's shape: not a Chat request's tools, so the call is not one it declared.
    anthropic_shaped = {"tools": [{"name": "lookup", "input_schema": {"type": "object"}}]}
    assert "undeclared-tool" in codes(analyze_message(body, "openai-chat", request=anthropic_shaped))
    chat_shaped = {"tools": [{"type": "function", "function": {"name": "lookup"}}]}
    assert "undeclared-tool" not in codes(analyze_message(body, "openai-chat", request=chat_shaped))


# -- analyze_http_error ---------------------------------------------------------------------------------------


def test_an_http_error_with_a_json_object_body_carries_the_providers_error_object():
    body = b'{"error": {"message": "bad tool", "type": "invalid_request_error"}}'
    result = analyze_http_error(
        body, "openai-chat", status=400, reason="Bad Request", content_type="application/json"
    )
    check_result(result)
    assert result["error"] == {"error": {"message": "bad tool", "type": "invalid_request_error"}}
    assert result["streamed"] is False  # the default: no stream was asked for
    assert result["stats"]["events"] == 0
    assert result["stats"]["bytes"] == len(body)
    http = warning(result, "http-error")
    assert (http["status"], http["reason"], http["body"]) == (400, "Bad Request", body.decode())


@pytest.mark.parametrize(
    "body",
    [b"<html>502 Bad Gateway</html>", b'"overloaded"'],
    ids=["not-json", "json-string"],
)
def test_an_http_error_whose_body_is_no_json_object_carries_its_status_and_body(body):
    result = analyze_http_error(body, "gemini", status=502, content_type="text/html", streamed=True)
    check_result(result)
    assert result["error"] == {"status": 502, "body": body.decode()}
    assert result["streamed"] is True
    assert warning(result, "http-error")["body"] == body.decode()
