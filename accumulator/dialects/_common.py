"""What every JSON-speaking dialect shares: decoding an event's payload with warnings, and small value
helpers."""

from __future__ import annotations

from ..framing import MALFORMED, parse_json
from ..warnings import WarningLog

_SNIPPET = 200


class JsonDialect:
    """Base of the dialects. A subclass sets ``format`` and ``framing`` and implements ``ops``."""

    format = ""
    framing = "sse"  # "sse", "ndjson", "eventstream", or "gemini" (a JSON array, else SSE)
    # What a call with no argument text amounts to: "" where arguments are a string the client gets
    # as is (Chat, Responses, Cohere); "{}" where they are an object (Anthropic input, Bedrock, Gemini).
    empty_arguments = ""
    # Whether calls stream in fragments a client must route (else every call arrives whole and the
    # hazard strategies have nothing to get wrong).
    fragments = True

    def __init__(self, warnings: WarningLog) -> None:
        self._warn = warnings

    def ops(self, event, number: int) -> list:
        raise NotImplementedError

    def message_ops(self, body: bytes) -> list:
        """A non-streamed response of the same API, as the operations of a one-event stream."""
        raise NotImplementedError

    def finish(self, number: int) -> list:
        """Operations still held when the input ends (a dialect that assembles values itself)."""
        return []

    def _load(self, data: bytes, number: int) -> dict | None:
        obj, bad_utf8 = parse_json(data)
        if bad_utf8:
            self._warn.add("invalid-utf8", f"event {number} holds bytes that are not UTF-8", event=number)
        if obj is MALFORMED or type(obj) is not dict:
            self._malformed(number, data)
            return None
        return obj

    def _malformed(self, number: int, data: bytes, why: str = "is not a JSON object") -> None:
        self._warn.add(
            "malformed-event", f"event {number} {why}: {snippet(data)}", event=number, data=snippet(data)
        )


def as_int(value) -> int | None:
    return value if type(value) is int else None


def as_str(value) -> str | None:
    return value if type(value) is str else None


def as_list(value) -> list | tuple:
    return value if type(value) is list else ()


def as_dict(value) -> dict:
    return value if type(value) is dict else {}


def snippet(data: bytes) -> str:
    text = data[: _SNIPPET * 4].decode("utf-8", "replace")
    return text if len(text) <= _SNIPPET else text[:_SNIPPET] + "…"
