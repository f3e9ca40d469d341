"""Raw events: a stream's bytes cut into whole events that keep their exact bytes (SSE blocks, AWS
event-stream frames), and the unit the rewriting stages pass around. Only an event a stage changes is
serialised again; every other event leaves with the bytes it came with.
"""

from __future__ import annotations

import re
import struct
import zlib

import orjson

from ..framing.eventstream import parse_headers
from ..framing.payload import BOM

_LINE_END = re.compile(rb"\r\n|\r|\n")
_LINE_END_KEPT = re.compile(rb"(\r\n|\r|\n)")


class Unit:
    """One event as it came (``parts`` holds one ``[bytes, payload object]``), or what a stage made of it:
    several wire events in a row (a name sent in two chunks), or one of the two halves of an event.

    ``origin`` numbers the input event it comes from: the rewriter's ledger gives back the original bytes
    of every origin not yet sent if anything goes wrong. ``quiet``: a comment, keep-alive or blank block,
    which carries no payload and passes in place.
    """

    __slots__ = ("name", "origin", "parts", "quiet", "template")

    def __init__(self, origin: int, template: bytes | None, name, parts: list, quiet: bool = False) -> None:
        self.origin = origin
        self.template = template  # the SSE block a re-serialised event copies its other lines from
        self.name = name  # SSE ``event:`` field, AWS ``:event-type``
        self.parts = parts  # [[bytes, obj], ...]; obj is the parsed payload (a dict) or None
        self.quiet = quiet

    @property
    def data(self) -> bytes:
        parts = self.parts
        return parts[0][0] if len(parts) == 1 else b"".join(part[0] for part in parts)

    @property
    def obj(self):
        return self.parts[0][1]

    @property
    def objs(self) -> list:
        return [part[1] for part in self.parts]

    def rewrite(self, i: int, obj: dict) -> None:
        """Part ``i`` now carries ``obj``: serialise it again (SSE only; the other parts keep their bytes)."""
        self.parts[i] = [sse_event(self.template, orjson.dumps(obj)), obj]

    def derive(self, objs: list, keep: dict | None = None) -> Unit:
        """A unit of the same origin made of these payloads, in this order; ``keep`` maps id(obj) to the
        bytes of a payload that did not change."""
        keep = keep or {}
        parts = [[keep.get(id(obj)) or sse_event(self.template, orjson.dumps(obj)), obj] for obj in objs]
        return Unit(self.origin, self.template, self.name, parts)

    @property
    def size(self) -> int:
        return sum(len(part[0]) for part in self.parts)


# -- SSE -----------------------------------------------------------------------------------------------------


class SseSplitter:
    """Feed bytes, get each SSE block (the lines of one event and the blank line that ends it) with its
    exact bytes. Per the WHATWG rules a line ends at CRLF, LF or CR; a CR at the end of the input waits
    for the next byte, which may be its LF. Each byte is scanned once however the input is cut."""

    __slots__ = ("_buf", "_line_start", "_scan")

    def __init__(self) -> None:
        self._buf = bytearray()  # from the start of the block in progress
        self._scan = 0  # where the search for the next line end resumes
        self._line_start = 0  # where the line in progress starts

    @property
    def pending(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes) -> list[bytes]:
        buf = self._buf
        buf += data
        end = len(buf)
        blocks: list[bytes] = []
        start = 0
        line_start = self._line_start
        pos = end
        for match in _LINE_END.finditer(buf, self._scan):
            s, e = match.span()
            if e == end and e - s == 1 and buf[s] == 0x0D:
                pos = s  # a CR last: whether an LF follows decides where the line ends
                break
            if s == line_start:  # an empty line ends the block
                blocks.append(bytes(buf[start:e]))
                start = e
            line_start = e
        # Nothing above mutates the buffer: if anything raised, the bytes would all still be here.
        self._line_start = line_start - start
        self._scan = pos - start
        if start:
            del buf[:start]
        return blocks

    def close(self) -> bytes:
        """End of input: the bytes of an unfinished block (b"" if none)."""
        rest = bytes(self._buf)
        self._buf.clear()
        self._scan = self._line_start = 0
        return rest


def parse_sse(raw: bytes) -> tuple[str | None, bytes | None]:
    """The ``event:`` name and the ``data:`` payload (lines joined with LF; None if no data line)."""
    if raw.startswith(BOM):
        raw = raw[3:]
    name = None
    data: list[bytes] = []
    for line in _LINE_END.split(raw):
        if not line or line[0] == 0x3A:  # blank, or a comment
            continue
        colon = line.find(b":")
        if colon < 0:
            field, value = line, b""
        else:
            field, value = line[:colon], line[colon + 1 :]
            if value[:1] == b" ":
                value = value[1:]
        if field == b"data":
            data.append(value)
        elif field == b"event":
            name = value.decode("utf-8", "replace")
    return name, (b"\n".join(data) if data else None)


def _is_data_line(line: bytes) -> bool:
    return line.startswith(b"data") and (len(line) == 4 or line[4] == 0x3A)


def sse_event(template: bytes, payload: bytes) -> bytes:
    """``template`` (a whole SSE block) with its data replaced by ``payload`` (one line, no LF in it):
    its other lines (``event:``, ``id:``, comments), its line ends and its blank line stay as they were."""
    bom = b""
    if template.startswith(BOM):
        bom, template = BOM, template[3:]
    pieces = _LINE_END_KEPT.split(template)
    out = [bom]
    done = False
    for i in range(0, len(pieces) - 1, 2):
        line, end = pieces[i], pieces[i + 1]
        if _is_data_line(line):
            if not done:
                done = True
                out.append((b"data: " if line[5:6] == b" " else b"data:") + payload + end)
            continue
        if not line and not done:
            # The blank line that ends the block, and no data line before it: put one there.
            done = True
            out.append(b"data: " + payload + end)
        out.append(line + end)
    if pieces[-1]:
        out.append(pieces[-1])
    return b"".join(out)


# -- AWS event stream ----------------------------------------------------------------------------------------

_PRELUDE = struct.Struct(">III")
_PRELUDE_LEN = 12
_MIN_TOTAL = 16


class FrameSplitter:
    """Feed bytes, get each AWS event-stream message with its exact bytes. A prelude that fails its CRC
    (or claims an impossible or oversized length) cannot be framed past: ``broken`` says why, and the
    bytes from there on stay in the buffer for the caller to pass through."""

    __slots__ = ("_buf", "broken", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int) -> None:
        self._buf = bytearray()
        self.max_frame_bytes = max_frame_bytes
        self.broken: str | None = None

    @property
    def pending(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes) -> list[bytes]:
        buf = self._buf
        buf += data
        frames: list[bytes] = []
        if self.broken is not None:
            return frames
        pos = 0
        end = len(buf)
        while end - pos >= _PRELUDE_LEN:
            total, headers_len, crc = _PRELUDE.unpack_from(buf, pos)
            if (
                total < _MIN_TOTAL
                or headers_len > total - _MIN_TOTAL
                or zlib.crc32(buf[pos : pos + 8]) != crc
            ):
                self.broken = "an AWS event-stream prelude failed its CRC check"
                break
            if total > self.max_frame_bytes:
                self.broken = (
                    f"an AWS event-stream frame of {total} bytes is over the {self.max_frame_bytes} cap"
                )
                break
            if end - pos < total:
                break
            frames.append(bytes(buf[pos : pos + total]))
            pos += total
        if pos:
            del buf[:pos]
        return frames

    def close(self) -> bytes:
        rest = bytes(self._buf)
        self._buf.clear()
        return rest


def parse_frame(raw: bytes) -> tuple[str | None, str, bytes | None]:
    """(``:event-type``, ``:message-type``, payload) of a framed message; payload None when the message
    fails its CRC or its headers do not parse (the frame is then passed along as it is)."""
    if zlib.crc32(memoryview(raw)[:-4]) != int.from_bytes(raw[-4:], "big"):
        return None, "malformed", None
    payload_start = _PRELUDE_LEN + int.from_bytes(raw[4:8], "big")
    headers = parse_headers(raw, _PRELUDE_LEN, payload_start)
    if headers is None:
        return None, "malformed", None
    kind = headers.get(":message-type", "event")
    return headers.get(":event-type"), kind, raw[payload_start:-4]
