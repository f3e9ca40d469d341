"""The hostile cut points the fake provider writes at and the ``rechunk`` injection sends, and the cutting."""

from __future__ import annotations

from accumulator.boundaries import cut, hostile_cuts


def test_every_continuation_byte_of_a_character_is_a_cut_whatever_its_value():
    # U+3000 is E3 80 80: the second continuation follows a 0x80.
    assert hostile_cuts("\u3000".encode()) == [1, 2]
    assert hostile_cuts("a€b".encode()) == [2, 3]


def test_a_stray_continuation_byte_after_ascii_is_not_inside_a_character():
    assert hostile_cuts(b"a\x80b\xbf") == []


def test_a_field_name_at_the_very_end_gives_no_cut_at_the_end():
    assert hostile_cuts(b"data:") == [1, 4]
    assert hostile_cuts(b"x\ndata: 1") == [3, 6, 7]


def test_cut_makes_no_empty_piece_and_the_pieces_join_back():
    assert cut(b"abcd", [0, 1, 1, 3, 4, 9]) == [b"a", b"bc", b"d"]
    assert cut(b"", []) == [] and cut(b"", [0]) == []
    assert cut(b"ab", []) == [b"ab"]
