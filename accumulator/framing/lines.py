"""The one line buffer of every line framer (SSE, NDJSON, and SSE in the rewriter's raw mode): it owns the
line not yet ended, a CR whose LF may come in the next chunk, and dropping a line over the cap. Each byte
is examined a bounded number of times however the input is cut (tests/core/test_linearity.py measures
the bytes it copies from outside)."""

from __future__ import annotations

import re

_LINE_END = re.compile(rb"\r\n|\r|\n")
_LINE_END_KEPT = re.compile(rb"(\r\n|\r|\n)")


class LineBuffer:
    """Feed chunks, get the lines they complete.

    ``cr``: a CR alone ends a line too (SSE, per WHATWG); else only LF does, and a CR before it stays on
    the line for the framer to strip (NDJSON). ``raw``: lines keep their line ends, a CR at the end of a
    chunk waits for the next byte (it may be the first half of a CRLF), and nothing is ever dropped.
    """

    __slots__ = ("_after_cr", "_cr", "_raw", "pending", "pending_len", "skipping")

    def __init__(self, *, cr: bool, raw: bool = False) -> None:
        self._cr = cr
        self._raw = raw
        # The line not yet ended. A bytearray, not a list of pieces: a line dripping in byte by byte
        # then costs its bytes, not a list slot and a join buffer per piece.
        self.pending = bytearray()
        self.pending_len = 0
        self._after_cr = False  # the last chunk ended in CR: a leading LF in the next one ends nothing
        self.skipping = False  # dropping the rest of a line that alone exceeded the cap

    def split(self, chunk: bytes) -> list:
        """The lines this chunk completes, without their line ends (raw: with them). The first is None
        when it only ends a line being dropped. The unfinished rest is held."""
        if self._raw:
            return self._split_raw(chunk)
        if self._after_cr:
            self._after_cr = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
                if not chunk:
                    return []
        # 0x0D, not b"\r": bytes.__contains__ first tries its argument as an int, and for a bytes
        # argument raises and clears a TypeError inside, ten times the cost of the scan (CPython 3.12).
        if self._cr and 0x0D in chunk:
            lines = _LINE_END.split(chunk)
            if chunk[-1] == 0x0D:
                self._after_cr = True
        else:
            lines = chunk.split(b"\n")
        tail = lines.pop()
        if lines:
            if self.skipping:
                self.skipping = False
                lines[0] = None
            elif self.pending_len:
                pending = self.pending
                pending += lines[0]
                lines[0] = bytes(pending)
                self.pending = bytearray()
                self.pending_len = 0
        if tail and not self.skipping:
            self.pending += tail
            self.pending_len += len(tail)
        return lines

    def drop(self) -> None:
        """The held line is over the cap: forget it, and the rest of it as it arrives."""
        self.pending = bytearray()
        self.pending_len = 0
        self.skipping = True

    def close(self) -> bytes:
        """End of input: the unfinished line (b"" if none, or if it was being dropped)."""
        rest = b"" if self.skipping else bytes(self.pending)
        self.pending = bytearray()
        self.pending_len = 0
        self.skipping = False
        return rest

    def _split_raw(self, chunk: bytes) -> list:
        pieces = _LINE_END_KEPT.split(chunk)  # line, end, line, end, ..., rest
        lines = []
        i = 0
        last = len(pieces) - 1
        if self.pending_len:
            if self.pending[-1] == 0x0D and (chunk[:1] != b"\n"):
                lines.append(bytes(self.pending))  # a CR that ended its line: no LF came
                self.pending = bytearray()
                self.pending_len = 0
            elif last:
                first = self.pending
                first += pieces[0]
                first += pieces[1]
                lines.append(bytes(first))
                self.pending = bytearray()
                self.pending_len = 0
                i = 2
        while i < last:
            lines.append(pieces[i] + pieces[i + 1])
            i += 2
        rest = pieces[last]
        if not rest and last and lines and lines[-1][-1:] == b"\r" and i == last:
            # A CR last: it may be the first half of a CRLF; the line waits for the next byte.
            rest = lines.pop()
        if rest:
            self.pending += rest
            self.pending_len += len(rest)
        return lines
