"""Which wire format an exchange uses: from its path and content types (live), or from its bytes (files)."""

from __future__ import annotations

import orjson

from .framing import MALFORMED, SseDecoder, parse_json

# Path endings of each format's endpoint. Chat Completions covers OpenAI (/v1/chat/completions), Azure
# (/openai/deployments/{d}/chat/completions), OpenRouter (/api/v1/...), Gemini's OpenAI-compatible
# endpoint (/v1beta/openai/...), Groq (/openai/v1/...), DeepSeek (/chat/completions) and local servers.
_PATH_ENDINGS = (("/chat/completions", "openai-chat"),)


def format_for_path(path: str) -> str | None:
    bare = path.split("?", 1)[0].rstrip("/")
    for ending, name in _PATH_ENDINGS:
        if bare.endswith(ending):
            return name
    return None


def classify_exchange(
    path: str, response_content_type: str | None, request_body: bytes | None = None
) -> tuple[str, bool] | None:
    """(format, streamed) for a request/response of an LLM API we read, or None for anything else.

    The path says which API; the response content type says streamed or not. A response labelled
    neither way is a stream only when the request asked for one (``"stream": true``).
    """
    format = format_for_path(path)
    if format is None:
        return None
    content_type = (response_content_type or "").split(";", 1)[0].strip().lower()
    if content_type == "text/event-stream":
        return format, True
    if content_type == "application/json" or content_type.endswith("+json"):
        return format, False
    if request_body and b'"stream"' in request_body:
        try:
            request = orjson.loads(request_body)
        except orjson.JSONDecodeError:
            return None
        if type(request) is dict and request.get("stream") is True:
            return format, True
    return None


_SNIFF_BYTES = 64 * 1024
_SNIFF_EVENTS = 8


def detect_format(head: bytes, *, path: str | None = None) -> str | None:
    """The format name for this body (its first bytes are enough), or None when it is none we read."""
    if path is not None:
        format = format_for_path(path)
        if format is not None:
            return format
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
