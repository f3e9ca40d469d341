"""Content-Encoding, decoded incrementally and capped (for the analysis; the client gets the original bytes),
and encoded again for a stream the proxy was asked to rewrite (``ContentEncoder``).

Every decompressor is asked for a bounded amount of output at a time and fed bounded slices of input, so
a body of a few KB that inflates to gigabytes costs no more memory than the cap and a small constant.
"""

from __future__ import annotations

import sys
import zlib
from collections.abc import Callable
from typing import Any

import brotli

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd

_STEP = 64 * 1024  # the most output asked of a decompressor at once, and the largest input slice it gets
_MAX_CODINGS = 4  # each stage may hold a window of up to 16 MiB (brotli): a long chain is refused
_ZSTD_OPTIONS = {int(zstd.DecompressionParameter.window_log_max): 23}  # RFC 9659: 8 MiB at most over HTTP


class _Stage:
    """One decompressor of a chain: input is pushed in, output pulled out at most ``limit`` at a time."""

    __slots__ = ("_in", "_pos", "started")
    name = ""

    def __init__(self) -> None:
        self._in = b""
        self._pos = 0
        self.started = False  # some input arrived (an empty body is not a truncated stream)

    def push(self, data: bytes) -> None:
        self.started = True
        if self._pos < len(self._in):
            self._in = self._in[self._pos :] + data
        else:
            self._in = data
        self._pos = 0

    def _take(self) -> bytes:
        pos = self._pos
        if pos >= len(self._in):
            return b""
        data = self._in[pos : pos + _STEP]
        self._pos = pos + len(data)
        return data

    def pull(self, limit: int) -> bytes:
        """Up to about ``limit`` bytes of output; b"" once the input pushed so far is used up."""
        raise NotImplementedError

    def truncated(self) -> bool:
        raise NotImplementedError


class _Zlib(_Stage):
    """gzip (any number of members, as Python's gzip reads them) or deflate (zlib-wrapped, else raw)."""

    __slots__ = ("_d", "_ended", "_gzip", "_head", "_ignore", "_more", "_tail", "name")

    def __init__(self, gzip: bool) -> None:
        super().__init__()
        self.name = "gzip" if gzip else "deflate"
        self._gzip = gzip
        self._d: Any = None  # a zlib decompressor, once the first bytes tell which
        self._head = b""  # deflate: the first byte, until the second tells zlib-wrapped from raw
        self._tail = b""  # input zlib left unconsumed because the output limit was reached
        self._more = False  # the last output filled the limit: zlib may hold more without new input
        self._ended = False  # a stream (gzip member) ended and no other has begun
        self._ignore = False  # bytes after the end that are not another gzip member: dropped

    def pull(self, limit: int) -> bytes:
        while True:
            if self._tail:
                data, self._tail = self._tail, b""
            else:
                data = self._take()
                if not data and not (self._more and self._d is not None):
                    return b""
            self._more = False
            if self._ignore:
                continue
            d = self._d
            if d is None:
                data = self._head + data
                if self._gzip:
                    if self._ended and data[0] != 0x1F:
                        self._ignore = True
                        continue
                    # 47 = 32 + 15: a gzip or zlib header, detected (mitmproxy decodes gzip the same way).
                    d = self._d = zlib.decompressobj(47)
                elif len(data) < 2:
                    self._head = data
                    continue
                else:
                    cmf, flg = data[0], data[1]
                    zlib_header = cmf & 0x0F == 8 and cmf >> 4 <= 7 and ((cmf << 8) | flg) % 31 == 0
                    # Some servers send raw deflate for "deflate"; browsers and mitmproxy accept it.
                    d = self._d = zlib.decompressobj(15 if zlib_header else -15)
                    self._head = b""
                self._ended = False
            out = d.decompress(data, limit)
            if d.eof:
                self._d = None
                self._ended = True
                if self._gzip:
                    self._tail = d.unused_data
                else:
                    self._ignore = True
            else:
                self._tail = d.unconsumed_tail
                self._more = len(out) >= limit
            if out:
                return out

    def truncated(self) -> bool:
        return self.started and not (self._ended or self._ignore)


class _Brotli(_Stage):
    __slots__ = ("_d", "_ended")
    name = "br"

    def __init__(self) -> None:
        super().__init__()
        self._d = brotli.Decompressor()
        self._ended = False

    def pull(self, limit: int) -> bytes:
        d = self._d
        while not self._ended:
            # Until it can accept more, it must be called with no input; even then it may hold output.
            data = self._take() if d.can_accept_more_data() else b""
            out = d.process(data, output_buffer_limit=limit)
            self._ended = d.is_finished()
            if out:
                return out
            if not data:
                return b""
        if self._take():
            # brotli itself rejects bytes after the end when they come in the same call: reject them
            # whatever call they come in, so that how the body was cut does not matter.
            raise ValueError("bytes after the end of the stream")
        return b""

    def truncated(self) -> bool:
        return self.started and not self._ended


class _Zstd(_Stage):
    """zstd, including several concatenated frames."""

    __slots__ = ("_d", "_in_frame", "_tail")
    name = "zstd"

    def __init__(self) -> None:
        super().__init__()
        self._d = zstd.ZstdDecompressor(options=_ZSTD_OPTIONS)
        self._tail = b""  # the bytes after a frame's end: the next frame
        self._in_frame = False

    def pull(self, limit: int) -> bytes:
        while True:
            d = self._d
            if not d.needs_input:
                data = b""
            elif self._tail:
                data, self._tail = self._tail, b""
            else:
                data = self._take()
                if not data:
                    return b""
            if data:
                self._in_frame = True
            out = d.decompress(data, limit)
            if d.eof:
                self._tail = d.unused_data
                self._d = zstd.ZstdDecompressor(options=_ZSTD_OPTIONS)
                self._in_frame = False
            elif not out and not data:
                if d.needs_input:
                    # The last call filled the limit exactly and had nothing more: more input is wanted
                    # now (returning here held the rest of a chunk back, and lost it at the end).
                    continue
                return b""  # no progress without input (not expected; never spin)
            if out:
                return out

    def truncated(self) -> bool:
        return self._in_frame


# Each coding's stage ("identity" is none: ``_codings`` leaves it out).
_CODINGS: dict[str, Callable[[], _Stage]] = {
    "gzip": lambda: _Zlib(gzip=True),
    "x-gzip": lambda: _Zlib(gzip=True),
    "deflate": lambda: _Zlib(gzip=False),
    "br": _Brotli,
    "zstd": _Zstd,
}


def _codings(encoding: str) -> list[str]:
    return [c for c in (part.strip().lower() for part in encoding.split(",")) if c and c != "identity"]


def supported(encoding: str) -> bool:
    """Whether a Content-Encoding value (possibly a comma-separated chain) can be decoded here."""
    codings = _codings(encoding)
    return len(codings) <= _MAX_CODINGS and all(c in _CODINGS for c in codings)


class _Corrupt(Exception):
    pass


class ContentDecoder:
    """Feed the body as sent, get it decoded, at most ``max_output_bytes`` in total. Never raises."""

    __slots__ = ("_done", "_remaining", "_stages", "encoding", "error", "exceeded", "max_output_bytes")

    def __init__(self, encoding: str, max_output_bytes: int) -> None:
        self.encoding = encoding
        self.max_output_bytes = max_output_bytes
        self.exceeded = False  # the decoded output went past the cap: nothing more is decoded
        self.error: str | None = None  # the input could not be decoded: nothing more is decoded
        # Output until the cap is known to be passed: one byte more than it (then cut off) tells.
        self._remaining = max_output_bytes + 1
        self._stages: list[_Stage] = []  # in decoding order: the last coding applied comes first
        codings = _codings(encoding)
        if not supported(encoding):
            unknown = [c for c in codings if c not in _CODINGS]
            self.error = f"unsupported content-encoding {unknown[0]!r}" if unknown else "too many codings"
        else:
            self._stages = [_CODINGS[c]() for c in reversed(codings)]
        self._done = self.error is not None

    def decode(self, chunk: bytes) -> bytes:
        return b"".join(self.decode_pieces(chunk))

    def decode_pieces(self, chunk: bytes):
        """The decoded output of ``chunk`` as it is produced, at most 64 KiB a piece: a small chunk of a
        decompression bomb never becomes one large buffer."""
        if self._done or not chunk:
            return
        if not self._stages:
            if len(chunk) >= self._remaining:
                chunk = chunk[: self._remaining - 1]
                self._stop_exceeded()
            self._remaining -= len(chunk)
            if chunk:
                yield chunk
            return
        self._stages[0].push(chunk)
        yield from self._drain_pieces()

    def flush(self) -> bytes:
        """End of input: whatever output is left; a compressed stream that did not end sets ``error``."""
        if self._done:
            return b""
        out = self._drain() if self._stages else b""
        if not self._done:
            for stage in self._stages:
                if stage.truncated():
                    self.error = f"{stage.name}: the compressed stream is truncated"
                    break
            self._done = True
            self._stages = []
        return out

    def _drain(self) -> bytes:
        return b"".join(self._drain_pieces())

    def _drain_pieces(self):
        last = len(self._stages) - 1
        try:
            while self._stages:
                data = self._pull(last, min(self._remaining, _STEP))
                if not data:
                    break
                if len(data) >= self._remaining:
                    # Past the cap (brotli may overshoot its limit by a block): cut at it exactly.
                    data = data[: self._remaining - 1]
                    self._stop_exceeded()
                    if data:
                        yield data
                    break
                self._remaining -= len(data)
                yield data
        except _Corrupt as exc:
            self.error = str(exc)
            self._done = True
            self._stages = []

    def _pull(self, i: int, limit: int) -> bytes:
        stage = self._stages[i]
        while True:
            try:
                out = stage.pull(limit)
            except Exception as exc:  # noqa: BLE001 - zlib.error, brotli.error, ZstdError...: bad input
                raise _Corrupt(f"{stage.name}: {exc}") from None
            if out or i == 0:
                return out
            upstream = self._pull(i - 1, _STEP)
            if not upstream:
                return b""
            stage.push(upstream)

    def _stop_exceeded(self) -> None:
        self.exceeded = True
        self._done = True
        self._stages = []


class TooLarge(ValueError):
    """A body that decodes to more than its cap (``decode_body``)."""


def decode_body(body: bytes, encoding: str, max_output_bytes: int) -> bytes:
    """A whole body (a request's: Codex sends its own zstd-compressed) decoded, at most
    ``max_output_bytes``. Raises ValueError saying why it cannot be: a coding not read here, input that
    does not decode or ends early; TooLarge (a ValueError) for output past the cap."""
    decoder = ContentDecoder(encoding, max_output_bytes)
    out = decoder.decode(body)
    out += decoder.flush()
    if decoder.error is not None:
        raise ValueError(f"its content-encoding {encoding!r} does not decode ({decoder.error})")
    if decoder.exceeded:
        raise TooLarge(f"it decodes to more than {max_output_bytes} bytes, the cap")
    return out


class ContentEncoder:
    """A Content-Encoding (or a chain of them) applied to a stream as it goes: every ``encode`` ends in a
    flush, so what it returns decodes at once to all the data given so far; ``finish`` ends the stream."""

    __slots__ = ("_stages",)

    def __init__(self, encoding: str) -> None:
        if not supported(encoding):
            raise ValueError(f"unsupported content-encoding {encoding!r}")
        self._stages = [_compressor(coding) for coding in _codings(encoding)]  # in the order applied

    def encode(self, data: bytes) -> bytes:
        for compress, _ in self._stages:
            data = compress(data)
        return data

    def finish(self) -> bytes:
        out = b""
        for compress, finish in self._stages:
            out = (compress(out) if out else b"") + finish()
        return out


def _compressor(coding: str):
    """(compress and flush, finish) of one coding."""
    if coding in ("gzip", "x-gzip", "deflate"):
        z = zlib.compressobj(wbits=31 if coding != "deflate" else 15)
        return (lambda data: z.compress(data) + z.flush(zlib.Z_SYNC_FLUSH)), z.flush
    if coding == "br":
        b = brotli.Compressor()
        return (lambda data: b.process(data) + b.flush()), b.finish
    c = zstd.ZstdCompressor()
    return (lambda data: c.compress(data, mode=zstd.ZstdCompressor.FLUSH_BLOCK)), c.flush
