"""The framing contract, written once: what every framer takes, gives back, and does at the end of input;
the neutral event every framer yields; and the marker of an event dropped for its size."""

from __future__ import annotations

from typing import Protocol, final

DEFAULT_MAX_EVENT_BYTES = 8 * 1024 * 1024


@final
class FramedEvent:
    """One framed event, whatever the framing (SSE, an NDJSON line, a JSON array element, an AWS frame).

    A class of its own, not a NamedTuple: compiled, building one and reading its fields are direct (a
    NamedTuple is built through ``tuple.__new__`` and read through descriptors, ~1,100 instructions an
    event). Events are equal when their fields are; they are not hashed.
    """

    __slots__ = ("data", "id", "kind", "raw", "type")

    def __init__(
        self,
        type: str | None,
        data: bytes,
        id: str | None,
        kind: str = "event",
        raw: bytes | None = None,
    ) -> None:
        self.type = type  # SSE ``event:`` field, AWS ``:event-type``; None when absent
        self.data = data  # SSE ``data:`` lines joined with LF; the payload otherwise; raw bytes, not decoded
        self.id = id  # SSE: the last event id (it persists across events, per the spec)
        self.kind = kind  # AWS ``:message-type`` ("event", "exception", "error"), "malformed", or "quiet"
        self.raw = raw  # the event's exact bytes on the wire, when the framer keeps them

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FramedEvent):
            return NotImplemented
        return (
            self.type == other.type
            and self.data == other.data
            and self.id == other.id
            and self.kind == other.kind
            and self.raw == other.raw
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"FramedEvent(type={self.type!r}, data={self.data!r}, id={self.id!r}, kind={self.kind!r}, "
            f"raw={self.raw!r})"
        )

    def with_raw(self, raw: bytes) -> FramedEvent:
        """The same event, carrying these bytes as its own."""
        return FramedEvent(self.type, self.data, self.id, self.kind, raw)


# Put in the output where an event was dropped for exceeding the cap (compare with ``is``).
OVERSIZED = FramedEvent("<oversized>", b"", None)


class Framer(Protocol):
    """What a framer is (``sse.SseDecoder``, ``ndjson.NdjsonDecoder``, ``jsonarray.JsonArrayDecoder``,
    ``eventstream.EventStreamDecoder``; ``FRAMERS`` names them).

    - ``Framer(max_event_bytes)``: an event larger than the cap is dropped and ``OVERSIZED`` put in its
      place; decoding resumes at the next event. Bytes waiting for the end of an event are held in one
      growing buffer (a ``bytearray``, never a list of pieces re-joined), so the work is O(bytes) however
      the input is cut, a line arriving byte by byte included.
    - ``feed(chunk) -> list[FramedEvent]``: every event the chunk completes, in order. Any bytes, cut
      anywhere (inside a line end, a UTF-8 character, a frame header); never raises.
    - ``close() -> list[FramedEvent]``: end of input. An event cut short is still dispatched when it can be
      read (``unterminated`` is then True), else its bytes are counted in ``incomplete_bytes``.

    The framers the rewriter uses (SSE, AWS frames) also have a raw mode, ``keep_raw=True``: every byte of
    the input belongs to exactly one event, whose ``raw`` holds it (an SSE block with no data is an event of
    kind "quiet"); nothing is dropped for its size (``pending`` says how many bytes wait, for the caller's
    own cap); a frame that cannot be read past sets ``broken``; and ``close()`` leaves the bytes of an
    unfinished event in ``rest`` instead of dispatching them. The rewriter thus needs no second splitter.
    """

    max_event_bytes: int

    def feed(self, chunk: bytes) -> list[FramedEvent]: ...

    def close(self) -> list[FramedEvent]: ...
