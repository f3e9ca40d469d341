"""One response body, rewritten on its way to the client: content decoding -> raw events -> injections ->
repairs -> byte-level rechunking.

Every event read from the input is written in a ledger with its original bytes until it has been sent.
Whatever goes wrong (an exception, a frame that cannot be read, a body that does not decode), the events
not yet sent leave with those bytes, in their order, and the rest of the body passes through unchanged:
no byte is lost or sent twice.
"""

from __future__ import annotations

import orjson

from .. import formats
from ..assembly import DEFAULT_MAX_CALLS
from ..boundaries import cut, hostile_cuts
from ..decoding import ContentDecoder, ContentEncoder
from ..decoding import supported as encoding_supported
from ..framing import FRAMERS, EventStreamDecoder, Framer, SseDecoder
from ..framing.sse import DEFAULT_MAX_EVENT_BYTES
from .events import Unit
from .formats import INJECTIONS, REPAIRS, build_stages, framing, skip_reason
from .reorder import Reorderer

_REWRITE, _PLAIN, _RAW, _DONE = "rewrite", "plain", "raw", "done"
_BATCH = 1024 * 1024  # decoded bytes rewritten (and re-encoded) at a time
_NO_CAP = 1 << 62  # decoded bytes all go to the client: nothing to cap, unlike the analysis


def _load(payload: bytes | None) -> dict | None:
    if payload is None or payload == b"[DONE]":
        return None
    try:
        obj = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return None
    return obj if type(obj) is dict else None


def _frame_cuts(frame: bytes) -> list[int]:
    # Inside the prelude's first length, between the lengths and their CRC, between the prelude and the
    # headers, and before the message CRC: where a reader that wants whole frames per read goes wrong.
    return [1, 8, 12, len(frame) - 4]


class StreamRewriter:
    """Feed the body's bytes as received; each call returns the pieces to send now (each non-empty).

    ``inject`` and ``repair`` name transformations from ``INJECTIONS`` and ``REPAIRS``; those that do not
    apply to ``format`` are listed in the report's ``skipped``. With ``encoding`` (the response's
    Content-Encoding), the input is decoded, rewritten and encoded again the same way (each write flushed, so
    the client can decode it at once); with ``reencode=False`` the output is identity, and ``decodes`` tells
    the caller to drop the header. At most ``max_held_bytes`` of events are held (beyond, everything held
    leaves in arrival order); an event larger than ``max_event_bytes`` stops the rewriting (it and the rest
    pass unchanged). Never raises once built.
    """

    def __init__(
        self,
        format: str,
        *,
        inject=(),
        repair=(),
        encoding: str | None = None,
        max_held_bytes: int = 8 * 1024 * 1024,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        reencode: bool = True,
        max_calls: int = DEFAULT_MAX_CALLS,
    ) -> None:
        try:
            self._framing = framing(format)
        except KeyError:
            raise ValueError(f"unknown format {format!r}") from None
        for names, known, kind in ((inject, INJECTIONS, "injection"), (repair, REPAIRS, "repair")):
            unknown = [name for name in names if name not in known]
            if unknown:
                raise ValueError(f"unknown {kind} {unknown[0]!r}; known: {', '.join(known)}")
        self.format = format
        self.max_held_bytes = max_held_bytes
        self.max_event_bytes = max_event_bytes
        self.max_calls = max_calls
        requested = set(inject) | set(repair)
        self._skipped = [
            {"name": name, "reason": skip_reason(format, name)}
            for name in (*INJECTIONS, *REPAIRS)
            if name in requested and skip_reason(format, name) is not None
        ]
        applied = {name for name in requested if skip_reason(format, name) is None}
        self._inject = [name for name in INJECTIONS if name in applied]
        self._repair = [name for name in REPAIRS if name in applied]
        self._rechunk = "rechunk" in applied
        self._counts: dict[str, int] = {}
        self._stages = build_stages(format, applied, self._counts)
        self._reorderers = [stage for stage in self._stages if isinstance(stage, Reorderer)]
        self._edits = [stage for stage in self._stages if hasattr(stage, "names_split")]
        self._splitter: SseDecoder | EventStreamDecoder | None
        if self._framing == "sse":
            self._splitter = SseDecoder(max_event_bytes, keep_raw=True)
        elif self._framing == "eventstream":
            self._splitter = EventStreamDecoder(max_event_bytes, keep_raw=True)
        else:
            self._splitter = None
        # Where calls arrive whole the body passes unsplit; the analysis's own framing still counts its
        # events, so the report says how many went through.
        self._counter: Framer | None = None
        self._ledger: dict[int, bytes] = {}  # origin -> original bytes, for every event read and not yet sent
        self._origins = 0
        self._out: list[bytes] = []
        self._mode = _REWRITE
        self._stopped: dict | None = None
        self._decoding_error: str | None = None
        self._content: ContentDecoder | None = None
        self._encoder: ContentEncoder | None = None
        self._ready: list[bytes] = []  # pieces ready to send: encoded (when re-encoding) or as they are
        self._encoding: str | None = None
        self._bytes_in = self._bytes_out = 0
        self._events_in = self._events_out = 0
        self._held_events_max = self._held_bytes_max = 0
        self._released_early = False
        self._writes = 0
        if not self._stages and not self._rechunk:
            self._mode = _RAW  # nothing applies: the body passes as it came, still encoded
        elif encoding and encoding.strip().lower() not in ("", "identity"):
            if encoding_supported(encoding):
                self._content = ContentDecoder(encoding, _NO_CAP)
                self._encoding = encoding
                if reencode:
                    self._encoder = ContentEncoder(encoding)
            else:
                self._mode = _RAW
                self._stop_note(f"unsupported Content-Encoding {encoding!r}: the body passes as it is")
        self._reencodes = self._encoder is not None
        self._encoded_any = False

    @property
    def decodes(self) -> bool:
        """Whether the output is the decoded body (the caller drops Content-Encoding); the caller drops
        Content-Length whenever it rewrites."""
        return self._encoding is not None and not self._reencodes

    # -- the public calls --------------------------------------------------------------------------------

    def feed(self, data: bytes) -> list[bytes]:
        if data:
            self._bytes_in += len(data)
            try:
                self._feed(data)
            except Exception as exc:  # noqa: BLE001 - never raise: the body passes through unchanged
                self._abandon(exc)
        return self._pieces()

    def finish(self) -> list[bytes]:
        """End of stream (also an upstream drop): everything still held, in a valid order."""
        if self._mode != _DONE:
            try:
                self._finish()
            except Exception as exc:  # noqa: BLE001
                self._abandon(exc)
            self._mode = _DONE
        return self._pieces()

    def report(self) -> dict:
        return {
            "format": self.format,
            "inject": list(self._inject),
            "repair": list(self._repair),
            "skipped": [dict(entry) for entry in self._skipped],
            "decoded": self._encoding,
            "reencoded": self._reencodes,
            "events_in": self._events_in,
            "events_out": self._events_out,
            "held_events_max": self._held_events_max,
            "held_bytes_max": self._held_bytes_max,
            "calls_reordered": sum(stage.calls_reordered for stage in self._reorderers),
            "names_split": sum(stage.names_split for stage in self._edits),
            "released_early": self._released_early,
            "writes": self._writes,
            "bytes_in": self._bytes_in,
            "bytes_out": self._bytes_out,
            "edits": dict(self._counts),
            "stopped": dict(self._stopped) if self._stopped else None,
            "decoding_error": self._decoding_error,
        }

    # -- the paths bytes take ----------------------------------------------------------------------------

    def _feed(self, data: bytes) -> None:
        mode = self._mode
        if mode == _RAW or mode == _DONE:
            self._out.append(data)
            return
        if self._content is None:
            self._decoded(data)
            return
        # Decoded 64 KiB at a time and rewritten (and re-encoded) each MiB: a bomb is never held whole.
        batch: list[bytes] = []
        size = 0
        try:
            for piece in self._content.decode_pieces(data):
                batch.append(piece)
                size += len(piece)
                if size >= _BATCH:
                    try:
                        self._decoded(b"".join(batch))
                        self._encode_out()
                    except Exception as exc:  # noqa: BLE001 - the rewriter's fault, not the body's:
                        self._abandon(exc)  # what it read leaves as it came, and the body goes on decoding
                    batch, size = [], 0
            error = self._content.error
        except Exception as exc:  # noqa: BLE001 - it should not raise; if it does, it failed to decode
            error = f"{type(exc).__name__}: {exc}"
        if error is not None:
            # What this input decoded to (beyond a full batch) is dropped: the input itself is passed,
            # from here on raw, after everything decoded before it.
            self._decoding_error = error
            try:
                self._stop(f"the body stopped decoding ({error}): the rest passes raw")
            except Exception as exc:  # noqa: BLE001
                self._abandon(exc)
            self._seal()
            self._mode = _RAW
            self._out.append(data)
            return
        if batch:
            self._decoded(b"".join(batch))

    def _decoded(self, data: bytes) -> None:
        if self._mode == _PLAIN:
            self._out.append(data)
        elif self._splitter is None:
            self._count_events(data)
            self._out += self._cut(data) if self._rechunk else [data]
        else:
            self._events(self._splitter.feed(data))
            if self._mode == _REWRITE and self._calls_seen() > self.max_calls:
                # What each call is stays in memory while the stream runs: a stream of new calls that
                # never ends is passed on as it is after the cap, like an oversized event.
                self._stop(f"more than {self.max_calls} tool calls: the rest passes as it is")

    def _count_events(self, data: bytes) -> None:
        if self._counter is None:
            if not data.strip():
                return  # blank: no event yet, and not enough to tell a JSON array from SSE
            self._counter = FRAMERS[formats.FORMATS[self.format].framing_for(data)](self.max_event_bytes)
        self._count(self._counter.feed(data))

    def _count(self, events: list) -> None:
        self._events_in += len(events)
        self._events_out += len(events)

    def _calls_seen(self) -> int:
        return max((getattr(stage, "calls_seen", 0) for stage in self._stages), default=0)

    def _finish(self) -> None:
        if self._content is not None and self._mode in (_REWRITE, _PLAIN):
            tail = self._content.flush()
            if self._content.error is not None:
                self._decoding_error = self._content.error  # a truncated body: nothing is left to pass
            if tail:
                self._decoded(tail)
        if self._splitter is None and self._counter is not None and self._mode == _REWRITE:
            self._count(self._counter.close())
        if self._mode != _REWRITE or self._splitter is None:
            return
        self._commit(self._flush())
        self._splitter.close()
        rest = self._splitter.rest
        if rest:
            # An unfinished last event (the input was cut): it leaves last, as it came.
            self._events_in += 1
            self._events_out += 1
            self._out += self._cut(rest) if self._rechunk else [rest]

    def _events(self, events: list) -> None:
        """Framed events, each with its exact bytes (``raw``): into the ledger, then through the stages."""
        first = self._origins
        ledger = self._ledger
        for event in events:
            ledger[self._origins] = event.raw
            self._origins += 1
        self._events_in += len(events)
        units: list = []
        for number, event in enumerate(events, first):
            if len(event.raw) > self.max_event_bytes:
                self._stop(
                    f"an event of {len(event.raw)} bytes is over the {self.max_event_bytes} cap", units
                )
                return
            units += self._step(self._unit(number, event))
        self._commit(units)
        splitter = self._splitter
        if splitter is None:  # never: only a splitter's events come here
            return
        if splitter.broken:
            self._stop(f"{splitter.broken}: the rest passes as it is")
        elif splitter.pending > self.max_event_bytes:
            self._stop(f"an event over {self.max_event_bytes} bytes: the rest passes as it is")

    def _unit(self, origin: int, event) -> Unit:
        raw = event.raw
        if not self._stages:
            return Unit(origin, raw, None, [[raw, None]])  # only rechunk: nothing reads the payload
        if self._framing == "sse":
            if event.kind == "quiet":
                return Unit(origin, raw, event.type, [[raw, None]], quiet=True)
            return Unit(origin, raw, event.type, [[raw, _load(event.data)]])
        return Unit(origin, None, event.type, [[raw, _load(event.data) if event.kind == "event" else None]])

    # -- the stages --------------------------------------------------------------------------------------

    def _step(self, unit: Unit) -> list:
        units = [unit]
        for stage in self._stages:
            if len(units) == 1:
                units = stage.push(units[0])
            else:
                units = [out for unit in units for out in stage.push(unit)]
        if self._reorderers:
            held_bytes = sum(stage.held_bytes for stage in self._reorderers)
            held_events = sum(stage.held_events for stage in self._reorderers)
            self._held_bytes_max = max(self._held_bytes_max, held_bytes)
            self._held_events_max = max(self._held_events_max, held_events)
            if held_bytes > self.max_held_bytes:
                self._released_early = True
                units += self._drain()
        return units

    def _drain(self) -> list:
        """Everything held leaves, in arrival order, through the stages after the one that held it."""
        for stage in self._reorderers:
            stage.holding = False
        try:
            units: list = []
            for stage in self._stages:
                passed = [out for unit in units for out in stage.push(unit)]
                units = stage.drain() + passed if isinstance(stage, Reorderer) else passed
            return units
        finally:
            for stage in self._reorderers:
                stage.holding = True

    def _flush(self) -> list:
        """The end of the stream ends every run: all that is held leaves, in each policy's order."""
        units: list = []
        for stage in self._stages:
            units = [out for unit in units for out in stage.push(unit)]
            if isinstance(stage, Reorderer):
                units += stage.flush()
        return units

    # -- output ------------------------------------------------------------------------------------------

    def _cut(self, data: bytes) -> list[bytes]:
        return cut(data, hostile_cuts(data))

    def _commit(self, units: list) -> None:
        if self._rechunk:
            pieces = []
            frames = self._framing == "eventstream"
            for unit in units:
                for data, _ in unit.parts:
                    positions = hostile_cuts(data)
                    if frames:
                        positions = sorted({*positions, *_frame_cuts(data)})
                    pieces += cut(data, positions)
        else:
            data = b"".join(unit.data for unit in units)
            pieces = [data] if data else []
        ledger = self._ledger
        for unit in units:
            ledger.pop(unit.origin, None)
            self._events_out += len(unit.parts)
        self._out += pieces

    def _encode_out(self) -> None:
        """Move what is ready from ``_out`` to ``_ready``, encoded (each piece flushed) when re-encoding."""
        if self._out:
            encoder = self._encoder
            if encoder is None:
                self._ready += self._out
            else:
                encoded = [encoder.encode(piece) for piece in self._out if piece]
                self._ready += encoded
                self._encoded_any = self._encoded_any or bool(encoded)
            self._out = []

    def _seal(self) -> None:
        """End the re-encoded stream: what is ready, then the encoder's end (a gzip trailer, say)."""
        self._encode_out()
        if self._encoder is not None and self._encoded_any:  # nothing encoded yet: nothing to end
            self._ready.append(self._encoder.finish())
        self._encoder = None

    def _pieces(self) -> list[bytes]:
        self._encode_out()
        if self._mode == _DONE:
            self._seal()
        out = [piece for piece in self._ready if piece]
        self._ready = []
        self._writes += len(out)
        self._bytes_out += sum(map(len, out))
        return out

    # -- stopping ----------------------------------------------------------------------------------------

    def _stop_note(self, reason: str) -> None:
        if self._stopped is None:
            self._stopped = {"reason": reason, "after_events": self._events_out}

    def _stop(self, reason: str, units: list | tuple = ()) -> None:
        """Stop rewriting, in good order: what is held leaves as the end of the stream would release it,
        then the events not processed yet and the bytes not framed yet, unchanged; the rest passes as is."""
        self._stop_note(reason)
        if self._mode == _REWRITE and self._splitter is not None:
            self._commit([*units, *self._flush()])
            self._release_ledger()
        self._mode = _PLAIN

    def _abandon(self, exc: Exception) -> None:
        """Something raised: the events read and not sent leave with their original bytes, in order."""
        self._stop_note(f"internal error ({type(exc).__name__}: {exc}): the rest passes as it is")
        self._release_ledger()
        if self._mode == _REWRITE:
            self._mode = _PLAIN

    def _release_ledger(self) -> None:
        rest = b"".join(self._ledger.values())
        self._events_out += len(self._ledger)
        self._ledger.clear()
        if self._splitter is not None:
            self._splitter.close()
            rest += self._splitter.rest
        if rest:
            self._out.append(rest)
