"""AWS event-stream framing (Bedrock): messages, bad frames, resynchronisation, however the bytes are cut."""

from __future__ import annotations

import base64
import random
import struct
import zlib

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streams import DATA, assert_every_cut_agrees, assert_nearby_cut_pairs_agree, framed, pieces_at

from accumulator.framing import SseEvent
from accumulator.framing.eventstream import EventStreamDecoder
from accumulator.framing.sse import OVERSIZED

CONVERSE = (DATA / "bedrock_converse_parallel.bin").read_bytes()
INVOKE = (DATA / "bedrock_invoke_anthropic_parallel.bin").read_bytes()


def header(name: str, value_type: int, value: bytes) -> bytes:
    return bytes([len(name)]) + name.encode() + bytes([value_type]) + value


def string_header(name: str, value: str) -> bytes:
    raw = value.encode()
    return header(name, 7, len(raw).to_bytes(2, "big") + raw)


def frame(headers: dict[str, str] | bytes, payload: bytes, *, total: int | None = None) -> bytes:
    """One message as AWS sends it: string headers (type 7), CRC32s as zlib computes them."""
    block = (
        headers if isinstance(headers, bytes) else b"".join(string_header(k, v) for k, v in headers.items())
    )
    length = 16 + len(block) + len(payload) if total is None else total
    prelude = struct.pack(">II", length, len(block))
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + block + payload
    return message + struct.pack(">I", zlib.crc32(message))


def event(event_type: str, payload: bytes) -> bytes:
    return frame(
        {":event-type": event_type, ":content-type": "application/json", ":message-type": "event"}, payload
    )


def exception(exception_type: str, payload: bytes) -> bytes:
    return frame(
        {
            ":exception-type": exception_type,
            ":content-type": "application/json",
            ":message-type": "exception",
        },
        payload,
    )


def corrupt(message: bytes, offset: int) -> bytes:
    return message[:offset] + bytes([message[offset] ^ 0x40]) + message[offset + 1 :]


def decode(*chunks: bytes, max_event_bytes: int | None = None) -> list[SseEvent]:
    return framed(EventStreamDecoder(max_event_bytes) if max_event_bytes else EventStreamDecoder(), *chunks)


def malformed(events: list[SseEvent]) -> list[SseEvent]:
    return [e for e in events if e.kind == "malformed"]


def described(name: str) -> list[tuple[str, str]]:
    """(header part, payload part) of each frame line of an example's .txt description."""
    lines = []
    for line in (DATA / name).read_text().splitlines():
        if line.startswith("# ---"):
            break  # what follows is an illustration, not in the .bin
        if line and not line.startswith("#"):
            head, _, payload = line.partition(" | ")
            lines.append((head, payload))
    return lines


PAYLOAD_A = b'{"contentBlockIndex":0,"delta":{"text":"A"}}'
PAYLOAD_B = b'{"contentBlockIndex":0,"delta":{"text":"B"}}'
A = event("contentBlockDelta", PAYLOAD_A)
B = event("contentBlockDelta", PAYLOAD_B)
GARBAGE = random.Random(7).randbytes(700)
MIXED = (
    A
    + corrupt(B, len(B) - 10)  # payload flipped: message CRC mismatch
    + exception("throttlingException", b'{"message":"slow down"}')
    + GARBAGE
    + corrupt(A, 2)  # prelude flipped: resynchronise
    + B
    + frame({":message-type": "error", ":error-code": "InternalFailure", ":error-message": "boom"}, b"")
    + event("x", b"y" * 300)  # over the 256-byte cap used below
    + B[:7]
    + A
)
STREAMS = [
    ("bedrock_converse_parallel.bin", CONVERSE),
    ("bedrock_invoke_anthropic_parallel.bin", INVOKE),
    ("mixed_bad_frames", MIXED),
]


def test_the_converse_example_matches_its_description():
    events = decode(CONVERSE)
    expected = described("bedrock_converse_parallel.txt")
    assert len(events) == len(expected) == 12
    for e, (head, payload) in zip(events, expected):
        fields = dict(f.split("=", 1) for f in head.split())
        assert (e.type, e.kind, e.id) == (fields[":event-type"], fields[":message-type"], None)
        assert orjson.loads(e.data) == orjson.loads(payload)
    assert [e.type for e in events[:4]] == [
        "messageStart",
        "contentBlockDelta",
        "contentBlockStop",
        "contentBlockStart",
    ]
    assert orjson.loads(events[3].data)["start"]["toolUse"]["name"] == "get_weather"


def test_the_invoke_example_matches_its_description():
    events = decode(INVOKE)
    expected = described("bedrock_invoke_anthropic_parallel.txt")
    assert len(events) == len(expected) == 20
    for e, (head, payload) in zip(events, expected):
        assert head == ":event-type=chunk" and (e.type, e.kind) == ("chunk", "event")
        wrapper = orjson.loads(e.data)
        assert set(wrapper) == {"bytes", "p"}
        assert orjson.loads(base64.b64decode(wrapper["bytes"])) == orjson.loads(
            payload.removeprefix("bytes decodes to: ")
        )


@pytest.mark.parametrize("name,body", STREAMS, ids=[n for n, _ in STREAMS])
def test_every_split_point_gives_the_same_events(name, body):
    assert_every_cut_agrees(lambda *c: decode(*c, max_event_bytes=256), body, name)


@pytest.mark.parametrize("name,body", STREAMS, ids=[n for n, _ in STREAMS])
def test_every_pair_of_split_points_on_a_short_prefix(name, body):
    assert_nearby_cut_pairs_agree(lambda *c: decode(*c, max_event_bytes=256), body, span=300, gap=8)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(STREAMS), st.lists(st.integers(min_value=0, max_value=1 << 16), max_size=40))
def test_random_chunkings_give_the_same_events(stream, cuts):
    _, body = stream
    whole = decode(body, max_event_bytes=256)
    pieces = pieces_at(body, cuts)
    assert decode(*pieces, max_event_bytes=256) == whole


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.one_of(st.sampled_from([A, B, corrupt(A, 5), corrupt(B, 40)]), st.binary(max_size=40)), max_size=8
    ),
    st.lists(st.integers(min_value=0, max_value=1 << 12), max_size=12),
)
def test_any_mix_of_frames_and_noise_never_raises_and_any_chunking_agrees(parts, cuts):
    body = b"".join(parts)
    whole = decode(body, max_event_bytes=256)
    pieces = pieces_at(body, cuts)
    assert decode(*pieces, max_event_bytes=256) == whole


def test_the_mixed_stream_decodes_every_good_frame_and_reports_each_bad_one_once():
    events = decode(MIXED, max_event_bytes=256)
    assert [(e.type, e.kind) for e in events] == [
        ("contentBlockDelta", "event"),
        ("malformed-frame", "malformed"),  # B with a bad message CRC
        ("throttlingException", "exception"),
        ("malformed-frame", "malformed"),  # the garbage and the corrupt prelude after it: one region
        ("contentBlockDelta", "event"),
        ("InternalFailure", "error"),
        (OVERSIZED.type, OVERSIZED.kind),
        ("malformed-frame", "malformed"),  # B's first 7 bytes, then A: resynchronised on A
        ("contentBlockDelta", "event"),
    ]
    assert events[6] is OVERSIZED
    assert [e.data for e in events if e.kind == "event" and e is not OVERSIZED] == [
        PAYLOAD_A,
        PAYLOAD_B,
        PAYLOAD_A,
    ]


def test_exception_and_error_frames():
    body = exception(
        "modelStreamErrorException", b'{"message":"Model stream error","originalStatusCode":500}'
    )
    assert decode(body) == [
        SseEvent(
            "modelStreamErrorException",
            b'{"message":"Model stream error","originalStatusCode":500}',
            None,
            "exception",
        )
    ]
    error = {
        ":message-type": "error",
        ":error-code": "ThrottlingException",
        ":error-message": "Rate exceeded",
    }
    assert decode(frame(error, b"")) == [SseEvent("ThrottlingException", b"Rate exceeded", None, "error")]
    assert decode(frame(error, b'{"x":1}')) == [SseEvent("ThrottlingException", b'{"x":1}', None, "error")]
    assert decode(frame({":message-type": "error"}, b"")) == [SseEvent(None, b"", None, "error")]


def test_a_message_without_message_type_is_an_event():
    assert decode(frame({":event-type": "chunk"}, b"{}")) == [SseEvent("chunk", b"{}", None, "event")]
    assert decode(frame(b"", b"")) == [SseEvent(None, b"", None, "event")]


def test_headers_of_every_value_type_are_parsed_and_skipped():
    block = (
        header("t", 0, b"")
        + header("f", 1, b"")
        + header("byte", 2, b"\x05")
        + header("i16", 3, b"\x00\x01")
        + header("i32", 4, b"\x00\x00\x00\x01")
        + header("i64", 5, bytes(8))
        + header("raw", 6, b"\x00\x03abc")
        + string_header(":event-type", "chunk")
        + header("ts", 8, bytes(8))
        + header("uuid", 9, bytes(16))
        + header(":message-type", 6, b"\x00\x09exception")  # bytes, not a string: not the message type
    )
    assert decode(frame(block, b"{}")) == [SseEvent("chunk", b"{}", None, "event")]


@pytest.mark.parametrize(
    "block",
    [
        header("x", 10, b""),  # no such value type
        string_header(":event-type", "chunk")[:-2],  # the value runs past the headers block
        header("x", 3, b"\x00"),  # an int16 cut short
        bytes([5]) + b"ab",  # a name longer than the block
        string_header(":event-type", "x")[:-1] + b"\xff",  # a string that is not UTF-8
    ],
)
def test_unparsable_headers_in_a_valid_message_are_reported_and_the_next_message_decodes(block):
    events = decode(frame(block, b"{}") + A)
    assert [e.kind for e in events] == ["malformed", "event"]
    assert events[0].type == "malformed-frame" and events[0].data.isascii()


def test_a_message_crc_mismatch_skips_exactly_that_message():
    bad = corrupt(B, len(B) - 2)  # in the message CRC itself
    events = decode(A + bad + A)
    assert [e.kind for e in events] == ["event", "malformed", "event"]
    assert (
        events[1] == SseEvent("malformed-frame", events[1].data, None, "malformed")
        and events[1].data.isascii()
    )


@pytest.mark.parametrize("offset", [0, 3, 4, 7, 8, 11])
def test_a_corrupt_prelude_is_one_malformed_event_and_decoding_resynchronises(offset):
    events = decode(A + corrupt(B, offset) + A + B)
    assert [e.kind for e in events] == ["event", "malformed", "event", "event"]


@pytest.mark.parametrize("total", [0, 15, 17])
def test_impossible_lengths_are_malformed(total):
    # total < 16, or a headers length that does not fit: even with a valid prelude CRC.
    bad = frame(string_header(":event-type", "chunk"), b"", total=total)
    events = decode(bad + A)
    assert [e.kind for e in events] == ["malformed", "event"]


def test_a_long_garbage_region_is_one_malformed_event_and_scanning_it_is_linear():
    noise = random.Random(1).randbytes(200_000)
    decoder = EventStreamDecoder()
    events = []
    body = noise + A
    for i in range(0, len(body), 3):
        events.extend(decoder.feed(body[i : i + 3]))
        if i < len(noise) - 3:
            assert len(decoder._buf) < 12  # nothing piles up while looking for the next prelude
    events.extend(decoder.close())
    assert [e.kind for e in events] == ["malformed", "event"] and decoder.incomplete_bytes == 0


def test_a_non_eventstream_body_is_one_malformed_event():
    events = decode(b'{"message":"The security token included in the request is invalid."}')
    assert [e.kind for e in events] == ["malformed"]


@pytest.mark.parametrize("step", [1, 999, 4096])
def test_a_huge_announced_length_is_skipped_without_buffering(step):
    announced = 300_000
    prelude = struct.pack(">II", announced, 0)
    huge = prelude + struct.pack(">I", zlib.crc32(prelude)) + b"\0" * (announced - 12)
    body = A + huge + B
    decoder = EventStreamDecoder(1000)
    events = []
    for i in range(0, len(body), step):
        events.extend(decoder.feed(body[i : i + step]))
        assert len(decoder._buf) <= max(step, len(A))
    events.extend(decoder.close())
    assert events[0].data == PAYLOAD_A and events[1] is OVERSIZED and events[2].data == PAYLOAD_B
    assert len(events) == 3 and decoder.incomplete_bytes == 0


def test_a_stream_cut_inside_a_huge_message_reports_the_bytes_received():
    prelude = struct.pack(">II", 1 << 31, 0)
    decoder = EventStreamDecoder(1000)
    assert decoder.feed(prelude + struct.pack(">I", zlib.crc32(prelude)) + bytes(5000)) == [OVERSIZED]
    assert decoder.close() == [] and decoder.incomplete_bytes == 5012


@pytest.mark.parametrize("cut", [1, 11, 12, 13, len(B) - 1])
def test_an_unfinished_message_at_close_is_counted(cut):
    decoder = EventStreamDecoder()
    assert len(decoder.feed(A + B[:cut])) == 1
    assert decoder.close() == [] and decoder.incomplete_bytes == cut


def test_a_complete_stream_has_no_incomplete_bytes():
    decoder = EventStreamDecoder()
    decoder.feed(CONVERSE)
    assert decoder.close() == [] and decoder.incomplete_bytes == 0


def test_a_message_of_exactly_the_cap_is_kept_and_one_byte_more_is_not():
    assert decode(A, max_event_bytes=len(A)) == decode(A)
    assert decode(A, max_event_bytes=len(A) - 1) == [OVERSIZED]


# -- raw mode (the rewriter's) --------------------------------------------------------------------------------


def test_raw_mode_each_message_keeps_its_bytes_however_cut():
    bad_crc = corrupt(event("contentBlockDelta", b'{"a":1}'), 20)
    body = CONVERSE + bad_crc + event("messageStop", b"{}")
    whole = EventStreamDecoder(keep_raw=True).feed(body)
    assert b"".join(e.raw for e in whole) == body
    assert [e.kind for e in whole][-2:] == ["malformed", "event"]
    for cut in range(0, len(body), 37):
        decoder = EventStreamDecoder(keep_raw=True)
        got = decoder.feed(body[:cut]) + decoder.feed(body[cut:])
        assert [(e.raw, e.kind, e.type) for e in got] == [(e.raw, e.kind, e.type) for e in whole]


def test_raw_mode_stops_at_a_prelude_it_cannot_read_past_and_keeps_the_rest():
    good = event("messageStart", b"{}")
    rest = corrupt(event("contentBlockDelta", b"{}"), 2) + good
    decoder = EventStreamDecoder(keep_raw=True)
    assert [e.raw for e in decoder.feed(good + rest)] == [good]
    assert decoder.broken and "CRC" in decoder.broken and decoder.pending == len(rest)
    assert decoder.feed(good) == []  # nothing more is framed past it
    decoder.close()
    assert decoder.rest == rest + good


def test_raw_mode_an_oversized_frame_stops_the_framing_instead_of_dropping_it():
    big = event("contentBlockDelta", b"x" * 500)
    decoder = EventStreamDecoder(100, keep_raw=True)
    assert decoder.feed(big) == [] and "over the 100 cap" in decoder.broken
    decoder.close()
    assert decoder.rest == big


# -- what a mutation run found untested -----------------------------------------------------------------------


def test_garbage_at_the_end_is_one_malformed_event_not_an_unfinished_message():
    # The bytes left while looking for a prelude belong to the malformed region already reported.
    decoder = EventStreamDecoder()
    events = decoder.feed(A + b"this is not a frame, nor the start of one") + decoder.close()
    assert [e.kind for e in events] == ["event", "malformed"] and decoder.incomplete_bytes == 0


def test_looking_for_a_prelude_holds_at_most_eleven_bytes_however_fed():
    decoder = EventStreamDecoder()
    events = []
    held = []
    for byte in random.Random(3).randbytes(2000):
        events.extend(decoder.feed(bytes([byte])))
        held.append(decoder.pending)
    assert [e.kind for e in events] == ["malformed"] and max(held) == 11


@pytest.mark.parametrize(
    "smallest",
    [frame(b"", b""), frame({":event-type": "ping"}, b"")],
    ids=["no headers, no payload", "headers, no payload"],
)
def test_decoding_resynchronises_on_a_message_with_nothing_after_its_headers(smallest):
    events = decode(corrupt(A, 2) + smallest)
    assert [e.kind for e in events] == ["malformed", "event"]
    assert events[1] == decode(smallest)[0]


def test_a_prelude_with_impossible_lengths_is_part_of_the_region_being_skipped():
    impossible = frame(string_header(":event-type", "chunk"), b"", total=17)  # valid CRC, headers too long
    events = decode(corrupt(A, 2) + impossible + B)
    assert [e.kind for e in events] == ["malformed", "event"] and events[1].data == PAYLOAD_B


@pytest.mark.parametrize("keep_raw", [False, True], ids=["plain", "raw"])
def test_unparsable_headers_keep_the_message_bytes_only_in_raw_mode(keep_raw):
    bad = frame(header("x", 10, b""), b"{}")
    events = EventStreamDecoder(keep_raw=keep_raw).feed(bad + A)
    assert [(e.type, e.kind) for e in events] == [
        ("malformed-frame", "malformed"),
        ("contentBlockDelta", "event"),
    ]
    assert [e.raw for e in events] == ([bad, A] if keep_raw else [None, None])


def test_a_message_of_another_type_is_named_by_its_event_type():
    message = frame({":message-type": "future-kind", ":event-type": "hello"}, b"{}")
    assert decode(message) == [SseEvent("hello", b"{}", None, "future-kind")]


def test_raw_mode_a_message_of_exactly_the_cap_is_framed():
    decoder = EventStreamDecoder(len(A), keep_raw=True)
    assert [e.raw for e in decoder.feed(A + A)] == [A, A] and decoder.broken is None
