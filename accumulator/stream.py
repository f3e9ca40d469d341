"""One stream, from bytes to result: framing -> dialect -> assembly (+ strategies) -> result.

Sans-IO: the caller feeds whatever bytes it has, in whatever pieces, then calls ``finish()``.
"""

from __future__ import annotations

import orjson

from .assembly import Assembly
from .dialects import DIALECTS
from .framing import SseDecoder
from .framing.sse import DEFAULT_MAX_EVENT_BYTES, OVERSIZED
from .result import build_result
from .strategies import DEFAULT_STRATEGIES, STRATEGIES
from .warnings import WarningLog


class StreamAccumulator:
    """Feed the raw bytes of one streamed response; ``finish()`` returns its result dict.

    ``request`` is the request body (bytes, str or an already decoded dict): with it, calls are
    checked against the tools it declares. ``strategies`` names the hazard strategies to replay.
    """

    def __init__(
        self,
        format: str = "openai-chat",
        *,
        request: bytes | str | dict | None = None,
        strategies: tuple[str, ...] | list[str] = DEFAULT_STRATEGIES,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    ) -> None:
        dialect_class = DIALECTS.get(format)
        if dialect_class is None:
            raise ValueError(f"unknown format {format!r}; known: {', '.join(DIALECTS)}")
        unknown = [name for name in strategies if name not in STRATEGIES]
        if unknown:
            raise ValueError(f"unknown strategies {unknown}; known: {', '.join(STRATEGIES)}")
        self.format = format
        self.warnings = WarningLog()
        self._decoder = SseDecoder(max_event_bytes)
        self._dialect = dialect_class(self.warnings)
        self._assembly = Assembly(self.warnings, [STRATEGIES[name]() for name in strategies])
        self._declared = _declared_tools(dialect_class, request)
        self._events = 0
        self._bytes = 0
        self._result: dict | None = None

    def note(self, code: str, message: str, **details) -> None:
        """Add a warning from the front door (e.g. the addon's ``body-truncated``) to this stream's result."""
        self.warnings.add(code, message, **details)

    def feed(self, data: bytes) -> None:
        self._bytes += len(data)
        self._consume(self._decoder.feed(data))

    def finish(self) -> dict:
        """End of input: the result. Calling it again returns the same result."""
        if self._result is None:
            self._consume(self._decoder.close())
            if self._decoder.unterminated:
                self.warnings.add(
                    "unterminated-event",
                    f"the input ended inside event {self._events} (no closing blank line); it was read anyway",
                    event=self._events,
                )
            self._result = build_result(
                format=self.format,
                streamed=True,
                assembly=self._assembly,
                warnings=self.warnings,
                declared_tools=self._declared,
                events=self._events,
                nbytes=self._bytes,
            )
        return self._result

    def _consume(self, events: list) -> None:
        if not events:
            return
        parse = self._dialect.ops
        apply = self._assembly.apply
        number = self._events
        for event in events:
            if event is OVERSIZED:
                limit = self._decoder.max_event_bytes
                self.warnings.add(
                    "oversized-event",
                    f"the event after event {number} exceeded {limit} bytes and was dropped",
                    after_event=number,
                    limit=limit,
                )
                continue
            number += 1
            for op in parse(event, number):
                apply(op)
        self._events = number


def _declared_tools(dialect_class, request) -> set[str] | None:
    if request is None:
        return None
    if isinstance(request, (bytes, str)):
        try:
            request = orjson.loads(request)
        except orjson.JSONDecodeError:
            return None
    if type(request) is not dict:
        return None
    return dialect_class.declared_tools(request)


def analyze(body: bytes, format: str = "openai-chat", **options) -> dict:
    """The result for a whole captured stream body."""
    accumulator = StreamAccumulator(format, **options)
    accumulator.feed(body)
    return accumulator.finish()


def analyze_message(body: bytes, format: str = "openai-chat", *, request=None) -> dict:
    """The result for a non-streamed (JSON) response of the same API: calls and text, no hazards."""
    dialect_class = DIALECTS.get(format)
    if dialect_class is None:
        raise ValueError(f"unknown format {format!r}; known: {', '.join(DIALECTS)}")
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
        declared_tools=_declared_tools(dialect_class, request),
        events=1 if ops else 0,
        nbytes=len(body),
    )
