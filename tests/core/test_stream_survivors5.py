"""stream.py and result.py: what a mutation run found untested (the logic survivors of
``StreamAccumulator.finish`` and ``build_result`` in issue 16's last stretch; see docs/mutation.md). Each
test was checked by applying the mutation it guards against to the source by hand and seeing it fail."""

from __future__ import annotations

import gzip
import json

import pytest
from streams import DATA, call, choice, chunk, codes, sse, tool_chunk, warning

from accumulator import Limits, StreamAccumulator, analyze
from accumulator.framing.base import OVERSIZED
from accumulator.framing.sse import SseDecoder

SHORT = b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'


def test_a_stream_too_short_to_sniff_while_it_came_is_read_at_its_end():
    # finish_11, _13: the bytes held for sniffing are read at the end, not dropped with the stream
    accumulator = StreamAccumulator(None)  # the format sniffed
    accumulator.feed(SHORT[:20])  # too little to tell: the next look waits for 256 bytes more
    accumulator.feed(SHORT[20:])
    result = accumulator.finish()
    assert result is not None and (result["format"], result["complete"]) == ("openai-chat", True)
    assert result["choices"][0]["text"] == "hi"


def test_a_compressed_body_cut_short_is_a_decoding_failure_at_its_end():
    # finish_4: the decoder is asked at the end whether its stream finished
    body = gzip.compress((DATA / "production_interleaved.sse").read_bytes())
    accumulator = StreamAccumulator(encoding="gzip")
    accumulator.feed(body[:-4])  # the gzip trailer missing: every event decoded, the body still cut
    result = accumulator.finish()
    assert warning(result, "decoding-failed")["message"] == (
        "the compressed body is corrupt: gzip: the compressed stream is truncated"
    )


def test_a_stream_cut_short_says_which_choices_were_unfinished_or_that_none_had_come():
    # build_result_73, _74
    before = analyze(sse(chunk(), done=False), "openai-chat")
    assert warning(before, "truncated-stream")["message"] == (
        "the stream ended without its end marker and before any choice arrived"
    )
    during = analyze(sse(chunk(choice(0, content="hi")), done=False), "openai-chat")
    assert warning(during, "truncated-stream")["message"] == (
        "the stream ended without its end marker; unfinished choices: [0]"
    )
    assert "truncated-stream" in codes(during)


@pytest.mark.parametrize("body", [b"", b"\n\n  \n"], ids=["empty", "blank"])
@pytest.mark.parametrize("fmt", ["openai-chat", "gemini"])  # gemini: several framings, told by the head
def test_a_stream_that_never_framed_an_event_is_an_empty_truncated_result(fmt, body):
    # finish_17, _20: nothing was framed; the result is still made, with nothing in it
    accumulator = StreamAccumulator(fmt)
    accumulator.feed(body)
    result = accumulator.finish()
    assert (result["complete"], result["choices"], codes(result)) == (False, [], ["truncated-stream"])


def test_an_event_cut_by_the_end_is_read_and_the_warning_names_it():
    # finish_40, _43, _46
    body = sse(chunk(choice(0, content="hi")), done=False)[:-2]  # event 1 without its blank line
    found = warning(analyze(body, "openai-chat"), "unterminated-event")
    assert (found["message"], found["event"]) == (
        "the input ended inside event 2 (no closing delimiter); it was read anyway",
        1,
    )


def test_an_aws_frame_cut_by_the_end_is_a_malformed_event_after_the_last_whole_one():
    # finish_48, _49, _59, _60, _61
    body = (DATA / "bedrock_converse_parallel.bin").read_bytes()
    found = warning(analyze(body[:-7], "bedrock-converse"), "malformed-event")
    frame = int.from_bytes(body[len(body) - 7 - 199 : len(body) - 7 - 195], "big")
    assert frame == 206  # the last frame: 199 of its 206 bytes came
    assert {k: found[k] for k in ("message", "event", "data")} == {
        "message": "the input ended inside a frame (199 bytes of it)",
        "event": 12,
        "data": "",
    }


@pytest.mark.parametrize("fmt", ["openai-chat", "gemini"])
def test_a_body_that_fails_to_decode_before_any_event_still_gives_its_result(fmt):
    # finish_20: nothing framed, analysis stopped: the result says why (gemini tells its framing by the head)
    accumulator = StreamAccumulator(fmt, encoding="gzip")
    accumulator.feed(b"\x1f\x8b\x08\x00 not a gzip body at all")
    result = accumulator.finish()
    assert codes(result) == ["decoding-failed", "truncated-stream"] and result["choices"] == []


def events_of(body: bytes) -> list[bytes]:
    return [event + b"\n\n" for event in body.split(b"\n\n") if event]


def fed_twelve_seconds_apart(threshold: float) -> dict:
    accumulator = StreamAccumulator("openai-chat", started_at=0.0, stall_seconds=threshold)
    for n, event in enumerate(events_of((DATA / "openai_chat_parallel.sse").read_bytes())):
        accumulator.feed(event, 1.0 + 12 * n)
    return accumulator.finish()


def test_a_stall_is_a_gap_longer_than_the_threshold_and_says_both():
    # finish_86 (a gap of exactly the threshold), _88, _91, _96
    assert "stalled" not in codes(fed_twelve_seconds_apart(12))
    stalled = warning(fed_twelve_seconds_apart(11.5), "stalled")
    assert stalled["message"] == "the stream went silent for 12.0 s after event 1 (threshold 11.5 s)"
    assert (stalled["seconds"], stalled["after_event"], stalled["threshold"]) == (12.0, 1, 11.5)


def test_an_oversized_event_is_warned_with_the_cap_and_the_event_before_it():
    # _consume_16, _18
    body = sse(chunk(choice(0, content="hi")), chunk(choice(0, content="x" * 400)), chunk(choice(0, "stop")))
    found = warning(analyze(body, "openai-chat", max_event_bytes=300), "oversized-event")
    assert (found["message"], found["after_event"], found["limit"]) == (
        "the event after event 1 exceeded 300 bytes and was dropped",
        1,
        300,
    )


def test_the_stall_threshold_of_the_limits_given_is_honoured():
    # __init___39: a Limits' stall_seconds counts when no stall_seconds keyword overrides it
    accumulator = StreamAccumulator("openai-chat", started_at=0.0, limits=Limits(stall_seconds=11.5))
    for n, event in enumerate(events_of((DATA / "openai_chat_parallel.sse").read_bytes())):
        accumulator.feed(event, 1.0 + 12 * n)
    assert warning(accumulator.finish(), "stalled")["threshold"] == 11.5


def test_a_timed_stream_that_got_no_byte_has_no_duration():
    # timing StreamTiming.__init___3: no byte came, so there is no last byte to measure to
    result = StreamAccumulator("openai-chat", started_at=5.0).finish()
    assert result["timing"]["duration"] is None and result["timing"]["time_to_first_byte"] is None


def test_an_unknown_format_is_refused_with_the_known_ones():
    # formats get_6, _10: what a library user who names a format is told
    with pytest.raises(ValueError, match="^unknown format 'grpc'; known: openai-chat, openai-responses, "):
        StreamAccumulator("grpc")


def test_a_body_no_framing_of_its_format_allows_is_read_in_the_formats_first_framing():
    # base framing_for_7: a Gemini body starting with a NUL (an AWS frame's first byte) is read as JSON
    result = analyze(b"\x00\x00\x00garbage", "gemini")
    assert codes(result) == ["malformed-event", "truncated-stream"]
    assert (
        warning(result, "malformed-event")["message"] == "event 1 is not a JSON object: \x00\x00\x00garbage"
    )


def test_an_unsupported_content_encoding_is_a_decoding_failure_naming_it():
    # __init___68, _71
    found = warning(StreamAccumulator("openai-chat", encoding="compress").finish(), "decoding-failed")
    assert (found["message"], found["encoding"]) == ("unsupported Content-Encoding 'compress'", "compress")


def ollama_calls(*calls: tuple[str, int]) -> bytes:
    """Ollama's native chat: each call whole in its own line, with its id and its function's index."""
    head = (
        '{"model":"qwen3:8b","created_at":"2026-01-01T00:00:00Z","message":{"role":"assistant","content":"",'
    )
    lines = [
        head
        + f'"tool_calls":[{{"id":"{i}","function":{{"index":{n},"name":"f","arguments":{{}}}}}}]}},"done":false}}'
        for i, n in calls
    ]
    lines.append(head[:-1] + '},"done":true,"done_reason":"stop"}')
    return "\n".join(lines).encode() + b"\n"


def test_a_whole_call_reusing_an_index_is_a_collision_naming_its_own_id():
    # assembly _route_9: calls that arrive whole (Ollama) collide on an index too
    found = warning(analyze(ollama_calls(("call_a", 0), ("call_b", 0)), "ollama-chat"), "index-collision")
    assert (found["id"], found["existing_id"], found["event"]) == ("call_b", "call_a", 2)
    assert found["message"] == "event 2: new call call_b arrived with index 0, already held by call call_a"


def test_the_calls_cap_warning_names_the_event_of_the_first_call_over_it():
    # assembly _new_call_5, _9
    result = analyze(ollama_calls(("call_a", 0), ("call_b", 1), ("call_c", 2)), "ollama-chat", max_calls=2)
    found = warning(result, "calls-cap")
    assert (found["event"], found["limit"]) == (3, 2)
    assert found["message"].startswith("event 3: more than 2 tool calls")


@pytest.mark.parametrize(("wire_id", "shown"), [(123, "123"), (0, "0"), ("null", None)])
def test_a_call_id_that_is_not_a_string_is_its_text_and_a_placeholder_none(wire_id, shown):
    # ops real_id_2 .. _5
    body = ollama_calls(("X", 0)).replace(b'"id":"X"', b'"id":' + json.dumps(wire_id).encode())
    (found,) = analyze(body, "ollama-chat")["choices"][0]["tool_calls"]
    assert found["id"] == shown


def test_a_chunk_ending_in_cr_lets_only_the_next_chunks_leading_lf_go():
    # lines LineBuffer.split_3: a later chunk's leading LF still ends a line (here the blank line of event b)
    decoder = SseDecoder()
    events = [e.data for piece in (b"data: a\r", b"\rdata: b", b"\n\n") for e in decoder.feed(piece)]
    assert events == [b"a", b"b"]


def test_a_nameless_fragment_with_an_empty_name_among_several_open_calls_is_an_orphan_not_a_call():
    # assembly _route_58
    body = sse(
        tool_chunk(call(0, "call_1", "f", "{"), call(1, "call_2", "g", "{")),
        tool_chunk(call(None, None, "", "}")),
        chunk(choice(0, "tool_calls")),
    )
    result = analyze(body, "openai-chat")
    assert [(c["name"], c["arguments"]) for c in result["choices"][0]["tool_calls"]] == [
        ("f", "{"),
        ("g", "{"),
    ]
    assert warning(result, "orphan-delta")["arguments"] == "}"


# --- framing/sse.py: the event cap on the general path (feed_90, _93, _97, _98) ----------------------------


def framed(cap: int, *chunks: bytes) -> list:
    decoder = SseDecoder(cap)
    events = [e for chunk in chunks for e in decoder.feed(chunk)] + decoder.close()
    return ["OVERSIZED" if e is OVERSIZED else e.data for e in events]


def test_an_event_of_exactly_the_cap_is_kept_one_byte_more_is_dropped():
    # feed_90: two events in one chunk take the general path; a data line counts its bytes and its newline
    assert framed(20, b"data: a\n\ndata: " + b"x" * 13 + b"\n\n") == [b"a", b"x" * 13]
    assert framed(20, b"data: a\n\ndata: " + b"x" * 14 + b"\n\n") == [b"a", "OVERSIZED"]


def test_an_unfinished_line_is_held_to_the_cap_with_the_event_so_far_and_dropped_at_once_beyond():
    # feed_97, _98: the line not yet ended ("data: " and its bytes, and one for the end it will have)
    # counts with the event's lines already held (8 bytes here)
    assert framed(20, b"data: a\n", b"data: " + b"y" * 5, b"\n\n") == [b"a\n" + b"y" * 5]
    assert framed(20, b"data: a\n", b"data: " + b"y" * 6, b"\n\n") == ["OVERSIZED"]
    decoder = SseDecoder(20)
    decoder.feed(b"data: aaaa\n")
    assert decoder.feed(b"data: yy") == [] and decoder.pending == 19
    assert decoder.feed(b"y") == [OVERSIZED] and decoder.pending == 0


def test_a_data_line_without_its_space_over_the_cap_is_dropped_not_a_crash():
    # feed_93: a line other than "data: ..." goes to _line, which may drop the event
    assert framed(20, b"data: a\n\ndata:" + b"z" * 30 + b"\n\n") == [b"a", "OVERSIZED"]
