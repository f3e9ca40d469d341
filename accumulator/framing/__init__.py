"""Framing: turn a response body, cut at any boundaries, into whole events."""

from .payload import MALFORMED, parse_json
from .sse import SseDecoder, SseEvent

__all__ = ["MALFORMED", "SseDecoder", "SseEvent", "parse_json"]
