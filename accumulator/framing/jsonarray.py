"""A JSON array written progressively (Gemini ``streamGenerateContent`` without ``alt=sse``), by element.

Strings, escapes and nesting depth are tracked across chunks, never by splitting on lines; an element's
bytes grow in one bytearray until its last byte arrives, so work stays O(bytes).
"""

from __future__ import annotations

import re

from .base import DEFAULT_MAX_EVENT_BYTES, OVERSIZED, FramedEvent
from .payload import strip_bom

_WS = b" \t\r\n"
_NOT_WS = re.compile(rb"[^ \t\r\n]")
_NOT_SEPARATOR = re.compile(rb"[^ \t\r\n,]")
_STRUCTURAL = re.compile(rb'["{}\[\]]')
_STRING_SPECIAL = re.compile(rb'["\\]')
_SCALAR_END = re.compile(rb'[ \t\r\n,{\["\]]')

# The closing ``]`` of the top-level array.
ARRAY_END = FramedEvent("array-end", b"", None)

# Where the decoder is. Inside an element: _NESTED, _STRING (in a string at any depth) or _SCALAR.
_START, _TOP, _NESTED, _STRING, _SCALAR, _END, _TRAILING, _DONE = range(8)


class JsonArrayDecoder:
    """Feed bytes, get each top-level element's raw bytes. Never raises on any input."""

    __slots__ = (
        "_depth",
        "_discarding",
        "_escape",
        "_head",
        "_in_array",
        "_pending",
        "_size",
        "_state",
        "max_event_bytes",
        "unterminated",
    )

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self.max_event_bytes = max_event_bytes
        self.unterminated = False  # set by close() when the input ended inside an element
        self._head: bytes | None = b""  # first bytes, until we know whether they start with a BOM
        self._state = _START
        self._in_array = False  # False: the body is one bare object (an error body), not an array
        self._depth = 0  # of the element in progress; 0 inside a string means a top-level string
        self._escape = False  # the last chunk ended on a backslash inside a string
        # The element (or trailing run) in progress: one bytearray grown in place, never pieces re-joined.
        self._pending = bytearray()
        self._size = 0
        self._discarding = False  # inside an element already dropped for its size

    def feed(self, chunk: bytes) -> list[FramedEvent]:
        out: list[FramedEvent] = []
        if self._head is not None:
            self._head, chunk = strip_bom(self._head, chunk)
        if chunk:
            self._scan(chunk, out)
        return out

    def close(self) -> list[FramedEvent]:
        """End of input. An unfinished element is still dispatched, and ``unterminated`` is set."""
        out: list[FramedEvent] = []
        if self._head:
            head, self._head = self._head, None
            self._scan(head, out)
        self._head = None
        state = self._state
        if self._pending and not self._discarding:
            data = bytes(self._pending)
            if state == _TRAILING:
                out.append(FramedEvent(None, data.rstrip(_WS), None))
            elif state != _DONE:
                self.unterminated = True
                out.append(FramedEvent(None, data, None))
        self._pending = bytearray()
        self._size = 0
        self._discarding = False
        self._state = _DONE
        return out

    def _scan(self, chunk: bytes, out: list[FramedEvent]) -> None:
        n = len(chunk)
        pos = 0
        start = 0  # where the element in progress begins in this chunk (0: it began earlier)
        state = self._state
        depth = self._depth
        while pos < n:
            if state == _NESTED:
                m = _STRUCTURAL.search(chunk, pos)
                if m is None:
                    break
                pos = m.end()
                c = chunk[pos - 1]
                if c == 0x22:
                    state = _STRING
                elif c == 0x7B or c == 0x5B:
                    depth += 1
                else:
                    # Mismatched brackets still count: the dialect reports the element as malformed.
                    depth -= 1
                    if depth == 0:
                        self._element(chunk, start, pos, out)
                        state = _TOP if self._in_array else _END
            elif state == _STRING:
                if self._escape:
                    self._escape = False
                    pos += 1
                    continue
                m = _STRING_SPECIAL.search(chunk, pos)
                if m is None:
                    break
                pos = m.end()
                if chunk[pos - 1] == 0x5C:
                    if pos == n:
                        self._escape = True
                        break
                    pos += 1
                elif depth:
                    state = _NESTED
                else:
                    self._element(chunk, start, pos, out)
                    state = _TOP
            elif state == _TOP:
                m = _NOT_SEPARATOR.search(chunk, pos)
                if m is None:
                    break
                start = m.start()
                pos = start + 1
                c = chunk[start]
                if c == 0x7B or c == 0x5B:
                    depth = 1
                    state = _NESTED
                elif c == 0x22:
                    depth = 0
                    state = _STRING
                elif c == 0x5D:
                    out.append(ARRAY_END)
                    state = _END
                else:
                    # A number, true/false/null, or garbage: a run up to the next delimiter.
                    state = _SCALAR
            elif state == _SCALAR:
                m = _SCALAR_END.search(chunk, pos)
                if m is None:
                    break
                pos = m.start()
                self._element(chunk, start, pos, out)
                state = _TOP
            elif state == _START:
                m = _NOT_WS.search(chunk, pos)
                if m is None:
                    break
                start = m.start()
                pos = start + 1
                c = chunk[start]
                if c == 0x5B:
                    self._in_array = True
                    state = _TOP
                elif c == 0x7B:
                    depth = 1
                    state = _NESTED
                else:
                    # Neither an array nor an object (an HTML error page, say): one run, reported whole.
                    pos = start
                    state = _TRAILING
            elif state == _END:
                m = _NOT_WS.search(chunk, pos)
                if m is None:
                    break
                start = pos = m.start()
                state = _TRAILING
            elif state == _TRAILING:
                room = self.max_event_bytes - self._size
                piece = chunk[start : start + room]
                self._pending += piece
                self._size += len(piece)
                if self._size >= self.max_event_bytes:
                    out.append(FramedEvent(None, bytes(self._pending), None))
                    self._pending = bytearray()
                    self._size = 0
                    state = _DONE
                break
            else:  # _DONE: nothing after the end matters any more
                break
        if (state == _NESTED or state == _STRING or state == _SCALAR) and not self._discarding:
            piece = chunk[start:]
            self._size += len(piece)
            if self._size > self.max_event_bytes:
                self._pending = bytearray()
                self._size = 0
                self._discarding = True
                out.append(OVERSIZED)
            else:
                self._pending += piece
        self._state = state
        self._depth = depth

    def _element(self, chunk: bytes, start: int, end: int, out: list[FramedEvent]) -> None:
        if self._discarding:
            self._discarding = False
        elif self._size + end - start > self.max_event_bytes:
            out.append(OVERSIZED)
        elif self._pending:
            self._pending += chunk[start:end]
            out.append(FramedEvent(None, bytes(self._pending), None))
        else:
            out.append(FramedEvent(None, chunk[start:end], None))
        self._pending = bytearray()
        self._size = 0
