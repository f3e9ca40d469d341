"""What an exchange is, decided once for every front door (the addon live, its content view, the CLI on a
raw file or a dump): an LLM stream, a non-streamed LLM message, an HTTP error on an LLM path, or none of
ours; and the result of a whole one, read the same way wherever it comes from."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from . import formats
from .limits import DEFAULT_LIMITS, Limits
from .request import decoded
from .result import Result, add_warnings

STREAM = "stream"
MESSAGE = "message"
HTTP_ERROR = "http-error"
STREAM_CONTENT_TYPES = ("text/event-stream", "application/vnd.amazon.eventstream", "application/x-ndjson")


@dataclass(frozen=True, slots=True)
class Exchange:
    kind: str  # STREAM, MESSAGE or HTTP_ERROR
    format: str | None  # None only for a stream on a path we do not know: its first bytes will tell
    stream_asked: bool = False  # an HTTP error where a stream was asked for (the path, or "stream": true)

    @property
    def streamed(self) -> bool:
        return self.kind == STREAM


def media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def maybe_llm(path: str | None, content_type: str | None) -> bool:
    """A cheap first look (a few string checks): could this be ours at all? Other traffic stops here."""
    return (path is not None and formats.path_format(path) is not None) or media_type(
        content_type
    ) in STREAM_CONTENT_TYPES


def classify(
    *,
    path: str | None = None,
    status: int | None = None,
    content_type: str | None = None,
    request: bytes | str | dict | Callable[[], bytes | str | dict | None] | None = None,
    head: bytes | None = None,
) -> Exchange | None:
    """What this exchange is, from what is known of it: the request path, the response status and content
    type, the request body (or a function of no arguments that returns it, called only where the body
    decides: a request may be a MiB, compressed), the first bytes of the response body. None: not an LLM
    exchange we read.

    The path says which API. On it, a status of 400 or more is an HTTP error; else the content type (or
    the path itself, for the streaming endpoints of Gemini, Bedrock and Vertex) says streamed or not, and
    a response labelled neither way is a stream when the request asked for one (``"stream": true``). A
    stream on a path we do not know is recognised from its bytes. With no path at all (a captured body),
    the first bytes alone decide.
    """
    kind = media_type(content_type)
    found = formats.path_format(path) if path is not None else None
    if found is None:
        if kind in STREAM_CONTENT_TYPES and (status is None or status < 400):
            return Exchange(STREAM, None)
        if path is None and head is not None:
            return _from_bytes(head)
        return None
    format, always = found
    if status is not None and status >= 400:
        return Exchange(HTTP_ERROR, format, always or _asked_to_stream(request))
    if always or kind in STREAM_CONTENT_TYPES:
        return Exchange(STREAM, format)
    if kind == "application/json" or kind.endswith("+json"):
        return Exchange(MESSAGE, format)
    if _asked_to_stream(request):
        return Exchange(STREAM, format)
    if head is not None:  # labelled neither way, nor asked: the body tells
        named = _from_bytes(head)
        if named is not None and named.format == format:
            return named
    return None


def _asked_to_stream(request) -> bool:
    if callable(request):
        request = request()
    if isinstance(request, bytes):
        if b'"stream"' not in request:
            return False  # the common case, without decoding the body
    elif isinstance(request, str) and '"stream"' not in request:
        return False
    body = decoded(request)
    return body is not None and body.get("stream") is True


def _from_bytes(head: bytes) -> Exchange | None:
    if head.lstrip()[:1] == b"{":
        format = formats.sniff_message(head)
        if format is not None:
            return Exchange(MESSAGE, format)
    format = formats.sniff_format(head[: formats.SNIFF_BYTES])
    return Exchange(STREAM, format) if format is not None else None


def analyze_exchange(
    exchange: Exchange,
    body: bytes,
    *,
    request=None,
    encoding: str | None = None,
    status: int | None = None,
    reason: str = "",
    content_type: str = "",
    limits: Limits = DEFAULT_LIMITS,
    chunk: int = 64 * 1024,
) -> Result | None:
    """The result of a whole exchange (a stream's body as sent, still encoded; a message's decoded). None:
    a stream of unknown format that turned out to be no LLM stream we read."""
    from .stream import StreamAccumulator, analyze_http_error, analyze_message

    if exchange.kind == HTTP_ERROR:
        # An HTTP error or a message is always on a known path, or recognised: its format is never None.
        return analyze_http_error(
            body,
            cast(str, exchange.format),
            status=status or 0,
            reason=reason,
            content_type=content_type,
            streamed=exchange.stream_asked,
        )
    if exchange.kind == MESSAGE:
        return analyze_message(body, cast(str, exchange.format), request=request)
    accumulator = StreamAccumulator(exchange.format, request=request, encoding=encoding, limits=limits)
    for start in range(0, len(body), chunk):
        accumulator.feed(body[start : start + chunk])
    return accumulator.finish()


def detect_format(head: bytes, *, path: str | None = None) -> str | None:
    """The format of a body, from its path when given, else from its first bytes (streamed ones)."""
    found = formats.path_format(path) if path is not None else None
    return found[0] if found is not None else formats.sniff_format(head)


FROM_THE_RECORD = "recorded live by the addon; the rest re-computed from the stored body"
FROM_THE_STAMPS = "the flow's timestamps (the addon did not record this flow); the rest re-computed"


def stored_timing(
    result: Result,
    recorded: dict | None,
    stamps: tuple[float | None, float | None, float | None] | None,
    from_stamps: str = FROM_THE_STAMPS,
) -> str | None:
    """A stored stream read whole (a dump's flow, a HAR entry, a flow loaded into the proxy or answered
    whole by an addon): its body has no clock of its own. The timing the addon measured live, where the
    flow carries its record, is kept (with each call's times, and its stall notes); else what the flow's
    ``stamps`` (request sent, response's first byte, its last) tell. Returns where the timing came from
    (``from_stamps`` for the stamps), or None when neither tells."""
    timing = recorded.get("timing") if recorded is not None else None
    if recorded is not None and type(timing) is dict and timing.get("clock"):
        result["timing"] = cast(Any, timing)
        _call_times(result, recorded)
        stalls = [w for w in recorded.get("warnings", ()) if type(w) is dict and w.get("code") == "stalled"]
        add_warnings(result, stalls)
        return FROM_THE_RECORD
    if stamps is None:
        return None
    sent, first, last = stamps
    if sent is None or first is None or first < sent:  # a HAR loaded by mitmproxy has its end as "sent"
        return None
    duration = last - sent if last is not None else None
    span = last - first if last is not None else None
    result["timing"] = {
        "clock": True,
        "time_to_first_byte": round(first - sent, 6),
        "time_to_first_event": None,
        "time_to_first_token": None,
        "first_token_event": None,
        "duration": round(duration, 6) if duration is not None else None,
        "events_per_second": round(result["stats"]["events"] / span, 3) if span else None,
        "longest_gap": None,
        "longest_gap_after_event": None,
    }
    return from_stamps


def _call_times(result: Result, recorded: dict) -> None:
    """Each call's first and last arrival, as the addon saw them, where it rebuilt the same calls."""
    for choice, live in zip(result["choices"], recorded.get("choices") or (), strict=False):
        calls, live_calls = choice["tool_calls"], live.get("tool_calls") or ()
        if [(c["id"], c["name"]) for c in calls] != [(c.get("id"), c.get("name")) for c in live_calls]:
            continue
        for call, live_call in zip(calls, live_calls, strict=True):
            call["first_at"], call["last_at"] = live_call.get("first_at"), live_call.get("last_at")
