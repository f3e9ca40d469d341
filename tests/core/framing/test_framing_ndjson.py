"""NDJSON framing: one event per line, and the same events however the bytes are cut."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streams import DATA, assert_every_cut_agrees, assert_nearby_cut_pairs_agree, framed, pieces_at

from accumulator.framing import SseEvent
from accumulator.framing.ndjson import NdjsonDecoder
from accumulator.framing.sse import OVERSIZED

OLLAMA = (DATA / "ollama_chat_parallel.ndjson").read_bytes()


def decode(*chunks: bytes, max_event_bytes: int | None = None) -> list[SseEvent]:
    return framed(NdjsonDecoder(max_event_bytes) if max_event_bytes else NdjsonDecoder(), *chunks)


STREAMS = [
    ("ollama_chat_parallel.ndjson", OLLAMA),
    ("crlf_and_blank_lines", OLLAMA.replace(b"\n", b"\r\n\r\n \t\r\n")),
    ("bom_and_no_final_lf", b"\xef\xbb\xbf" + OLLAMA.rstrip(b"\n")),
    ("oversized_line_between", b'{"a":1}\n' + b"x" * 300 + b'\r\n{"b":2}\r\n  \n{"c":3}'),
]


def test_the_ollama_example_is_one_event_per_line():
    events = decode(OLLAMA)
    assert [e.data for e in events] == OLLAMA.splitlines()
    assert all(e.type is None and e.id is None and e.kind == "event" for e in events)
    calls = [
        c["function"]["name"] for e in events for c in orjson.loads(e.data)["message"].get("tool_calls", [])
    ]
    assert calls == ["get_weather", "get_time"]
    assert orjson.loads(events[-1].data)["done"] is True


@pytest.mark.parametrize("name,body", STREAMS, ids=[n for n, _ in STREAMS])
def test_every_split_point_gives_the_same_events(name, body):
    assert_every_cut_agrees(lambda *c: decode(*c, max_event_bytes=256), body, name)


@pytest.mark.parametrize("name,body", STREAMS, ids=[n for n, _ in STREAMS])
def test_every_pair_of_split_points_on_a_short_prefix(name, body):
    assert_nearby_cut_pairs_agree(lambda *c: decode(*c, max_event_bytes=256), body, span=200, gap=8)


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(STREAMS),
    st.lists(st.integers(min_value=0, max_value=1 << 16), max_size=40),
    st.sampled_from([b"\n", b"\r\n", b"\n\n", b"\r\n \r\n"]),
)
def test_random_chunkings_and_line_ends_give_the_same_events(stream, cuts, newline):
    _, body = stream
    body = body.replace(b"\r\n", b"\n").replace(b"\n", newline)
    whole = decode(body, max_event_bytes=256)
    pieces = pieces_at(body, cuts)
    assert decode(*pieces, max_event_bytes=256) == whole


def test_lf_and_crlf_line_ends_are_equal_and_the_cr_is_stripped():
    lf = b'{"a":1}\n{"b":2}\n'
    assert decode(lf) == decode(lf.replace(b"\n", b"\r\n"))
    assert [e.data for e in decode(lf)] == [b'{"a":1}', b'{"b":2}']


def test_crlf_split_across_chunks_is_one_line_end():
    assert [e.data for e in decode(b'{"a":1}\r', b'\n{"b":2}\r\n')] == [b'{"a":1}', b'{"b":2}']


def test_only_one_cr_is_stripped_and_a_lone_cr_ends_no_line():
    events = decode(b"a\r\r\nb\rc\n")
    assert [e.data for e in events] == [b"a\r", b"b\rc"]


def test_blank_and_whitespace_only_lines_are_skipped():
    events = decode(b'\n\r\n   \n\t\r\n{"a":1}\n \n\n{"b":2}\n\n')
    assert [e.data for e in events] == [b'{"a":1}', b'{"b":2}']


def test_a_line_keeps_its_inner_and_surrounding_spaces():
    # The line is the event; JSON parsers ignore the spaces, and nothing is lost for a malformed report.
    assert decode(b'  {"a": 1}  \n') == [SseEvent(None, b'  {"a": 1}  ', None)]


@pytest.mark.parametrize("cut", [1, 2, 3, 4])
def test_leading_bom_is_stripped_even_when_split(cut):
    body = b'\xef\xbb\xbf{"a":1}\n'
    assert decode(body[:cut], body[cut:]) == [SseEvent(None, b'{"a":1}', None)]


def test_a_body_shorter_than_a_bom_is_still_read():
    assert [e.data for e in decode(b"\xef\xbb")] == [b"\xef\xbb"]
    assert decode(b"\xef\xbb\xbf") == []


def test_lines_are_not_parsed_here():
    events = decode(b"not json\n\xff\xfe\n[DONE]\n")
    assert [e.data for e in events] == [b"not json", b"\xff\xfe", b"[DONE]"]


def test_partial_line_is_carried_across_chunks():
    events = decode(b'{"x"', b": 1", b"}", b"\n", b"\n")
    assert [e.data for e in events] == [b'{"x": 1}']


def test_unterminated_last_line_is_read_at_close_and_flagged():
    decoder = NdjsonDecoder()
    assert decoder.feed(b'{"a":1}\n{"b"') == [SseEvent(None, b'{"a":1}', None)]
    assert decoder.close() == [SseEvent(None, b'{"b"', None)]
    assert decoder.unterminated
    assert decoder.close() == []
    for ending in (b'{"a":1}\n', b'{"a":1}\n  ', b'{"a":1}\r\n\r\n'):
        decoder = NdjsonDecoder()
        decoder.feed(ending)
        assert decoder.close() == [] and not decoder.unterminated, ending


def test_oversized_line_is_dropped_and_decoding_resumes_after_its_lf():
    body = b'{"a":1}\n' + b"x" * 500 + b'\n{"b":2}\n'
    events = decode(body, max_event_bytes=100)
    assert events == [SseEvent(None, b'{"a":1}', None), OVERSIZED, SseEvent(None, b'{"b":2}', None)]
    assert events[1] is OVERSIZED


@pytest.mark.parametrize("ending", [b"\n", b"\r\n"])
def test_a_line_of_exactly_the_cap_is_kept_and_one_byte_more_is_not(ending):
    for size, kept in ((100, True), (101, False)):
        body = b"y" * size + ending + b"z\n"
        for cut in range(len(body) + 1):
            events = decode(body[:cut], body[cut:], max_event_bytes=100)
            assert (events[0] is not OVERSIZED) is kept and events[1:] == [SseEvent(None, b"z", None)]


def test_a_whitespace_only_line_over_the_cap_is_oversized_too():
    # Cut anywhere, the decoder cannot know the line is blank before it is over the cap.
    assert decode(b" " * 200 + b"\na\n", max_event_bytes=100) == [OVERSIZED, SseEvent(None, b"a", None)]


@pytest.mark.parametrize("step", [1, 7, 64])
def test_a_long_line_is_dropped_without_buffering_it(step):
    body = b'{"a":1}\n' + b"q" * 5000 + b'\n{"b":2}\n'
    decoder = NdjsonDecoder(1000)
    events = []
    for i in range(0, len(body), step):
        events.extend(decoder.feed(body[i : i + step]))
        # At most the cap, and one more byte when that byte is a CR that may end the line.
        assert decoder._lines.pending_len <= 1000 + 1
    events.extend(decoder.close())
    assert [e.data for e in events if e is not OVERSIZED] == [b'{"a":1}', b'{"b":2}']
    assert sum(e is OVERSIZED for e in events) == 1


def test_oversized_line_ending_exactly_at_a_chunk_boundary_is_dropped_whole():
    decoder = NdjsonDecoder(100)
    events = decoder.feed(b"z" * 200)
    events += decoder.feed(b"zz\nnext\n")
    assert events == [OVERSIZED, SseEvent(None, b"next", None)]


def test_oversized_last_line_without_lf_is_not_dispatched_at_close():
    decoder = NdjsonDecoder(10)
    events = decoder.feed(b"a\n" + b"b" * 50) + decoder.close()
    assert events == [SseEvent(None, b"a", None), OVERSIZED] and not decoder.unterminated


@pytest.mark.heavy
def test_one_megabyte_line_fed_one_byte_at_a_time_stays_linear():
    # With quadratic buffering (re-joining the pending line per byte) this takes hours, not a second.
    body = b'{"s":"' + b"q" * (1 << 20) + b'"}\n'
    decoder = NdjsonDecoder()
    feed = decoder.feed
    events = []
    for i in range(len(body)):
        events.extend(feed(body[i : i + 1]))
    assert len(events) == 1 and len(events[0].data) == len(body) - 1


# -- what a mutation run found untested -----------------------------------------------------------------------


def test_a_line_of_other_control_whitespace_is_not_blank():
    # Only JSON's whitespace makes a line blank; a form feed or vertical tab is a line for the dialect.
    decoder = NdjsonDecoder()
    assert decoder.feed(b'{"a":1}\n\x0b\n') == [
        SseEvent(None, b'{"a":1}', None),
        SseEvent(None, b"\x0b", None),
    ]
    assert decoder.close() == [] and not decoder.unterminated
    decoder = NdjsonDecoder()
    assert decoder.feed(b"\x0c") == [] and decoder.close() == [SseEvent(None, b"\x0c", None)]
    assert decoder.unterminated
