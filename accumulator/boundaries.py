"""Hostile cut points of a stream's bytes: where a reader that assumes whole lines, whole fields or whole
characters per read goes wrong. The fake provider writes at them and the ``rechunk`` injection sends them."""

from __future__ import annotations

import re

# Inside an SSE field name or just after its colon ("d|ata:", "data|:", "data:| "), inside a multi-byte
# UTF-8 character (between its lead byte and each continuation byte), and between CR and LF.
_FIELD = re.compile(rb"(?:^|(?<=[\r\n]))(?:data|event|id)(?=:)", re.MULTILINE)
_CONTINUATION = re.compile(rb"[\x80-\xbf]")
_CRLF = re.compile(rb"\r(?=\n)")


def hostile_cuts(data: bytes) -> list[int]:
    """The positions (0 < p < len(data), ascending, unique) at which to cut ``data`` into hostile pieces."""
    cuts: set[int] = set()
    for match in _FIELD.finditer(data):
        start, end = match.span()
        cuts.update((start + 1, end, end + 1))
    for match in _CONTINUATION.finditer(data):
        position = match.start()
        if position and data[position - 1] >= 0x80:  # a continuation after a lead or continuation byte
            cuts.add(position)
    for match in _CRLF.finditer(data):
        cuts.add(match.end())
    return sorted(p for p in cuts if 0 < p < len(data))


def cut(data: bytes, positions: list[int]) -> list[bytes]:
    """``data`` split at ``positions`` (ascending); the pieces join back to ``data``, none is empty."""
    pieces = []
    start = 0
    for position in positions:
        if start < position < len(data):
            pieces.append(data[start:position])
            start = position
    if start < len(data):
        pieces.append(data[start:])
    return pieces
