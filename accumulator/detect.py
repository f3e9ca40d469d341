"""Which wire format a response uses, from the request path and the first bytes of the body."""

from __future__ import annotations

from .framing import MALFORMED, SseDecoder, parse_json

_SNIFF_BYTES = 64 * 1024
_SNIFF_EVENTS = 8


def detect_format(head: bytes, *, path: str | None = None) -> str | None:
    """The format name for this body (its first bytes are enough), or None when it is none we read."""
    if path is not None:
        bare = path.split("?", 1)[0].rstrip("/")
        if bare.endswith("/chat/completions"):
            return "openai-chat"
    decoder = SseDecoder()
    events = decoder.feed(head[:_SNIFF_BYTES]) + decoder.close()
    for event in events[:_SNIFF_EVENTS]:
        if event.type not in (None, "message"):
            return None  # named events belong to formats this version does not read
        if event.data == b"[DONE]":
            return "openai-chat"
        obj, _ = parse_json(event.data)
        if obj is MALFORMED or type(obj) is not dict:
            continue
        if "choices" in obj or obj.get("object") == "chat.completion.chunk":
            return "openai-chat"
        if "error" in obj:
            return "openai-chat"
    return None
