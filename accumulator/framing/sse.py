"""Server-sent events, decoded per the WHATWG event-stream rules, incrementally.

LF, CRLF and CR line ends (a CRLF may straddle two chunks), comment lines, multi-line ``data:``,
``event:``, ``id:``, a leading BOM. The unfinished line is kept in a bytearray that grows in place until
its end arrives, so work stays O(bytes) however the input is cut. An event larger than the cap is
dropped and decoding resumes after the next blank line.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from .payload import BOM, strip_bom

_LINE_END = re.compile(rb"\r\n|\r|\n")
DEFAULT_MAX_EVENT_BYTES = 8 * 1024 * 1024


class SseEvent(NamedTuple):
    """One framed event. Every framing yields these (NDJSON lines, JSON array elements, AWS frames too)."""

    type: str | None  # the ``event:`` field (AWS: ``:event-type``), None when absent
    data: bytes  # ``data:`` lines joined with LF (other framings: the payload), as raw bytes
    id: str | None  # the last event id, per the spec it persists across events
    kind: str = "event"  # AWS ``:message-type``: "event", "exception" or "error"


_new_event = tuple.__new__  # SseEvent(...) without the Python-level __new__ frame, on the hot path

# Put in the output where an event was dropped for exceeding the cap (compare with ``is``).
OVERSIZED = SseEvent("<oversized>", b"", None)


class SseDecoder:
    """Feed bytes, get whole events. Never raises on any input."""

    __slots__ = (
        "_after_cr",
        "_data",
        "_data_len",
        "_discarding",
        "_head",
        "_in_long_line",
        "_last_id",
        "_pending",
        "_pending_len",
        "_type",
        "max_event_bytes",
        "unterminated",
        "work",
    )

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self.max_event_bytes = max_event_bytes
        self.unterminated = False  # set by close() when the input ended inside an event
        # Bytes examined: each chunk scanned once, each pending line joined once. Tests read it to show
        # the work stays linear in the input however it is cut (a counter, not a timer).
        self.work = 0
        self._head: bytes | None = b""  # first bytes, until we know whether they start with a BOM
        # The line not yet ended. A bytearray, not a list of pieces: a line dripping in byte by byte
        # then costs its bytes, not a list slot and a join buffer per piece.
        self._pending = bytearray()
        self._pending_len = 0
        self._after_cr = False  # last chunk ended in CR: a leading LF in the next one ends nothing
        self._in_long_line = False  # dropping the rest of a line that alone exceeded the cap
        self._data: list[bytes] = []
        self._data_len = 0
        self._type: str | None = None
        self._last_id: str | None = None
        self._discarding = False  # inside an oversized event: ignore lines until a blank one

    def feed(self, chunk: bytes) -> list[SseEvent]:
        out: list[SseEvent] = []
        if self._head is not None:
            self._head, chunk = strip_bom(self._head, chunk)
        if not chunk:
            return out
        self.work += len(chunk)
        if self._after_cr:
            self._after_cr = False
            if chunk[0] == 0x0A:
                chunk = chunk[1:]
                if not chunk:
                    return out
        if b"\r" in chunk:
            lines = _LINE_END.split(chunk)
            if chunk[-1] == 0x0D:
                self._after_cr = True
        else:
            lines = chunk.split(b"\n")
        tail = lines.pop()
        if lines:
            if self._in_long_line:
                # The first "line" is the end of a line already dropped for its size.
                self._in_long_line = False
                lines[0] = None
            elif self._pending:
                self._pending += lines[0]
                self.work += self._pending_len + len(lines[0])
                lines[0] = bytes(self._pending)
                self._pending = bytearray()
                self._pending_len = 0
            # The two lines nearly every event is made of (a data line, then a blank line) are handled
            # here without a call; the rest of the rules live in _line.
            line_fn = self._line
            data = self._data
            cap = self.max_event_bytes
            for line in lines:
                if line is None:
                    continue
                if not line:
                    if self._discarding:
                        self._discarding = False
                    elif data:
                        payload = data[0] if len(data) == 1 else b"\n".join(data)
                        out.append(_new_event(SseEvent, (self._type, payload, self._last_id, "event")))
                    data.clear()
                    self._data_len = 0
                    self._type = None
                elif line[:6] == b"data: " and not self._discarding:
                    value = line[6:]
                    data.append(value)
                    self._data_len += len(value) + 1
                    if self._data_len + self._pending_len > cap:
                        self._drop_event(out)
                else:
                    line_fn(line, out)
        if tail and not self._in_long_line:
            self._pending += tail
            self._pending_len += len(tail)
            if self._pending_len + self._data_len > self.max_event_bytes:
                self._pending = bytearray()
                self._pending_len = 0
                self._in_long_line = True
                self._drop_event(out)
        return out

    def close(self) -> list[SseEvent]:
        """End of input. A strict parser discards an event with no closing blank line; a capture cut
        there is still worth reading, so it is dispatched and ``unterminated`` is set."""
        out: list[SseEvent] = []
        if self._head:
            head, self._head = self._head, None
            if not BOM.startswith(head):
                self._pending += head
        if self._pending and not self._in_long_line:
            line = bytes(self._pending)
            self._pending = bytearray()
            self._pending_len = 0
            self._line(line, out)
        if self._data and not self._discarding:
            self.unterminated = True
            self._dispatch(out)
        return out

    def _line(self, line: bytes, out: list[SseEvent]) -> None:
        if not line:
            self._dispatch(out)
            return
        if self._discarding or line[0] == 0x3A:  # ':' starts a comment
            return
        if line.startswith(b"data:"):
            value = line[5:]
            if value[:1] == b" ":
                value = value[1:]
            self._add_data(value, out)
            return
        colon = line.find(b":")
        if colon < 0:
            name, value = line, b""
        else:
            name, value = line[:colon], line[colon + 1 :]
            if value[:1] == b" ":
                value = value[1:]
        if name == b"event":
            self._type = value.decode("utf-8", "replace")
        elif name == b"data":
            self._add_data(value, out)
        elif name == b"id" and b"\0" not in value:
            self._last_id = value.decode("utf-8", "replace")
        # "retry" and unknown fields are ignored, as the spec says.

    def _add_data(self, value: bytes, out: list[SseEvent]) -> None:
        self._data.append(value)
        self._data_len += len(value) + 1
        if self._data_len + self._pending_len > self.max_event_bytes:
            self._drop_event(out)

    def _drop_event(self, out: list[SseEvent]) -> None:
        if not self._discarding:
            out.append(OVERSIZED)
        self._discarding = True
        self._data.clear()
        self._data_len = 0

    def _dispatch(self, out: list[SseEvent]) -> None:
        if self._discarding:
            self._discarding = False
        elif self._data:
            data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
            out.append(SseEvent(self._type, data, self._last_id))
        self._data.clear()
        self._data_len = 0
        self._type = None
