"""X-Fake-Fault and the other delivery headers: what goes wrong on the way (the scenario still picks the
events that come first), X-Fake-Chunking: hostile and X-Fake-Framing: length, and the bytes each fault sends."""

from __future__ import annotations

import functools
import itertools
import string
from typing import NamedTuple

import orjson

from .renderers import WIRE_FORMATS
from .renderers.base import CREATED
from .renderers.framing import AWS_EVENTSTREAM
from .request import Refused, Request
from .wire import compressor

# What each X-Fake-Fault does; --help prints this table, and the order is the one errors list.
FAULT_HELP: dict[str, str] = {
    "drop-mid-event": "half the events and half of the next one, then the connection drops",
    "drip": "the first X-Fake-Drip-Bytes bytes (default: all) one byte per write, X-Fake-Delay apart",
    "huge-event": "half the events, then one event of X-Fake-Size bytes (default 100 MB) with no line end",
    "bomb": "with X-Fake-Encoding: half the events, then a line of X-Fake-Size spaces (default 256 MiB "
    "decoded), compressed to a small body",
    "endless-calls": "(Chat Completions) whole new tool calls, one per event, until the client goes away",
    "endless-arguments": "(Chat Completions) one call whose argument fragments never stop",
    "html-502": "an nginx error page (502, text/html) instead of a stream",
    "json-429": "a rate-limit error (429, JSON, Retry-After) instead of a stream",
}
FAULTS: tuple[str, ...] = tuple(FAULT_HELP)
CHUNKINGS: tuple[str, ...] = ("hostile",)  # X-Fake-Chunking
FRAMINGS: tuple[str, ...] = ("length", "chunked")  # X-Fake-Framing; chunked is what comes without it
HTML_502 = (
    b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1>"
    b"</center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
)
RATE_LIMITED = {
    "error": {
        "message": "Rate limit reached for requests. Please try again in 20s.",
        "type": "rate_limit_error",
        "code": "rate_limit_exceeded",
    }
}
HUGE_EVENT_HEAD = b'data: {"choices": [{"index": 0, "delta": {"content": "'
_MIB = 1024 * 1024


class Fault(NamedTuple):
    """How a stream is delivered: the fault (or None), its sizes, and the chunking and framing asked for."""

    name: str | None
    size: int
    drip_bytes: int | None
    hostile: bool
    length: bool = False  # X-Fake-Framing: length: a Content-Length body, not chunked


NO_FAULT = Fault(None, 0, None, False)


def fault_of(request: Request, fmt: str, encoding: str | None) -> Fault:
    """The request's X-Fake-Fault (with its X-Fake-Size and X-Fake-Drip-Bytes), X-Fake-Chunking and
    X-Fake-Framing; Refused when they do not fit together."""
    headers = request.headers
    name = headers.get("x-fake-fault", "").strip().lower() or None
    if name is not None and name not in FAULTS:
        raise Refused(400, f"X-Fake-Fault must be one of {', '.join(FAULTS)}")
    if name in ("endless-calls", "endless-arguments") and fmt != "openai-chat":
        raise Refused(400, f"X-Fake-Fault {name} is a Chat Completions stream")
    if name == "huge-event" and WIRE_FORMATS[fmt].content_type == AWS_EVENTSTREAM:
        raise Refused(400, "X-Fake-Fault huge-event needs a line-framed format")
    if name == "bomb" and encoding is None:
        raise Refused(400, "X-Fake-Fault bomb needs X-Fake-Encoding")
    numbers = {}
    for header in ("x-fake-size", "x-fake-drip-bytes"):
        value = headers.get(header)
        if value is not None and (not value.isdigit() or int(value) > 2**34):
            raise Refused(400, f"{header} must be a number of bytes up to 16 GiB")
        numbers[header] = None if value is None else int(value)
    default_size = 100 * 1000 * 1000 if name == "huge-event" else 256 * _MIB
    chunking = headers.get("x-fake-chunking", "").strip().lower()
    if chunking and chunking not in CHUNKINGS:
        raise Refused(400, f"X-Fake-Chunking must be {' or '.join(CHUNKINGS)}")
    framing = headers.get("x-fake-framing", "").strip().lower()
    if framing and framing not in FRAMINGS:
        raise Refused(400, f"X-Fake-Framing must be {' or '.join(FRAMINGS)}")
    size = numbers["x-fake-size"] or default_size
    return Fault(name, size, numbers["x-fake-drip-bytes"], chunking == "hostile", framing == "length")


def endless(kind: str):
    """The events of an `endless-calls` or `endless-arguments` Chat Completions stream, forever."""
    head = {
        "id": "chatcmpl-fake-endless",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": kind,
    }

    def chunk(delta: dict) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": None}
        return b"data: " + orjson.dumps({**head, "choices": [choice]}) + b"\n\n"

    yield chunk({"role": "assistant", "content": None})
    if kind == "endless-calls":
        for n in itertools.count():
            call = {"index": n, "id": f"call_{n}", "type": "function"}
            call["function"] = {"name": f"tool_{n % 7}", "arguments": f'{{"n": {n}}}'}
            yield chunk({"tool_calls": [call]})
    else:
        function = {"name": "write_file", "arguments": '{"content": "'}
        yield chunk({"tool_calls": [{"index": 0, "id": "call_0", "type": "function", "function": function}]})
        fragment = string.ascii_letters * 20  # 1,040 characters
        while True:
            yield chunk({"tool_calls": [{"index": 0, "function": {"arguments": fragment}}]})


def drop_mid_event_pieces(pieces: tuple[bytes, ...]) -> tuple[bytes, ...]:
    """`drop-mid-event`: what is written before the connection drops inside an event."""
    half = len(pieces) // 2
    return (*pieces[:half], pieces[half][: len(pieces[half]) // 2])


def huge_event_pieces(plain: tuple[bytes, ...], size: int):
    """`huge-event`: half the events, then one event of ``size`` bytes that never reaches a line end."""
    yield from plain[: len(plain) // 2]
    yield HUGE_EVENT_HEAD
    left = size - len(HUGE_EVENT_HEAD)
    block = b"a" * _MIB
    while left > 0:
        yield block[: min(left, _MIB)]
        left -= _MIB


@functools.cache
def bomb_pieces(plain: tuple[bytes, ...], encoding: str, size: int) -> tuple[bytes, ...]:
    """`bomb`: half the events, then a line of ``size`` spaces, compressed by one compressor: a small body
    that decodes to far more than it weighs."""
    compress, finish = compressor(encoding)
    out = [compress(piece) for piece in plain[: len(plain) // 2]]
    out.append(compress(b"data: "))
    block = b" " * _MIB
    for start in range(0, size, _MIB):
        out.append(compress(block[: min(_MIB, size - start)]))
    out.append(finish())
    return tuple(piece for piece in out if piece)
