"""Newline-delimited JSON (Ollama's native ``/api/chat``), one value per line, decoded incrementally.

Lines end in LF or CRLF; blank lines are skipped; the JSON itself is left to the dialect. Lines come from
the shared ``LineBuffer``, so work stays O(bytes) however the input is cut.
"""

from __future__ import annotations

from .base import DEFAULT_MAX_EVENT_BYTES, OVERSIZED, FramedEvent
from .lines import LineBuffer
from .payload import strip_bom

_BLANK = b" \t\r\n"


class NdjsonDecoder:
    """Feed bytes, get one event per non-blank line (the ``Framer`` contract). Never raises on any input."""

    __slots__ = ("_head", "_lines", "max_event_bytes", "unterminated")

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self.max_event_bytes = max_event_bytes
        self.unterminated = False  # set by close() when the last line had no LF
        self._head: bytes | None = b""  # first bytes, until we know whether they start with a BOM
        self._lines = LineBuffer(cr=False)  # only LF ends a line; a CR before it is stripped here

    def feed(self, chunk: bytes) -> list[FramedEvent]:
        out: list[FramedEvent] = []
        if self._head is not None:
            self._head, chunk = strip_bom(self._head, chunk)
        if not chunk:
            return out
        buffer = self._lines
        line_fn = self._line
        for line in buffer.split(chunk):
            if line is not None:  # None: the end of a line already dropped for its size
                line_fn(line, out)
        over = buffer.pending_len - self.max_event_bytes
        # One byte over is still fine when it is a CR: the line may be exactly the cap plus CRLF.
        if over > 1 or (over == 1 and buffer.pending[-1] != 0x0D):
            buffer.drop()
            out.append(OVERSIZED)
        return out

    def close(self) -> list[FramedEvent]:
        """End of input. A last line without its LF is still dispatched, and ``unterminated`` is set."""
        out: list[FramedEvent] = []
        if self._head:
            head, self._head = self._head, None
            self._lines.split(head)
        line = self._lines.close()
        if line:
            if line.strip(_BLANK):
                self.unterminated = True
            self._line(line, out)
        return out

    def _line(self, line: bytes, out: list[FramedEvent]) -> None:
        if line[-1:] == b"\r":
            line = line[:-1]
        if len(line) > self.max_event_bytes:
            out.append(OVERSIZED)
        elif line.strip(_BLANK):
            out.append(FramedEvent(None, line, None))
