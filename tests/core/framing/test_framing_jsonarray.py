"""JSON-array framing (Gemini without ``alt=sse``): each element's raw bytes, however the bytes are cut."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streams import DATA, assert_every_cut_agrees, assert_nearby_cut_pairs_agree, framed, pieces_at

from accumulator.framing import SseEvent
from accumulator.framing.jsonarray import ARRAY_END, JsonArrayDecoder
from accumulator.framing.sse import OVERSIZED

GEMINI = (DATA / "gemini_parallel.json").read_bytes()
END = SseEvent("array-end", b"", None)
# Strings holding every character the decoder counts, escaped quotes and backslashes, scalars, nesting.
TRICKY = (
    b'[ {"a": "]},[{\\"", "b": "\\\\", "c": [1, {"d": "}"}], "e": "\\\\\\""} ,\n'
    b'"str ] } , \\" [", -12.5e3, true, null, false, [[], {}], {}\n]'
)
TRICKY_ELEMENTS = [
    b'{"a": "]},[{\\"", "b": "\\\\", "c": [1, {"d": "}"}], "e": "\\\\\\""}',
    b'"str ] } , \\" ["',
    b"-12.5e3",
    b"true",
    b"null",
    b"false",
    b"[[], {}]",
    b"{}",
]


def decode(*chunks: bytes, max_event_bytes: int | None = None) -> list[SseEvent]:
    return framed(JsonArrayDecoder(max_event_bytes) if max_event_bytes else JsonArrayDecoder(), *chunks)


def compact(body: bytes) -> bytes:
    return orjson.dumps(orjson.loads(body))


STREAMS = [
    ("gemini_parallel.json", GEMINI),
    ("compact", compact(GEMINI)),
    ("lf_and_bom", b"\xef\xbb\xbf \r\n" + GEMINI.replace(b"\r\n", b"\n")),
    ("tricky", TRICKY),
    ("error_object", b' {"error": {"code": 429, "message": "Resource exhausted [x]", "status": "X"}}\n'),
    ("garbage_and_trailer", b'[{"a": 1}, oops!, {"b": "}"}\r\n] trailing [junk]\n'),
    ("oversized_between", b'[{"a": 1}, {"big": "' + b"w" * 300 + b'", "n": [[{}]]}, {"b": 2}]'),
    ("unterminated", b'[{"a": 1},\n{"b": [1, "\\"'),
]


def test_the_gemini_example_yields_each_element_then_the_array_end():
    events = decode(GEMINI)
    assert events[-1] == END and events[-1] == ARRAY_END
    elements = events[:-1]
    assert len(elements) == 4
    for e in elements:
        # The exact raw bytes: from the first to the last byte of the element, no CRLF or comma around it.
        assert e.type is None and e.data[:1] == b"{" and e.data[-1:] == b"}" and e.data in GEMINI
    assert [orjson.loads(e.data) for e in elements] == orjson.loads(GEMINI)
    calls = [
        part["functionCall"]["name"]
        for e in elements
        for part in orjson.loads(e.data)["candidates"][0]["content"]["parts"]
        if "functionCall" in part
    ]
    assert calls == ["get_weather", "get_time"]


@pytest.mark.parametrize("name,body", STREAMS, ids=[n for n, _ in STREAMS])
def test_every_split_point_gives_the_same_events(name, body):
    assert_every_cut_agrees(lambda *c: decode(*c, max_event_bytes=256), body, name)


@pytest.mark.parametrize("name,body", STREAMS, ids=[n for n, _ in STREAMS])
def test_every_pair_of_split_points_on_a_short_prefix(name, body):
    # Two cuts close together split an escape, a BOM, or a string's end over three chunks.
    assert_nearby_cut_pairs_agree(lambda *c: decode(*c, max_event_bytes=256), body, span=160, gap=6)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(STREAMS), st.lists(st.integers(min_value=0, max_value=1 << 16), max_size=40))
def test_random_chunkings_give_the_same_events(stream, cuts):
    _, body = stream
    whole = decode(body, max_event_bytes=256)
    pieces = pieces_at(body, cuts)
    assert decode(*pieces, max_event_bytes=256) == whole


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300), st.lists(st.integers(min_value=0, max_value=300), max_size=10))
def test_any_bytes_never_raise_and_any_chunking_agrees(body, cuts):
    whole = decode(body, max_event_bytes=64)
    pieces = pieces_at(body, cuts)
    assert decode(*pieces, max_event_bytes=64) == whole


def test_strings_with_brackets_commas_and_escaped_quotes_do_not_end_an_element():
    assert decode(TRICKY) == [SseEvent(None, e, None) for e in TRICKY_ELEMENTS] + [END]
    assert [orjson.loads(e) for e in TRICKY_ELEMENTS] == orjson.loads(TRICKY)


def test_crlf_and_commas_around_elements_are_not_part_of_them():
    events = decode(b'[{"a":1}\r\n,\r\n{"b":2}\r\n]')
    assert [e.data for e in events] == [b'{"a":1}', b'{"b":2}', b""]


def test_empty_array():
    assert decode(b"[]") == [END]
    assert decode(b" [ \r\n ] \n") == [END]


@pytest.mark.parametrize("cut", [1, 2, 3, 4, 5])
def test_leading_bom_and_whitespace_are_skipped_even_when_split(cut):
    body = b'\xef\xbb\xbf \n[{"a":1}]'
    assert decode(body[:cut], body[cut:]) == [SseEvent(None, b'{"a":1}', None), END]


def test_an_error_object_body_is_a_single_element_without_array_end():
    body = (
        b'{\n  "error": {\n    "code": 400,\n    "message": "bad [request] {x}",\n    "status": "X"\n  }\n}\n'
    )
    events = decode(body)
    assert events == [SseEvent(None, body.rstrip(b"\n"), None)]
    decoder = JsonArrayDecoder()
    assert decoder.feed(body[:-3]) == []  # not before its matching brace
    assert decoder.feed(body[-3:]) == events and decoder.close() == [] and not decoder.unterminated


def test_whitespace_after_the_array_end_is_ignored():
    assert decode(b'[{"a":1}]\r\n \n') == [SseEvent(None, b'{"a":1}', None), END]


def test_bytes_after_the_array_end_are_reported_once():
    events = decode(b'[{"a":1}] extra, {"b": 2}\n [more] \n')
    assert events == [
        SseEvent(None, b'{"a":1}', None),
        END,
        SseEvent(None, b'extra, {"b": 2}\n [more]', None),
    ]


def test_bytes_after_the_end_are_reported_up_to_the_cap_then_ignored():
    decoder = JsonArrayDecoder(50)
    events = decoder.feed(b"[] " + b"x" * 40)
    assert events == [END]
    events = decoder.feed(b"y" * 40)
    assert events == [SseEvent(None, b"x" * 40 + b"y" * 10, None)]
    assert decoder.feed(b"z" * 1000) == [] and decoder.close() == []


def test_bytes_after_an_error_object_are_reported_once():
    assert decode(b'{"error": 1} junk') == [
        SseEvent(None, b'{"error": 1}', None),
        SseEvent(None, b"junk", None),
    ]


def test_a_body_that_is_neither_array_nor_object_is_reported_whole():
    body = b"\n<html><body>Service Unavailable, try later</body></html>\n"
    assert decode(body) == [SseEvent(None, body.strip(), None)]


def test_garbage_at_the_top_level_is_an_element_of_its_own():
    events = decode(b'[{"a":1}, oops!, 42\n, "s", {"b":2} ]')
    assert [e.data for e in events] == [b'{"a":1}', b"oops!", b"42", b'"s"', b'{"b":2}', b""]
    assert events[-1] == END


def test_mismatched_brackets_still_end_an_element_at_depth_zero():
    # The dialect reports the bytes as malformed JSON; framing only needs to end the element somewhere.
    assert [e.data for e in decode(b'[{"a": [1}, {"b": 2}]')] == [b'{"a": [1}, {"b": 2}]']


def test_oversized_element_is_dropped_and_the_next_one_decodes():
    big = b'{"s": "' + b"}]" * 200 + b'", "n": {"m": [1, 2]}}'
    events = decode(b'[{"a":1}, ' + big + b', {"b":2}]', max_event_bytes=100)
    assert events == [SseEvent(None, b'{"a":1}', None), OVERSIZED, SseEvent(None, b'{"b":2}', None), END]
    assert events[1] is OVERSIZED


@pytest.mark.parametrize("kind", [b"{}", b'""', b"1"])
def test_an_element_of_exactly_the_cap_is_kept_and_one_byte_more_is_not(kind):
    def element(size: int) -> bytes:
        return kind[:1] + b"7" * (size - 2) + kind[1:] if len(kind) == 2 else b"7" * size

    for size, kept in ((50, True), (51, False)):
        body = b"[" + element(size) + b", 0]"
        for cut in range(len(body) + 1):
            events = decode(body[:cut], body[cut:], max_event_bytes=50)
            assert (events[0] is not OVERSIZED) is kept, (size, cut)
            assert events[1:] == [SseEvent(None, b"0", None), END]


@pytest.mark.parametrize("step", [1, 7, 64])
def test_a_long_element_is_dropped_without_buffering_it(step):
    body = b'[{"a":1},{"s":"' + b'\\"{[' * 2000 + b'"},{"b":2}]'
    decoder = JsonArrayDecoder(1000)
    events = []
    for i in range(0, len(body), step):
        events.extend(decoder.feed(body[i : i + step]))
        assert len(decoder._pending) <= 1000  # never holds more than the cap
    events.extend(decoder.close())
    assert events == [SseEvent(None, b'{"a":1}', None), OVERSIZED, SseEvent(None, b'{"b":2}', None), END]


def test_unterminated_element_is_read_at_close_and_flagged():
    decoder = JsonArrayDecoder()
    assert decoder.feed(b'[{"a":1},\r\n{"b": "x\\') == [SseEvent(None, b'{"a":1}', None)]
    assert decoder.close() == [SseEvent(None, b'{"b": "x\\', None)]
    assert decoder.unterminated
    assert decoder.close() == []


def test_an_array_cut_between_elements_is_not_flagged_and_has_no_end():
    decoder = JsonArrayDecoder()
    events = decoder.feed(b'[{"a":1},\r\n') + decoder.close()
    assert events == [SseEvent(None, b'{"a":1}', None)] and not decoder.unterminated


def test_an_empty_body_yields_nothing():
    assert decode(b"") == [] and decode(b" \r\n") == [] and decode(b"\xef\xbb\xbf") == []


@pytest.mark.heavy
def test_one_megabyte_element_fed_one_byte_at_a_time_stays_linear():
    body = b'[{"s":"' + b"q" * (1 << 20) + b'"}]'
    decoder = JsonArrayDecoder()
    feed = decoder.feed
    events = []
    for i in range(len(body)):
        events.extend(feed(body[i : i + 1]))
    events.extend(decoder.close())
    assert len(events) == 2 and len(events[0].data) == len(body) - 2 and events[1] == END


# -- what a mutation run found untested -----------------------------------------------------------------------


def test_bytes_after_an_error_object_are_not_read_as_more_elements():
    assert decode(b'{"error": 1}, {"x": 2}]') == [
        SseEvent(None, b'{"error": 1}', None),
        SseEvent(None, b', {"x": 2}]', None),
    ]


def test_empty_strings_end_where_they_close_even_the_first_one():
    body = b'[{"":""}, "", {"k": ""}]'
    assert [e.data for e in decode(body)] == [b'{"":""}', b'""', b'{"k": ""}', b""]


@pytest.mark.parametrize("cap", [None, 2])
def test_a_body_of_only_the_first_bytes_of_a_bom_is_read_at_close(cap):
    assert decode(b"\xef\xbb", max_event_bytes=cap) == [SseEvent(None, b"\xef\xbb", None)]


def test_only_json_whitespace_is_trimmed_from_bytes_after_the_end():
    assert decode(b"[] x\x0b\x0c \r\n") == [END, SseEvent(None, b"x\x0b\x0c", None)]
