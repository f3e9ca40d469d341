"""A body on its way out: each write compressed and flushed by one streaming compressor when the request
asks for an encoding, and the hash headers a client checks what it got against."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from typing import NamedTuple

from accumulator.decoding import ContentEncoder

ENCODINGS: tuple[str, ...] = ("gzip", "deflate", "br", "zstd")


def compressor(encoding: str) -> tuple[Callable[[bytes], bytes], Callable[[], bytes]]:
    """(compress one event and flush it, finish the stream) of one streaming compressor."""
    encoder = ContentEncoder(encoding)
    return encoder.encode, encoder.finish


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Wire(NamedTuple):
    pieces: tuple[bytes, ...]  # what each write sends
    headers: dict[str, str]


@functools.cache
def wire(plain: tuple[bytes, ...], encoding: str | None) -> Wire:
    """The writes of a body, each compressed and flushed by one compressor when asked, and its hash headers.

    X-Body-SHA256 is the hash of the full body as it goes on the wire (compressed, when it is);
    X-Decoded-SHA256 the hash of the uncompressed body. Both are for the full body, also when it is cut.
    """
    pieces = plain
    headers = {}
    if encoding is not None:
        compress, finish = compressor(encoding)
        pieces = tuple(compress(piece) for piece in plain)
        pieces = (*pieces[:-1], pieces[-1] + finish())
        headers["Content-Encoding"] = encoding
    headers["X-Body-SHA256"] = sha256(b"".join(pieces))
    headers["X-Decoded-SHA256"] = sha256(b"".join(plain))
    return Wire(pieces, headers)
