"""Server-sent events, decoded per the WHATWG event-stream rules, incrementally.

LF, CRLF and CR line ends (a CRLF may straddle two chunks), comment lines, multi-line ``data:``,
``event:``, ``id:``, a leading BOM. Lines come from the shared ``LineBuffer``, so work stays O(bytes)
however the input is cut. An event larger than the cap is dropped and decoding resumes after the next
blank line: its size is that of its lines, each with one byte for its end (however it ended), so an
event is kept or dropped whatever the chunks it came in. In raw mode (the rewriter's) every block keeps
its exact bytes.
"""

from __future__ import annotations

from typing import Final

from .base import DEFAULT_MAX_EVENT_BYTES, OVERSIZED, FramedEvent
from .lines import LineBuffer
from .payload import BOM, strip_bom

SseEvent = FramedEvent  # the name every framing's events had before the contract was written down
_BOM_LEN = len(BOM)
_MAX_TYPES: Final = 64  # event types a decoder keeps decoded

__all__ = ["DEFAULT_MAX_EVENT_BYTES", "OVERSIZED", "SseDecoder", "SseEvent"]


class SseDecoder:
    """Feed bytes, get whole events (the ``Framer`` contract, ``framing.base``). Never raises on any input.

    ``keep_raw``: the rewriter's mode. Every block (its lines up to and including the blank line that ends
    it) is an event carrying its exact bytes in ``raw``, a block with no data line an event of kind
    "quiet"; no event is dropped for its size (``pending`` counts the bytes waiting, for the caller's cap);
    ``close()`` leaves an unfinished block's bytes in ``rest``.
    """

    __slots__ = (
        "_block",
        "_block_len",
        "_data",
        "_discarding",
        "_head",
        "_last_id",
        "_lines",
        "_raw",
        "_size",
        "_type",
        "_types",
        "broken",
        "max_event_bytes",
        "rest",
        "unterminated",
    )

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES, *, keep_raw: bool = False) -> None:
        self.max_event_bytes = max_event_bytes
        self.unterminated = False  # set by close() when the input ended inside an event
        self._raw = keep_raw
        self._lines = LineBuffer(cr=True, raw=keep_raw)
        # First bytes, until we know whether they start with a BOM (raw mode: b"" until the first line).
        self._head: bytes | None = b""
        self._block: list[bytes] = []  # raw mode: the lines of the block in progress, with their ends
        self._block_len = 0
        self.rest = b""  # raw mode: after close(), the bytes of a block that never ended
        self.broken = (
            None  # SSE can always be read on: no byte stops it (the contract's field, for AWS frames)
        )
        self._data: list[bytes] = []
        # The event's size so far: its lines, each with one byte for its end (not counted in raw mode).
        self._size = 0
        self._type: str | None = None
        # Event types read so far, bytes -> str: a stream names a handful, each on nearly every event.
        self._types: dict[bytes, str] = {}
        self._last_id: str | None = None
        self._discarding = False  # inside an oversized event: ignore lines until a blank one

    @property
    def pending(self) -> int:
        """Bytes received of the event in progress (raw mode: its block, and the line not yet ended)."""
        held = self._block_len if self._raw else self._size
        return self._lines.pending_len + held

    def feed(self, chunk: bytes) -> list[FramedEvent]:
        out: list[FramedEvent] = []
        if self._raw:
            if chunk:
                self._feed_raw(chunk, out)
            return out
        if self._head is not None:
            self._head, chunk = strip_bom(self._head, chunk)
        if not chunk:
            return out
        buffer = self._lines
        if chunk.endswith(b"\n\n") and not buffer.pending_len and not self._size and not self._discarding:
            # The direct paths: one whole event, nothing of one before it (no line, so no data and no
            # type; what a provider writing an event per write sends). A line being skipped for its size
            # means an event being discarded. A CR that ended an earlier chunk may still make a later LF
            # count for nothing: from this clean state that LF is a blank line that does nothing anyway.
            # Ints, not b"\n": bytes.__contains__ tries its argument as an int first, and for bytes raises
            # and clears a TypeError inside (CPython 3.12), ten times the cost of the scan. Either path's
            # event is its lines and their ends, the chunk less its blank line: that is its size.
            if chunk.startswith(b"data: "):
                # One "data: " line.
                data = chunk[6:-2]
                if 0x0A not in data and 0x0D not in data and len(chunk) <= self.max_event_bytes + 1:
                    out.append(FramedEvent(None, data, self._last_id, "event", None))
                    return out
            elif chunk.startswith(b"event: ") and 0x0D not in chunk:
                # Its type first, "event: NAME\ndata: ...\n\n" (Anthropic's every event).
                end = chunk.find(b"\n")
                rest = chunk[end + 1 :]  # to the end: compiled, a slice whose start passes its end raises
                if rest.startswith(b"data: "):
                    data = rest[6:-2]  # "data: " and "\n\n" cannot overlap: a space is not an LF
                    if 0x0A not in data and len(chunk) <= self.max_event_bytes + 1:
                        out.append(
                            FramedEvent(self._type_of(chunk[7:end]), data, self._last_id, "event", None)
                        )
                        return out
        # Typed, so that the compiled loop slices and compares them as bytes, not as any object.
        lines: list[bytes | None] = buffer.split(chunk)
        if lines:
            # The two lines nearly every event is made of (a data line, then a blank line) are handled
            # here without a call; the rest of the rules live in _line. A data line with no data held
            # before it and a blank line after it (in this chunk) is an event as it stands (its type and
            # its size so far from the lines before it, an "event:" line's).
            held = self._data
            cap = self.max_event_bytes
            count = len(lines)
            i = 0
            while i < count:
                line = lines[i]
                i += 1
                if line is None:
                    continue
                if (
                    i < count
                    and not lines[i]
                    and not held
                    and line.startswith(b"data: ")
                    and not self._discarding
                    and self._size + len(line) < cap
                ):
                    out.append(FramedEvent(self._type, line[6:], self._last_id, "event", None))
                    self._type = None
                    self._size = 0
                    i += 1
                    continue
                if not line:
                    if self._discarding:
                        self._discarding = False
                    elif held:
                        payload = held[0] if len(held) == 1 else b"\n".join(held)
                        out.append(FramedEvent(self._type, payload, self._last_id, "event", None))
                    held.clear()
                    self._size = 0
                    self._type = None
                elif line.startswith(b"data: ") and not self._discarding:
                    held.append(line[6:])
                    self._size += len(line) + 1
                    if self._size > cap:
                        self._drop_event(out)
                else:
                    self._line(line, out)  # on the object, not bound to a local: compiled, a direct call
        # The line not yet ended will count at least its bytes so far and one for its end: past the cap,
        # its event is dropped now, as it would be once the line ended (and the line is not held).
        if buffer.pending_len and buffer.pending_len + 1 + self._size > self.max_event_bytes:
            buffer.drop()
            self._drop_event(out)
        return out

    def close(self) -> list[FramedEvent]:
        """End of input. A strict parser discards an event with no closing blank line; a capture cut
        there is still worth reading, so it is dispatched and ``unterminated`` is set."""
        out: list[FramedEvent] = []
        if self._raw:
            self.rest = b"".join(self._block) + self._lines.close()
            self._block = []
            self._block_len = 0
            return out
        # Bytes still held at the start can only be a BOM's first bytes (strip_bom decides on anything
        # else): in SSE they are not a line with a field, so they end nothing and are dropped.
        self._head = None
        line = self._lines.close()
        if line:
            self._line(line, out)
        if self._data and not self._discarding:
            self.unterminated = True
            self._dispatch(out)
        return out

    def _feed_raw(self, chunk: bytes, out: list[FramedEvent]) -> None:
        block = self._block
        for raw in self._lines.split(chunk):
            block.append(raw)
            self._block_len += len(raw)
            line = raw.rstrip(b"\r\n")
            if self._head is not None:  # the first line: a BOM there is not part of it
                self._head = None
                if line.startswith(BOM):
                    line = line[_BOM_LEN:]
            if line:
                self._line(line, out)
                continue
            data = self._data
            payload = (data[0] if len(data) == 1 else b"\n".join(data)) if data else b""
            kind = "event" if data else "quiet"
            out.append(FramedEvent(self._type, payload, self._last_id, kind, b"".join(block)))
            block.clear()
            self._block_len = 0
            data.clear()
            self._type = None

    def _line(self, line: bytes, out: list[FramedEvent]) -> None:
        if not line:
            self._dispatch(out)
            return
        if self._discarding:
            return
        if not self._raw:  # every line of an event counts toward its size, a comment's and an id's too
            self._size += len(line) + 1
            if self._size > self.max_event_bytes:
                self._drop_event(out)
                return
        if line[0] == 0x3A:  # ':' starts a comment
            return
        if line.startswith(b"data:"):
            value = line[5:]
            if value[:1] == b" ":
                value = value[1:]
            self._data.append(value)
            return
        if line.startswith(b"event: "):  # the other line of nearly every event of some providers
            self._type = self._type_of(line[7:])
            return
        colon = line.find(b":")
        if colon < 0:
            name, value = line, b""
        else:
            name, value = line[:colon], line[colon + 1 :]
            if value[:1] == b" ":
                value = value[1:]
        if name == b"event":
            self._type = self._type_of(value)
        elif name == b"data":
            self._data.append(value)
        elif name == b"id" and 0 not in value:  # an int: no hidden TypeError (see the direct path)
            self._last_id = value.decode("utf-8", "replace")
        # "retry" and unknown fields are ignored, as the spec says.

    def _type_of(self, value: bytes) -> str:
        """An ``event:`` field's value as text, decoded once per decoder (64 types at most kept)."""
        known = self._types.get(value)
        if known is None:
            known = value.decode("utf-8", "replace")
            if len(self._types) < _MAX_TYPES:
                self._types[value] = known
        return known

    def _drop_event(self, out: list[FramedEvent]) -> None:
        if not self._discarding:
            out.append(OVERSIZED)
        self._discarding = True
        self._data.clear()
        self._size = 0

    def _dispatch(self, out: list[FramedEvent]) -> None:
        if self._discarding:
            self._discarding = False
        elif self._data:
            data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
            out.append(FramedEvent(self._type, data, self._last_id))
        self._data.clear()
        self._size = 0
        self._type = None
