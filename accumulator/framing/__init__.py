"""Framing: turn a response body, cut at any boundaries, into whole events (SSE, NDJSON, a JSON array
written progressively, the AWS binary event stream). ``base.Framer`` is the contract they all keep."""

from .base import DEFAULT_MAX_EVENT_BYTES, FramedEvent, Framer
from .eventstream import EventStreamDecoder
from .jsonarray import ARRAY_END, JsonArrayDecoder
from .lines import LineBuffer
from .ndjson import NdjsonDecoder
from .payload import MALFORMED, parse_json
from .sse import OVERSIZED, SseDecoder, SseEvent

# framing name (``WireFormat.framings``) -> its decoder class
FRAMERS = {
    "sse": SseDecoder,
    "ndjson": NdjsonDecoder,
    "eventstream": EventStreamDecoder,
    "jsonarray": JsonArrayDecoder,
}

__all__ = [
    "ARRAY_END",
    "DEFAULT_MAX_EVENT_BYTES",
    "FRAMERS",
    "MALFORMED",
    "OVERSIZED",
    "EventStreamDecoder",
    "FramedEvent",
    "Framer",
    "JsonArrayDecoder",
    "LineBuffer",
    "NdjsonDecoder",
    "SseDecoder",
    "SseEvent",
    "parse_json",
]
