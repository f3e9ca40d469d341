"""The limits of one analysis, in one frozen object: the caps that bound a stream's memory whatever it
sends, the hazard strategies replayed, and the stall threshold. The addon builds it once from its options;
every accumulator it opens gets the same one."""

from __future__ import annotations

from dataclasses import dataclass

from .assembly import DEFAULT_MAX_ARGUMENT_CHARS, DEFAULT_MAX_CALLS
from .framing.sse import DEFAULT_MAX_EVENT_BYTES
from .strategies import DEFAULT_STRATEGIES, STRATEGIES

DEFAULT_MAX_DECODED_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Limits:
    """``max_event_bytes`` per event, ``max_decoded_bytes`` of body analysed (after decoding; the rest is
    counted, not read), ``max_calls`` tool calls rebuilt, ``max_argument_chars`` argument characters kept
    per call: each one hit is a warning in the result. ``stall_seconds``: a silence longer than this
    between two events is a ``stalled`` note (None: never)."""

    strategies: tuple[str, ...] = DEFAULT_STRATEGIES
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    max_decoded_bytes: int = DEFAULT_MAX_DECODED_BYTES
    max_calls: int = DEFAULT_MAX_CALLS
    max_argument_chars: int = DEFAULT_MAX_ARGUMENT_CHARS
    stall_seconds: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "strategies", checked_strategies(self.strategies))


def checked_strategies(names) -> tuple:
    """The strategies named, as a tuple; ValueError names any the core does not know."""
    unknown = [name for name in names if isinstance(name, str) and name not in STRATEGIES]
    if unknown:
        raise ValueError(f"unknown strategies {unknown}; known: {', '.join(STRATEGIES)}")
    return tuple(names)


DEFAULT_LIMITS = Limits()
