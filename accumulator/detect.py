"""Which wire format an exchange uses: from its path and content types (live traffic), or from the shape
of its first bytes (files, unknown paths). FORMATS.md section 1 is the map."""

from __future__ import annotations

import re

import orjson

from .framing import MALFORMED, SseDecoder, parse_json
from .framing.eventstream import EventStreamDecoder
from .framing.ndjson import NdjsonDecoder

SNIFF_BYTES = 64 * 1024  # how much of a body is held, at most, to recognise its format
_SNIFF_EVENTS = 8

# Path (without query) -> (format, whether that path always streams). First match wins.
_PATHS: tuple[tuple[re.Pattern, str, bool], ...] = tuple(
    (re.compile(pattern), format, always)
    for pattern, format, always in (
        # OpenAI (/v1/...), Azure (/openai/deployments/{d}/...), OpenRouter (/api/v1/...), Gemini's
        # OpenAI-compatible endpoint (/v1beta/openai/...), Groq (/openai/v1/...), DeepSeek, local servers.
        (r"/chat/completions$", "openai-chat", False),
        (r"/responses$", "openai-responses", False),
        # Anthropic direct and Bedrock mantle (/anthropic/v1/messages); Vertex publishes it as rawPredict.
        (r"(^|/)v1/messages$", "anthropic-messages", False),
        (r"/publishers/anthropic/models/[^/]+:streamRawPredict$", "anthropic-messages", True),
        (r"/publishers/anthropic/models/[^/]+:rawPredict$", "anthropic-messages", False),
        (r":streamGenerateContent$", "gemini", True),
        (r":generateContent$", "gemini", False),
        (r"/model/[^/]+/converse-stream$", "bedrock-converse", True),
        (r"/model/[^/]+/converse$", "bedrock-converse", False),
        (r"/model/[^/]+/invoke-with-response-stream$", "bedrock-invoke", True),
        (r"/model/[^/]+/invoke$", "bedrock-invoke", False),
        (r"/v2/chat$", "cohere-v2", False),
        (r"/api/chat$", "ollama-chat", False),
    )
)
STREAM_CONTENT_TYPES = ("text/event-stream", "application/vnd.amazon.eventstream", "application/x-ndjson")

# SSE event names (or JSON "type" values) that only one format uses.
_EVENT_FORMATS = {
    "message_start": "anthropic-messages",
    "content_block_start": "anthropic-messages",
    "content_block_delta": "anthropic-messages",
    "message-start": "cohere-v2",
    "tool-call-start": "cohere-v2",
    "content-delta": "cohere-v2",
    "tool-plan-delta": "cohere-v2",
}


def path_format(path: str) -> tuple[str, bool] | None:
    """(format, the path always streams) for an LLM API path, or None. Costs a few regex searches."""
    bare = path.split("?", 1)[0].rstrip("/")
    for pattern, format, always in _PATHS:
        if pattern.search(bare):
            return format, always
    return None


def format_for_path(path: str) -> str | None:
    found = path_format(path)
    return None if found is None else found[0]


def classify_exchange(
    path: str, response_content_type: str | None, request_body: bytes | None = None
) -> tuple[str | None, bool] | None:
    """(format, streamed) for a request/response we read, or None for anything else.

    The path says which API; the response content type (or the path itself, for Gemini's and
    Bedrock's streaming endpoints) says streamed or not. A stream on a path we do not know gives
    (None, True): its format is recognised from its first bytes. A response labelled neither way is a
    stream only when the request asked for one (``"stream": true``).
    """
    content_type = (response_content_type or "").split(";", 1)[0].strip().lower()
    found = path_format(path)
    if found is None:
        return (None, True) if content_type in STREAM_CONTENT_TYPES else None
    format, always = found
    if always or content_type in STREAM_CONTENT_TYPES:
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


def sniff_format(head: bytes) -> str | None:
    """The format of a stream from its first bytes, or None when they are none we read (yet)."""
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not text:
        return None
    if text[:1] == b"[":
        return "gemini"  # :streamGenerateContent without alt=sse: a JSON array
    if text[:1] == b"{":
        return _sniff_ndjson(head)
    if len(head) >= 12 and head[:1] == b"\x00":
        return _sniff_eventstream(head)
    return _sniff_sse(head)


def sniff_message(body: bytes) -> str | None:
    """The format of a whole non-streamed (JSON) response body, or None."""
    obj, _ = parse_json(body.strip())
    if type(obj) is not dict:
        return None
    kind = obj.get("object") or obj.get("type")
    if type(kind) is not str:
        kind = None
    if kind == "chat.completion":
        return "openai-chat"
    if kind == "response":
        return "openai-responses"
    if kind == "message" and "content" in obj:
        return "anthropic-messages"
    if "candidates" in obj:
        return "gemini"
    if type(obj.get("output")) is dict and "message" in obj["output"]:
        return "bedrock-converse"
    if "message" in obj and "finish_reason" in obj:
        return "cohere-v2"
    return None


def detect_format(head: bytes, *, path: str | None = None) -> str | None:
    """The format for this body, from its path when given, else from its first bytes."""
    if path is not None:
        format = format_for_path(path)
        if format is not None:
            return format
    return sniff_format(head)


def _sniff_sse(head: bytes) -> str | None:
    decoder = SseDecoder()
    events = decoder.feed(head[:SNIFF_BYTES])
    for event in events[:_SNIFF_EVENTS]:
        name = event.type or ""
        if name.startswith("response."):
            return "openai-responses"
        if name in _EVENT_FORMATS:
            return _EVENT_FORMATS[name]
        if event.data == b"[DONE]":
            continue
        obj, _ = parse_json(event.data)
        if obj is MALFORMED or type(obj) is not dict:
            continue
        kind = obj.get("type")
        if type(kind) is str:
            if kind.startswith("response."):
                return "openai-responses"
            if kind in _EVENT_FORMATS:
                return _EVENT_FORMATS[kind]
        if "choices" in obj or obj.get("object") == "chat.completion.chunk":
            return "openai-chat"
        if "candidates" in obj:
            return "gemini"
    return None


def _sniff_ndjson(head: bytes) -> str | None:
    for event in NdjsonDecoder().feed(head[:SNIFF_BYTES])[:_SNIFF_EVENTS]:
        obj, _ = parse_json(event.data)
        if type(obj) is dict and "done" in obj and ("message" in obj or "created_at" in obj):
            return "ollama-chat"
        if type(obj) is dict and "candidates" in obj:
            return "gemini"  # a JSON-array stream's error or single object
    return None


def _sniff_eventstream(head: bytes) -> str | None:
    for event in EventStreamDecoder().feed(head[:SNIFF_BYTES])[:_SNIFF_EVENTS]:
        if event.kind == "event":
            return "bedrock-invoke" if event.type == "chunk" else "bedrock-converse"
    return None
