"""Timing facts of one stream: when its first byte, first event and first token came, how long it ran,
how fast events came, and the longest silence between two events.

Times are what the caller says (the addon's wall-clock arrival of each chunk; seconds, any epoch). A
caller without a clock (the CLI reading a file) gives none: then only event numbers are known.
"""

from __future__ import annotations


class StreamTiming:
    __slots__ = (
        "first_byte",
        "first_event",
        "gap",
        "gap_after",
        "last_byte",
        "last_event",
        "started",
    )

    def __init__(self, started: float | None) -> None:
        self.started = started  # when the request was sent
        self.first_byte: float | None = None
        self.last_byte: float | None = None
        self.first_event: float | None = None
        self.last_event: float | None = None
        self.gap = 0.0  # the longest silence between two events
        self.gap_after: int | None = None  # the event that silence followed

    def on_bytes(self, now: float) -> None:
        if self.first_byte is None:
            self.first_byte = now
        self.last_byte = now

    def on_events(self, now: float, first_number: int) -> None:
        """Events ``first_number``... arrived at ``now`` (in one chunk: no silence between them)."""
        last = self.last_event
        if last is None:
            self.first_event = now
        elif now - last > self.gap:
            self.gap = now - last
            self.gap_after = first_number - 1
        self.last_event = now

    def facts(self, events: int, first_token: tuple[int, float | None] | None, end: float | None) -> dict:
        origin = self.started if self.started is not None else self.first_byte
        token_event, token_at = first_token if first_token else (None, None)
        last = end if end is not None else self.last_byte
        span = (
            self.last_event - self.first_event
            if self.first_event is not None and self.last_event is not None
            else None
        )
        return {
            "clock": self.first_byte is not None,
            "time_to_first_byte": _since(origin, self.first_byte) if self.started is not None else None,
            "time_to_first_event": _since(origin, self.first_event),
            "time_to_first_token": _since(origin, token_at),
            "first_token_event": token_event,
            "duration": _since(origin, last),
            "events_per_second": round(events / span, 3) if span else None,
            "longest_gap": round(self.gap, 6) if self.gap_after is not None else None,
            "longest_gap_after_event": self.gap_after,
        }


def _since(origin: float | None, moment: float | None) -> float | None:
    if origin is None or moment is None:
        return None
    return round(moment - origin, 6)
