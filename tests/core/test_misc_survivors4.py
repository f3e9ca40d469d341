"""Odds and ends of the core: what a mutation run found untested (the logic survivors of
``accumulator/framing/sse.py``'s raw mode; see docs/mutation.md). Each test was checked by applying the
mutation it guards against to the source by hand and seeing it fail."""

from __future__ import annotations

from accumulator.framing import SseDecoder

# --- SseDecoder._feed_raw: the rewriter's mode, every block with its exact bytes ---------------------------


def raw_events(*chunks: bytes) -> list[tuple]:
    decoder = SseDecoder(keep_raw=True)
    return [(e.kind, e.type, e.data, e.id, e.raw) for chunk in chunks for e in decoder.feed(chunk)]


def test_raw_mode_counts_every_line_of_the_block_waiting():
    # _feed_raw_4 (+= -> =): the rewriter stops a rewrite on ``pending``, an event of many short lines too.
    decoder = SseDecoder(keep_raw=True)
    assert decoder.feed(b"data: aaaa\ndata: bbbb\ndata: c") == []
    assert decoder.pending == 11 + 11 + 7
    decoder.feed(b"c\nid: 1\n")
    assert decoder.pending == 11 + 11 + 9 + 6


def test_raw_mode_keeps_a_data_lines_trailing_blanks_and_a_blank_looking_line_is_no_end():
    # _feed_raw_7 (rstrip(b"\r\n") -> rstrip()): only the line end goes; spaces are the payload's, and a
    # line of spaces is a field line (ignored), not the blank line that ends the block.
    assert raw_events(b"data: a \t\r\n \ndata: b\n\n") == [
        ("event", None, b"a \t\nb", None, b"data: a \t\r\n \ndata: b\n\n")
    ]


def test_raw_mode_strips_a_bom_from_the_first_line_only():
    # _feed_raw_11 (the head forgotten as "" instead of None): a BOM later in the stream is part of the
    # field name, which then names no field.
    bom = b"\xef\xbb\xbf"
    assert raw_events(bom + b"data: a\n\n", bom + b"data: b\n\n") == [
        ("event", None, b"a", None, bom + b"data: a\n\n"),
        ("quiet", None, b"", None, bom + b"data: b\n\n"),
    ]


def test_raw_events_carry_the_last_event_id():
    # _feed_raw_41 (the id left out of a raw event): it persists across events, as in the plain mode.
    assert [e[3] for e in raw_events(b"id: 7\ndata: a\n\n: note\n\ndata: b\n\nid: 8\ndata: c\n\n")] == [
        "7",
        "7",
        "7",
        "8",
    ]
