"""Newline-delimited JSON (Ollama's native ``/api/chat``), one value per line, decoded incrementally.

Lines end in LF or CRLF; blank lines are skipped; the JSON itself is left to the dialect. The unfinished
line is kept in a bytearray that grows in place until its LF arrives, so work stays O(bytes).
"""

from __future__ import annotations

from .payload import strip_bom
from .sse import DEFAULT_MAX_EVENT_BYTES, OVERSIZED, SseEvent

_BLANK = b" \t\r\n"


class NdjsonDecoder:
    """Feed bytes, get one event per non-blank line. Never raises on any input."""

    __slots__ = ("_head", "_in_long_line", "_pending", "_pending_len", "max_event_bytes", "unterminated")

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self.max_event_bytes = max_event_bytes
        self.unterminated = False  # set by close() when the last line had no LF
        self._head: bytes | None = b""  # first bytes, until we know whether they start with a BOM
        # The line not yet ended. A bytearray, not a list of pieces: a line dripping in byte by byte
        # then costs its bytes, not a list slot and a join buffer per piece.
        self._pending = bytearray()
        self._pending_len = 0
        self._in_long_line = False  # dropping the rest of a line that alone exceeded the cap

    def feed(self, chunk: bytes) -> list[SseEvent]:
        out: list[SseEvent] = []
        if self._head is not None:
            self._head, chunk = strip_bom(self._head, chunk)
        if not chunk:
            return out
        lines = chunk.split(b"\n")
        tail = lines.pop()
        if lines:
            first = 0
            if self._in_long_line:
                # The first "line" is the end of a line already dropped for its size.
                self._in_long_line = False
                first = 1
            elif self._pending:
                self._pending += lines[0]
                lines[0] = bytes(self._pending)
                self._pending = bytearray()
                self._pending_len = 0
            line_fn = self._line
            for i in range(first, len(lines)):
                line_fn(lines[i], out)
        if tail and not self._in_long_line:
            self._pending += tail
            self._pending_len += len(tail)
            over = self._pending_len - self.max_event_bytes
            # One byte over is still fine when it is a CR: the line may be exactly the cap plus CRLF.
            if over > 1 or (over == 1 and tail[-1] != 0x0D):
                self._pending = bytearray()
                self._pending_len = 0
                self._in_long_line = True
                out.append(OVERSIZED)
        return out

    def close(self) -> list[SseEvent]:
        """End of input. A last line without its LF is still dispatched, and ``unterminated`` is set."""
        out: list[SseEvent] = []
        if self._head:
            head, self._head = self._head, None
            self._pending += head
        if self._pending and not self._in_long_line:
            line = bytes(self._pending)
            self._pending = bytearray()
            self._pending_len = 0
            if line.strip(_BLANK):
                self.unterminated = True
            self._line(line, out)
        return out

    def _line(self, line: bytes, out: list[SseEvent]) -> None:
        if line[-1:] == b"\r":
            line = line[:-1]
        if len(line) > self.max_event_bytes:
            out.append(OVERSIZED)
        elif line.strip(_BLANK):
            out.append(SseEvent(None, line, None))
