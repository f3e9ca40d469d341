"""Framing helpers shared by the renderers: payloads to the body's writes, one event each (SSE data lines,
named SSE events, NDJSON lines, AWS event-stream messages)."""

from __future__ import annotations

import string
import struct
import zlib
from collections.abc import Callable

import orjson

from .base import Payloads

SSE = "text/event-stream; charset=utf-8"
AWS_EVENTSTREAM = "application/vnd.amazon.eventstream"
AWS_EXCEPTION = "throttlingException"  # the AWS exception frame that replaces an event
_PAD = string.ascii_letters


def data_lines(payloads: Payloads, end: bytes = b"\n\n") -> list[bytes]:
    return [b"data: " + orjson.dumps(payload) + end for _, payload in payloads]


def named_events(payloads: Payloads) -> list[bytes]:
    """SSE with an `event:` line named after the payload's type (Responses, Anthropic, Cohere)."""
    return [
        b"event: " + p["type"].encode() + b"\n" + line for (_, p), line in zip(payloads, data_lines(payloads))
    ]


def ndjson_lines(payloads: Payloads) -> list[bytes]:
    return [orjson.dumps(payload) + b"\n" for _, payload in payloads]


def aws_message(headers: dict[str, str], payload: bytes) -> bytes:
    """One AWS event-stream message: prelude (lengths + CRC), string headers, payload, message CRC."""
    head = b"".join(
        bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(value.encode())) + value.encode()
        for name, value in headers.items()
    )
    prelude = struct.pack(">II", 12 + len(head) + len(payload) + 4, len(head))
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + head + payload
    return message + struct.pack(">I", zlib.crc32(message))


def aws_frames(payloads: Payloads, wrap: Callable[[dict, str], dict]) -> list[bytes]:
    """One event-stream message per payload, each wrapped with a padding field of varying length (as
    Bedrock pads its events); the AWS_EXCEPTION event becomes an exception message."""
    frames = []
    for i, (event, payload) in enumerate(payloads):
        if event == AWS_EXCEPTION:
            kind = {
                ":exception-type": event,
                ":content-type": "application/json",
                ":message-type": "exception",
            }
            frames.append(aws_message(kind, orjson.dumps(payload)))
        else:
            kind = {
                ":event-type": event or "chunk",
                ":content-type": "application/json",
                ":message-type": "event",
            }
            frames.append(aws_message(kind, orjson.dumps(wrap(payload, _PAD[: 1 + i * 7 % 33]))))
    return frames
