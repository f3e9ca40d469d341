"""Decoding one event's payload bytes as JSON, tolerating bytes that are not UTF-8.

Framing keeps payloads as bytes: orjson validates UTF-8 itself, so the common path decodes once. Only a
payload that fails is examined again, to tell bad UTF-8 (read with replacement characters) from bad JSON.
"""

from __future__ import annotations

import orjson

MALFORMED = object()  # returned in place of a value when the payload is not JSON
BOM = b"\xef\xbb\xbf"


def strip_bom(held: bytes, chunk: bytes) -> tuple[bytes | None, bytes]:
    """A leading UTF-8 BOM, possibly split across chunks, for a decoder that holds ``held`` so far:
    returns (the bytes to keep holding, or None once decided; the bytes to decode)."""
    head = held + chunk
    if len(head) < 3 and BOM.startswith(head):
        return head, b""
    return None, head[3:] if head.startswith(BOM) else head


def parse_json(data: bytes) -> tuple[object, bool]:
    """Return (value or MALFORMED, whether the bytes held invalid UTF-8)."""
    try:
        return orjson.loads(data), False
    except orjson.JSONDecodeError:
        pass
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", "replace")
        try:
            return orjson.loads(text), True
        except orjson.JSONDecodeError:
            return MALFORMED, True
    return MALFORMED, False
