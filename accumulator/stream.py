"""One stream, from bytes to result: content decoding -> framing -> dialect -> assembly (+ strategies)
-> result.

Sans-IO: the caller feeds whatever bytes it has, in whatever pieces, then calls ``finish()``. When the
format is not given it is recognised from the first bytes (held until then, within a cap).
"""

from __future__ import annotations

from typing import Final

from . import formats
from .assembly import Assembly, error_text
from .decoding import ContentDecoder, supported
from .formats import DEFAULT_FORMAT, SNIFF_BYTES, sniff_format
from .formats.base import JsonDialect, WireFormat, snippet
from .framing import FRAMERS, MALFORMED, OVERSIZED, Framer, SseDecoder, parse_json
from .limits import DEFAULT_LIMITS, DEFAULT_MAX_DECODED_BYTES, Limits, checked_strategies
from .request import RequestFacts, request_facts
from .result import Result, build_result
from .strategies import STRATEGIES
from .timing import StreamTiming
from .warnings import WarningLog

# Final: compiled, read from a static each event, not from the module's dict.
_OVERSIZED: Final = OVERSIZED

__all__ = [
    "DEFAULT_MAX_DECODED_BYTES",
    "StreamAccumulator",
    "analyze",
    "analyze_http_error",
    "analyze_message",
]


class _WholeEvents:
    """The framer of a format whose events come whole (WebSocket messages): bytes frame into nothing."""

    max_event_bytes = 0

    def feed(self, _chunk: bytes) -> list:
        return []

    def close(self) -> list:
        return []


_WHOLE = _WholeEvents()


class StreamAccumulator:
    """Feed the raw bytes of one streamed response; ``finish()`` returns its result dict.

    ``format`` names the wire format (``FORMATS``); None recognises it from the first bytes, and then
    ``finish()`` returns None if they were not an LLM stream it reads. ``request`` is the request body
    (bytes, str or a decoded dict), or its facts read already (``accumulator.request.request_facts``):
    with it, calls are checked against the tools it declares.
    ``encoding`` is the response's Content-Encoding: the bytes fed are as sent, decoded here.

    ``limits`` (``accumulator.Limits``) holds the memory of one stream whatever it sends and names the
    strategies replayed; the keywords after it change one limit each.
    """

    def __init__(
        self,
        format: str | None = DEFAULT_FORMAT,
        *,
        request: bytes | str | dict | RequestFacts | None = None,
        encoding: str | None = None,
        started_at: float | None = None,
        limits: Limits = DEFAULT_LIMITS,
        strategies: tuple[str, ...] | list[str] | None = None,
        max_event_bytes: int | None = None,
        max_decoded_bytes: int | None = None,
        max_calls: int | None = None,
        max_argument_chars: int | None = None,
        stall_seconds: float | None = None,
    ) -> None:
        self._wire: WireFormat | None = formats.get(format) if format is not None else None
        # The caps and strategies come in one Limits; a keyword given here changes just that one. Read one
        # by one rather than through a new Limits: a stream's set-up is paid per flow.
        if strategies is None:
            strategies = limits.strategies
        elif strategies != limits.strategies:
            strategies = checked_strategies(strategies)
        self.format = format
        self.warnings = WarningLog()
        self._strategies = strategies
        self._max_event_bytes = limits.max_event_bytes if max_event_bytes is None else max_event_bytes
        self._request = request
        self._content: ContentDecoder | None = None
        self._stopped = False  # analysis given up (undecodable body); bytes are still counted
        self._framer: Framer | None = None
        self._dialect: JsonDialect | None = None
        self._assembly: Assembly | None = None
        self._head: list[bytes] = []  # decoded bytes held until format and framing are known
        self._head_len = 0
        self._next_sniff = 16
        self._events = 0
        self._bytes = 0
        self._result: Result | None = None
        self._timing = StreamTiming(started_at)
        self._now: float | None = None  # arrival time of the bytes being fed, when the caller has a clock
        self._stall_seconds = limits.stall_seconds if stall_seconds is None else stall_seconds
        self._max_calls = limits.max_calls if max_calls is None else max_calls
        self._max_argument_chars = (
            limits.max_argument_chars if max_argument_chars is None else max_argument_chars
        )
        self._max_decoded_bytes = limits.max_decoded_bytes if max_decoded_bytes is None else max_decoded_bytes
        if encoding and encoding.strip().lower() not in ("identity", ""):
            if supported(encoding):
                self._content = ContentDecoder(encoding, self._max_decoded_bytes)
            else:
                self._stop("decoding-failed", f"unsupported Content-Encoding {encoding!r}", encoding=encoding)
        if self._wire is not None and not self._wire.needs_head:
            self._start(b"")  # nothing to wait for: frame from the first byte

    @property
    def response_id(self) -> str | None:
        """The response id the stream has named so far, if any."""
        return self._assembly.response_id if self._assembly is not None else None

    def has_call(self, call_id: str) -> bool:
        """Whether a call of this id has opened so far."""
        assembly = self._assembly
        return assembly is not None and any(call_id in state.by_id for state in assembly.choices.values())

    def name_model(self, model: str) -> None:
        """The model, as the front door knows it (a WebSocket session's), unless the events name one."""
        if self._assembly is not None and not self._assembly.model:
            self._assembly.model = model

    def note(self, code: str, message: str, **details) -> None:
        """Add a warning from the front door (e.g. the addon's ``body-truncated``) to this stream's result."""
        self.warnings.add(code, message, **details)

    def snapshot(self) -> dict | None:
        """The calls and text so far, for live progress: cheap, no final checks, None before any frame."""
        assembly = self._assembly
        if assembly is None or self._result is not None:
            return None
        return {
            "format": self.format,
            "model": assembly.model,
            "events": self._events,
            "bytes": self._bytes,
            "choices": [
                {
                    "index": state.index,
                    "text_chars": sum(map(len, state.text)),
                    "tool_calls": [
                        {"id": c.id, "name": c.name, "arguments": c.arguments, "deltas": c.deltas}
                        for c in state.calls
                    ],
                }
                for state in assembly.choices.values()
            ],
        }

    def feed(self, data: bytes, now: float | None = None) -> None:
        """``now``: when these bytes arrived (seconds, the same clock as ``started_at``), if known."""
        self._bytes += len(data)
        if now is not None:
            self._now = now
            self._timing.on_bytes(now)
        if self._stopped:
            return
        if self._content is not None:
            # Piece by piece as the decompressor produces them: a bomb's output is never held whole.
            for piece in self._content.decode_pieces(data):
                self._feed_decoded(piece)
                if self._stopped:  # not an LLM stream after all: decode no more
                    return
            self._check_content()
            return
        if self._bytes > self._max_decoded_bytes:
            # Not compressed: the same cap on the bytes analysed (a stream that never ends).
            data = data[: len(data) - (self._bytes - self._max_decoded_bytes)]
            self._stop(
                "decoded-size-cap",
                f"the body exceeded {self._max_decoded_bytes} bytes; analysis stopped there",
                limit=self._max_decoded_bytes,
            )
            if not data:
                return
        # _feed_decoded, written out: this is the path of every chunk that is not compressed.
        framer = self._framer
        if framer is None:
            self._hold(data, final=False)
        elif isinstance(framer, SseDecoder):
            self._consume(framer.feed(data))  # the common framer, as itself: compiled, a direct call
        else:
            self._consume(framer.feed(data))

    def feed_object(self, obj: dict, nbytes: int, now: float | None = None) -> None:
        """One event that came whole and already read as a JSON object (a WebSocket message of
        ``nbytes``): no decoding, no framing. The format must be given. The bytes cap holds as for a
        body: past it, events are counted, not read."""
        self._bytes += nbytes
        if self._stopped:
            return
        if self._bytes > self._max_decoded_bytes:
            self._stop(
                "decoded-size-cap",
                f"the response's messages exceeded {self._max_decoded_bytes} bytes; analysis stopped there",
                limit=self._max_decoded_bytes,
            )
            return
        assembly, dialect = self._assembly, self._dialect
        assert assembly is not None and dialect is not None, "a format whose events come whole was given"
        number = self._events = self._events + 1
        if now is not None:
            self._now = now
            self._timing.on_bytes(now)
            self._timing.on_events(now, number)
            assembly.now = now
        for op in dialect.obj_ops(obj, None, number):
            assembly.apply(op)

    def finish(self, now: float | None = None) -> Result | None:
        """End of input (at ``now``, if known): the result (None for a stream of unknown format that
        turned out to be none we read). Calling it again returns the same result."""
        if self._result is not None:
            return self._result
        if self._content is not None and not self._stopped:
            tail = self._content.flush()
            self._check_content()
            if tail and not self._stopped:
                self._feed_decoded(tail)
        if self._framer is None and not self._stopped:
            self._hold(b"", final=True)
        if self.format is None:
            return None
        if self._framer is None:  # nothing was ever framed (an empty or undecodable body)
            self._start(b"")
        framer, dialect, assembly = self._framer, self._dialect, self._assembly
        assert framer is not None and dialect is not None and assembly is not None  # set by _start
        self._consume(framer.close())
        if getattr(framer, "unterminated", False):
            self.warnings.add(
                "unterminated-event",
                f"the input ended inside event {self._events + 1} (no closing delimiter); it was read anyway",
                event=self._events,
            )
        incomplete = getattr(framer, "incomplete_bytes", 0)
        if incomplete:
            self.warnings.add(
                "malformed-event",
                f"the input ended inside a frame ({incomplete} bytes of it)",
                event=self._events + 1,
                data="",
            )
        for op in dialect.finish(self._events):
            assembly.apply(op)
        timing = self._timing.facts(self._events, assembly.first_token, now)
        if self._stall_seconds is not None and (timing["longest_gap"] or 0) > self._stall_seconds:
            self.warnings.add(
                "stalled",
                f"the stream went silent for {timing['longest_gap']:.1f} s after event "
                f"{timing['longest_gap_after_event']} (threshold {self._stall_seconds} s)",
                seconds=timing["longest_gap"],
                after_event=timing["longest_gap_after_event"],
                threshold=self._stall_seconds,
            )
        self._result = build_result(
            format=self.format,
            streamed=True,
            assembly=assembly,
            warnings=self.warnings,
            request=request_facts(self._request, self.format) if self._request is not None else None,
            events=self._events,
            nbytes=self._bytes,
            empty_arguments=dialect.empty_arguments,
            not_applicable=() if dialect.fragments else tuple(self._strategies),
            timing=timing,
            first_event_at=self._timing.first_event,
        )
        return self._result

    def _feed_decoded(self, data: bytes) -> None:
        # _feed_decoded, written out: this is the path of every chunk that is not compressed.
        if self._framer is None:
            self._hold(data, final=False)
        else:
            self._consume(self._framer.feed(data))

    def _check_content(self) -> None:
        content = self._content
        if content is None:
            return
        if content.error is not None:
            self._stop(
                "decoding-failed", f"the compressed body is corrupt: {content.error}", error=content.error
            )
        elif content.exceeded:
            # What was decoded up to the cap is still analysed; nothing after it.
            self.warnings.add(
                "decoded-size-cap",
                f"the decoded body exceeded {content.max_output_bytes} bytes; analysis stopped there",
                limit=content.max_output_bytes,
            )
            self._content = None
            self._stopped = True

    def _stop(self, code: str, message: str, **details) -> None:
        self.warnings.add(code, message, **details)
        self._stopped = True

    def _hold(self, data: bytes, *, final: bool) -> None:
        """Keep the first bytes until the format (and, for Gemini, the framing) can be told."""
        if data:
            self._head.append(data)
            self._head_len += len(data)
        if self.format is None:
            if not final and self._head_len < self._next_sniff:
                return
            # Sniff again only after the held bytes doubled: the work stays linear however they arrive.
            self._next_sniff = max(2 * self._head_len, self._head_len + 256)
            head = b"".join(self._head)
            self.format = sniff_format(head)
            if self.format is None:
                if final or self._head_len >= SNIFF_BYTES:
                    self._stopped = True  # not an LLM stream we read: hold nothing more
                    self._head.clear()
                return
        else:  # a format that comes in several framings: its first non-blank byte tells which
            head = b"".join(self._head)
            if not final and not head.lstrip(b"\xef\xbb\xbf \t\r\n"):
                return
        self._head.clear()
        self._wire = formats.get(self.format)
        self._start(head)

    def _start(self, head: bytes) -> None:
        wire = self._wire
        assert wire is not None  # known by now: given, or sniffed
        dialect_class = wire.dialect
        # A format that only travels over WebSockets has no framing: its events come whole (feed_object).
        framer = self._framer = (
            FRAMERS[wire.framing_for(head)](self._max_event_bytes) if wire.framings else _WHOLE
        )
        self._dialect = dialect_class(self.warnings)
        caps = (self._max_calls, self._max_argument_chars)
        strategies = [STRATEGIES[name](*caps) for name in self._strategies] if dialect_class.fragments else []
        self._assembly = Assembly(self.warnings, strategies, *caps)
        if head:
            self._consume(framer.feed(head))

    def _consume(self, events: list) -> None:
        if not events:
            return
        dialect, assembly = self._dialect, self._assembly
        assert dialect is not None and assembly is not None  # events come only once _start ran
        number = self._events
        if self._now is not None:
            self._timing.on_events(self._now, number + 1)
            assembly.now = self._now
        for event in events:
            if event is _OVERSIZED:
                limit = self._max_event_bytes
                self.warnings.add(
                    "oversized-event",
                    f"the event after event {number} exceeded {limit} bytes and was dropped",
                    after_event=number,
                    limit=limit,
                )
                continue
            number += 1
            # Methods called on their objects, not bound to locals first: compiled, that is a direct call.
            for op in dialect.ops(event, number):
                assembly.apply(op)
        self._events = number


def analyze(body: bytes, format: str | None = DEFAULT_FORMAT, **options) -> Result | None:
    """The result for a whole captured stream body."""
    accumulator = StreamAccumulator(format, **options)
    accumulator.feed(body)
    return accumulator.finish()


def analyze_message(body: bytes, format: str = DEFAULT_FORMAT, *, request=None) -> Result:
    """The result for a non-streamed (JSON) response of the same API: calls and text, no hazards."""
    dialect_class = formats.get(format).dialect
    warnings = WarningLog()
    assembly = Assembly(warnings, [])
    ops = dialect_class(warnings).message_ops(body)
    for op in ops:
        assembly.apply(op)
    return build_result(
        format=format,
        streamed=False,
        assembly=assembly,
        warnings=warnings,
        request=request_facts(request, format) if request is not None else None,
        events=1 if ops else 0,
        nbytes=len(body),
        empty_arguments=dialect_class.empty_arguments,
    )


def analyze_http_error(
    body: bytes, format: str, *, status: int, reason: str = "", content_type: str = "", streamed: bool = False
) -> Result:
    """The result for an error status (400 and up) on an LLM path, streamed request or not: no calls, an
    ``http-error`` naming the status, and the provider's error object when the body is JSON. ``streamed``:
    a stream was asked for (the result says so, though none came)."""
    formats.get(format)  # ValueError for a format we do not know
    warnings = WarningLog()
    assembly = Assembly(warnings, [])
    assembly.ended = True  # nothing more was coming: not a truncated stream
    obj, _ = parse_json(body.strip())
    error = obj if obj is not MALFORMED and type(obj) is dict else None
    kind = content_type.split(";", 1)[0].strip() or "no content type"
    shown = f"{status} {reason}".strip()
    warnings.add(
        "http-error",
        f"the upstream answered {shown} ({kind}, {len(body)} bytes) instead of a response: "
        + (error_text(error) if error is not None else snippet(body)),
        status=status,
        reason=reason,
        content_type=content_type,
        body=snippet(body),
    )
    assembly.errors.append(error if error is not None else {"status": status, "body": snippet(body)})
    return build_result(
        format=format,
        streamed=streamed,
        assembly=assembly,
        warnings=warnings,
        request=None,  # no calls came: checks against the request would only say so again
        events=0,
        nbytes=len(body),
    )
