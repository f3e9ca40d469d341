"""The AWS binary event stream (Bedrock ``converse-stream``, ``invoke-with-response-stream``), by message.

A message with a bad CRC is reported and skipped; a corrupt prelude makes the decoder scan forward for the
next valid one. Bytes wait in a bytearray consumed from the front, which CPython makes cheap. In raw mode
(the rewriter's) every message keeps its exact bytes, and a prelude that cannot be read past stops the
framing there (``broken``), its bytes left for the caller.
"""

from __future__ import annotations

import struct
import zlib

from .base import DEFAULT_MAX_EVENT_BYTES, OVERSIZED, FramedEvent

_PRELUDE = struct.Struct(">III")  # total length, headers length, CRC32 of the first 8 bytes
_PRELUDE_LEN = 12
_MIN_TOTAL = 16  # prelude and message CRC, no headers, no payload
_TYPE_HEADER = {"event": ":event-type", "exception": ":exception-type", "error": ":error-code"}
# Header value types with a fixed size: bool true/false, byte, int16, int32, int64, timestamp, uuid.
_FIXED_SIZE = {0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16}


def _malformed(reason: bytes) -> FramedEvent:
    return FramedEvent("malformed-frame", reason, None, "malformed")


_BAD_PRELUDE = _malformed(b"prelude CRC mismatch or impossible lengths; skipped to the next valid prelude")
_BAD_MESSAGE_CRC = _malformed(b"message CRC mismatch; message skipped")
_BAD_HEADERS = _malformed(b"unparsable headers; message skipped")


def _sane(total: int, headers_len: int) -> bool:
    return total >= _MIN_TOTAL and headers_len <= total - _MIN_TOTAL


def parse_headers(msg: bytes, pos: int, end: int) -> dict[str, str] | None:
    """The string-valued headers (the only ones the dialects read), or None if the block is malformed."""
    headers: dict[str, str] = {}
    try:
        while pos < end:
            name_len = msg[pos]
            name = msg[pos + 1 : pos + 1 + name_len].decode()
            pos += 1 + name_len
            value_type = msg[pos]
            pos += 1
            if value_type == 6 or value_type == 7:
                value_len = int.from_bytes(msg[pos : pos + 2], "big")
                value = msg[pos + 2 : pos + 2 + value_len]
                pos += 2 + value_len
                if value_type == 7:
                    headers[name] = value.decode()
            else:
                size = _FIXED_SIZE.get(value_type)
                if size is None:
                    return None
                pos += size
    except (IndexError, UnicodeDecodeError):
        return None
    return headers if pos == end else None


class EventStreamDecoder:
    """Feed bytes, get one event per message (kind: its ``:message-type``). Never raises on any input."""

    __slots__ = (
        "_buf",
        "_need",
        "_raw",
        "_resync",
        "_skip",
        "_skip_total",
        "broken",
        "incomplete_bytes",
        "max_event_bytes",
        "rest",
    )

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES, *, keep_raw: bool = False) -> None:
        self.max_event_bytes = max_event_bytes
        self._raw = keep_raw
        self.broken: str | None = None  # raw mode: why the framing stopped (the rest is left as it came)
        self.rest = b""  # raw mode: after close(), the bytes no message took
        self.incomplete_bytes = 0  # set by close(): bytes received of a message that never completed
        self._buf = bytearray()
        self._need = 0  # total length of the message in the buffer, once its prelude is checked
        self._resync = False  # after a corrupt prelude: looking for the next valid one
        self._skip = 0  # bytes of an oversized message still to come, dropped as they arrive
        self._skip_total = 0

    def feed(self, chunk: bytes) -> list[FramedEvent]:
        out: list[FramedEvent] = []
        if self._skip:
            if len(chunk) <= self._skip:
                self._skip -= len(chunk)
                return out
            chunk = chunk[self._skip :]
            self._skip = 0
        self._buf += chunk
        self._drain(out)
        return out

    @property
    def pending(self) -> int:
        """Bytes received and not yet framed."""
        return len(self._buf)

    def close(self) -> list[FramedEvent]:
        """End of input. The bytes of an unfinished message are counted in ``incomplete_bytes`` (raw mode:
        left in ``rest``)."""
        if self._raw:
            self.rest = bytes(self._buf)
            self._buf.clear()
            return []
        if self._skip:
            self.incomplete_bytes = self._skip_total - self._skip
        elif self._buf and not self._resync:
            self.incomplete_bytes = len(self._buf)
        self._buf.clear()
        self._skip = 0
        self._need = 0
        return []

    def _drain(self, out: list[FramedEvent]) -> None:
        buf = self._buf
        while self.broken is None:
            if self._resync and not self._find_prelude():
                return
            need = self._need
            if not need:
                if len(buf) < _PRELUDE_LEN:
                    return
                total, headers_len, crc = _PRELUDE.unpack_from(buf)
                if self._raw and (not _sane(total, headers_len) or zlib.crc32(buf[:8]) != crc):
                    self.broken = "an AWS event-stream prelude failed its CRC check"
                    return
                if self._raw and total > self.max_event_bytes:
                    self.broken = (
                        f"an AWS event-stream frame of {total} bytes is over the {self.max_event_bytes} cap"
                    )
                    return
                if not _sane(total, headers_len) or zlib.crc32(buf[:8]) != crc:
                    out.append(_BAD_PRELUDE)
                    del buf[:1]
                    self._resync = True
                    continue
                if total > self.max_event_bytes:
                    out.append(OVERSIZED)
                    if len(buf) >= total:
                        del buf[:total]
                        continue
                    self._skip = self._skip_total = total
                    self._skip -= len(buf)
                    buf.clear()
                    return
                self._need = need = total
            if len(buf) < need:
                return
            self._need = 0
            msg = bytes(buf[:need])
            del buf[:need]
            self._message(msg, out)

    def _find_prelude(self) -> bool:
        # Each offset costs a constant amount and is looked at once: the scan is O(bytes) however cut.
        buf = self._buf
        unpack = _PRELUDE.unpack_from
        crc32 = zlib.crc32
        last = len(buf) - _PRELUDE_LEN
        for i in range(last + 1):
            total, headers_len, crc = unpack(buf, i)
            if total >= _MIN_TOTAL and headers_len <= total - _MIN_TOTAL and crc32(buf[i : i + 8]) == crc:
                del buf[:i]
                self._resync = False
                return True
        if last >= 0:
            del buf[: last + 1]  # the last 11 bytes may still begin a prelude
        return False

    def _message(self, msg: bytes, out: list[FramedEvent]) -> None:
        view = memoryview(msg)
        if zlib.crc32(view[:-4]) != int.from_bytes(view[-4:], "big"):
            out.append(_BAD_MESSAGE_CRC.with_raw(msg) if self._raw else _BAD_MESSAGE_CRC)
            return
        payload_start = _PRELUDE_LEN + int.from_bytes(view[4:8], "big")
        headers = parse_headers(msg, _PRELUDE_LEN, payload_start)
        if headers is None:
            out.append(_BAD_HEADERS.with_raw(msg) if self._raw else _BAD_HEADERS)
            return
        kind = headers.get(":message-type", "event")
        payload = msg[payload_start:-4]
        if kind == "error" and not payload:
            payload = headers.get(":error-message", "").encode()
        name = headers.get(_TYPE_HEADER.get(kind, ":event-type"))
        out.append(FramedEvent(name, payload, None, kind, msg if self._raw else None))
