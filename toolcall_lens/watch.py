"""The stream callables the addon sets on an LLM flow: ``StreamWatch`` (feeds the core, keeps the body,
returns every chunk as it came), ``RewriteWatch`` (the same, on a stream rewritten for the client) and
``BodyWatch`` (keeps the body of a message mitmproxy streams though it is no stream).
Each has one error boundary: whatever fails inside, the bytes keep flowing and the failure is recorded."""

from __future__ import annotations

import asyncio
import time

from accumulator import StreamAccumulator, failure_result
from accumulator.decoding import supported as encoding_supported
from accumulator.request import RequestFacts
from accumulator.rewrite import INJECTIONS, REPAIRS, StreamRewriter
from accumulator.rewrite.formats import skip_reason

from .worker import FAILED, AnalysisWorker, RemoteAccumulator, describe, remote_settings, request_as_sent

# Chunks held before they are fed, each with its arrival time. Fed one at a time, between two chunks of a
# flow the proxy runs everything else (other flows, its own layers) and the core starts each feed with
# cold caches; fed a few dozen at a time, it runs warm. The result is the same: every chunk is fed with
# the time it arrived. In mitmproxy the batch is fed once the chunk that filled it is on its way (the
# event loop's next turn), so no chunk waits for it. docs/performance.md has the figures.
HELD_CHUNKS = 32
# Shipped to the analysis worker (toolcall_lens_worker) four times fewer times: each write to its pipe
# wakes it, and that costs the proxy's thread more than the bytes do. The end then waits for at most
# this many chunks to be read there, a fraction of a millisecond.
SHIPPED_CHUNKS = 128


def kept_in_part(kept: int, seen: int) -> str:
    """The message of a ``body-truncated`` note: a body the flow keeps in part."""
    return f"the flow keeps the first {kept} of {seen} bytes (toolcall_lens_body_cap)"


class StreamWatch:
    """The stream callable of one flow: feeds the accumulator, keeps the body, returns every chunk as is.

    It must never raise (mitmproxy would drop the chunk): a failure inside the analysis is recorded,
    analysis of this flow stops, and the bytes keep flowing. Chunks are fed ``HELD_CHUNKS`` at a time
    (shipped ``SHIPPED_CHUNKS`` at a time to a worker),
    and before every live update and at the end, so that what the accumulator says is never behind.
    The body is kept batch by batch too: each batch's chunks joined into one piece as it is fed (mitmproxy
    makes each chunk a small object of its own; thousands of them held to a long stream's end cost the
    proxy 0.7-1.5 us an event, and a chunk kept as it comes costs the callable a third of its time).
    ``defer`` (the event loop's ``call_soon``) runs a full batch after the chunk that filled it has gone;
    without it the batch is fed at once.
    """

    __slots__ = (
        "accumulator",
        "batch",
        "body_cap",
        "defer",
        "failure",
        "format",
        "held",
        "inner",
        "next_progress",
        "on_progress",
        "pieces",
        "progress_every",
        "remote",
        "request_read",
        "rewrite_note",
        "room",
        "seen",
        "times",
        "url",
    )

    def __init__(
        self,
        accumulator: StreamAccumulator,
        format: str | None,
        body_cap: int,
        inner=None,
        on_progress=None,
        progress_every: float = 0.0,
        defer=None,
    ) -> None:
        self.accumulator = accumulator
        # In the worker: fed by batches, shipped; its answers come later.
        self.remote = isinstance(accumulator, RemoteAccumulator)
        self.batch = SHIPPED_CHUNKS if self.remote else HELD_CHUNKS
        self.defer = defer
        self.on_progress = on_progress  # called with the watch, at most every ``progress_every`` seconds
        self.progress_every = progress_every
        self.next_progress = 0.0 if on_progress is not None else float("inf")
        self.format = format
        self.body_cap = body_cap  # bytes of body kept for the flow; 0 keeps none
        self.inner = inner  # a stream callable another addon set before us, still honoured
        self.pieces: list[bytes] = []  # the kept body, a piece a batch
        # The chunks not fed yet, and when each came: two lists, no tuple a chunk (a tracked object the
        # collector would follow), and shipped to a worker as they are.
        self.held: list[bytes] = []
        self.times: list[float] = []
        self.room = body_cap  # bytes the body cap leaves to keep
        self.seen = 0  # bytes of body seen, as of the last batch fed (``_keep``)
        self.failure: str | None = None
        self.rewrite_note: dict | None = None  # a rewrite was asked for and did not apply: why
        self.url: str | None = None  # the flow's request URL as mitmproxy shows it, once the addon read it
        # What the worker read of the request, when it read it (``RemoteAccumulator.finish``).
        self.request_read: list | None = None

    @property
    def kept(self) -> int:
        """Bytes of body kept so far."""
        return self.body_cap - self.room

    def unseen(self) -> bool:
        """Whether no byte ever came to it."""
        return self.seen == 0 and not self.held

    def __call__(self, chunk: bytes) -> bytes:
        if self.inner is not None:
            chunk = self.inner(chunk)
        try:
            if chunk:
                if self.failure is None:
                    now = time.time()
                    held = self.held
                    held.append(chunk)
                    self.times.append(now)
                    if now >= self.next_progress:  # never without live updates (infinity)
                        if self.next_progress:
                            self.feed_held()
                            self.next_progress = now + self.progress_every
                            self.on_progress(self)
                        else:  # the first chunk: the first update comes an interval later (none for
                            # a flow shorter than that, which would cost every addon a hook for nothing)
                            self.next_progress = now + self.progress_every
                    elif len(held) >= self.batch:
                        if self.defer is None:
                            self.feed_held()
                        elif len(held) == self.batch:  # once: the batch goes on growing until it runs
                            self.defer(self._feed_later)
                else:  # no analysis any more: the body is still kept, in order, a batch at a time
                    held = self.held
                    held.append(chunk)
                    if len(held) >= self.batch:
                        self._keep_held()
        except Exception as exc:  # noqa: BLE001 - the chunk must reach the client whatever happened
            self.failure = describe(exc)
        return chunk

    def feed_held(self, ship: bool = True) -> None:
        """Feed the chunks held so far, each with its arrival time (to the worker: the batch, shipped now,
        or without ``ship`` with the next message that goes); the body keeps them first."""
        held, times = self.held, self.times
        if not held:
            return
        self._keep(held)
        try:
            if self.remote:
                self.accumulator.feed_batch((held, times), ship)  # framed at once: the lists are free after
            else:
                feed = self.accumulator.feed
                for chunk, now in zip(held, times, strict=True):
                    feed(chunk, now)
        finally:  # the same two lists for the flow's life: none made a batch, none more for the collector
            held.clear()
            times.clear()

    def _keep(self, chunks: list[bytes]) -> None:
        """Count a batch's bytes, and keep them in the body as one piece, as far as the cap leaves room."""
        room = self.room
        if not room:
            self.seen += sum(map(len, chunks))
            return
        piece = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        size = len(piece)
        self.seen += size
        if size <= room:
            self.pieces.append(piece)
            self.room = room - size
        else:
            self.pieces.append(piece[:room])
            self.room = 0

    def _keep_held(self) -> None:
        """What is held, kept in the body without being fed (the analysis failed meanwhile)."""
        if self.held:
            self._keep(self.held)
            self.held.clear()
            self.times.clear()

    def _feed_later(self) -> None:
        """The deferred batch, on the event loop: never raises (the failure is the flow's, as in __call__)."""
        if self.failure is None:
            try:
                self.feed_held()
            except Exception as exc:  # noqa: BLE001
                self.failure = describe(exc)

    def finish(self) -> tuple[dict | None, bytes]:
        """The result (None: not an LLM stream after all) and the kept body. Never raises."""
        result = None
        try:
            if self.failure is None:
                self._last_feed()  # a failure in it is the analysis failing: the except below
                result = self.accumulator.finish(time.time())
        except Exception as exc:  # noqa: BLE001
            self.failure = describe(exc)
        return self._ended(result)

    async def finish_remote(self) -> tuple[dict | None, bytes]:
        """``finish`` for an accumulator in the worker: the result once the worker gives it. Never raises:
        a fault in the worker's analysis, or a worker gone, is this flow's failure result."""
        result = None
        try:
            if self.failure is None:
                self._last_feed()
                result, told, self.request_read = await self.accumulator.finish(time.time())
                if result == FAILED:
                    self.failure = told
                elif told is not None:
                    self.accumulator.format = told
        except Exception as exc:  # noqa: BLE001
            self.failure = describe(exc)
        return self._ended(result)

    def _ended(self, result: dict | None) -> tuple[dict | None, bytes]:
        """The flow's result (a failure's in its place), with the note of a rewrite that did not apply;
        and the kept body."""
        self._keep_held()  # held when the analysis failed, and never fed
        if self.failure is not None:
            result = failure_result(self._format_name(), self.failure, nbytes=self.seen)
        if result is not None and self.rewrite_note is not None:
            result["rewrite"] = self.rewrite_note
        return result, b"".join(self.pieces)

    def _last_feed(self) -> None:
        """Before the end: what is held, then the note of a body kept in part (to a worker: with the end)."""
        self.feed_held(False)
        if self.seen > self.kept and self.body_cap:
            self.accumulator.note(
                "body-truncated",
                kept_in_part(self.kept, self.seen),
                kept=self.kept,
                seen=self.seen,
            )

    def _format_name(self) -> str:
        return self.accumulator.format or self.format or "unknown"


class BodyWatch:
    """The stream callable of an LLM message or error page that mitmproxy streams though it is no stream
    (``stream_large_bodies``, with a ``content-length`` above it; or another addon's callable): it keeps
    the body, up to ``cap``, so that the response is read whole at its end as a buffered one is; returns
    every chunk as it came (after the callable set before it, still honoured). Never raises."""

    __slots__ = ("cap", "inner", "pieces", "room", "seen")

    def __init__(self, cap: int, inner=None) -> None:
        self.cap = cap
        self.inner = inner
        self.pieces: list[bytes] = []
        self.room = cap
        self.seen = 0  # bytes of body seen

    def __call__(self, chunk: bytes):
        if self.inner is not None:
            chunk = self.inner(chunk)
            if type(chunk) is not bytes:  # a callable may answer with several chunks: kept as they go
                chunk = list(chunk)
        try:
            data = chunk if type(chunk) is bytes else b"".join(chunk)
            self.seen += len(data)
            room = self.room
            if room and data:
                piece = data if len(data) <= room else data[:room]
                self.pieces.append(piece)
                self.room = room - len(piece)
        except Exception:  # noqa: BLE001, S110 - the chunk must reach the client whatever happened
            pass
        return chunk

    def body(self) -> bytes:
        """What was kept; short of ``seen`` where the cap cut it."""
        return b"".join(self.pieces)

    def unseen(self) -> bool:
        """Whether no byte ever came to it."""
        return self.seen == 0


class RewriteWatch:
    """The stream callable of a flow whose stream is rewritten (``toolcall_lens_inject`` / ``_repair``).

    The upstream's bytes feed ``upstream`` (what the provider sent) and the rewriter; the rewriter's
    pieces go to ``client``, a StreamWatch (what the client gets: its body kept, its analysis the flow's
    result), and to the client. Never raises: if rewriting fails, the bytes pass as they came.
    """

    __slots__ = ("client", "failure", "inner", "rewriter", "upstream", "upstream_failure", "url")

    def __init__(self, upstream: StreamAccumulator, rewriter: StreamRewriter, client: StreamWatch) -> None:
        self.upstream = upstream
        self.rewriter = rewriter
        self.client = client
        # A stream callable another addon set before us sees the upstream's bytes, as it would without us.
        self.inner, client.inner = client.inner, None
        self.failure: str | None = None  # the rewriting failed: the bytes pass as they come
        self.upstream_failure: str | None = None  # only the upstream's analysis failed: rewriting goes on
        self.url: str | None = None  # as StreamWatch.url

    @property
    def accumulator(self) -> StreamAccumulator:
        return self.client.accumulator

    @property
    def body_cap(self) -> int:
        return self.client.body_cap

    def unseen(self) -> bool:
        """Whether no byte ever came to it: none reached its client's watch (a rewriter passes every byte
        on by the stream's end)."""
        return self.client.unseen()

    def __call__(self, chunk: bytes) -> list[bytes]:
        if self.inner is not None:
            chunk = self.inner(chunk)
        if self.failure is not None:
            return self._as_it_came(chunk)
        try:
            if chunk:
                if self.upstream_failure is None:
                    try:
                        self.upstream.feed(chunk, time.time())
                    except Exception as exc:  # noqa: BLE001 - held fragments must still leave in order
                        self.upstream_failure = describe(exc)
                pieces = self.rewriter.feed(chunk)
            else:  # the normal end: whatever is still held goes now
                pieces = self.rewriter.finish()
            for piece in pieces:
                self.client(piece)
            return pieces  # never an empty piece: to mitmproxy an empty chunk ends a chunked body
        except Exception as exc:  # noqa: BLE001 - the bytes must reach the client whatever happened
            self.failure = describe(exc)
            return self._as_it_came(chunk)

    def _as_it_came(self, chunk: bytes) -> list[bytes]:
        """After the rewriting failed: the chunk goes on as it came, and the client's analysis reads it
        (the flow's result is what the client got; what the rewriter held is lost)."""
        if not chunk:
            return []
        self.client(chunk)
        return [chunk]

    def finish(self) -> tuple[dict | None, bytes]:
        """The client's result, with what was rewritten and how the upstream's stream compares. Never raises."""
        result, body = self.client.finish()
        try:
            upstream = self.upstream.finish(time.time()) if self.upstream_failure is None else None
            report = self.rewriter.report()
            if self.failure is not None:
                report["failure"] = self.failure
            if self.upstream_failure is not None:
                report["upstream_failure"] = self.upstream_failure
            if result is not None and upstream is not None:
                report["upstream"] = {
                    "calls_same": _calls(upstream) == _calls(result),
                    "complete": upstream["complete"],
                    "warnings": list(dict.fromkeys(w["code"] for w in upstream["warnings"])),
                    "compatibility": {name: v["verdict"] for name, v in upstream["compatibility"].items()},
                }
            if result is not None:
                result["rewrite"] = report
        except Exception as exc:  # noqa: BLE001
            if result is not None:
                result["rewrite"] = {"inject": [], "repair": [], "skipped": [], "failure": describe(exc)}
        return result, body


def _calls(result: dict) -> list:
    return [
        [(c["id"], c["name"], c["arguments"]) for c in choice["tool_calls"]] for choice in result["choices"]
    ]


def rewrite_plan(format: str | None, encoding: str, inject, repair) -> tuple[bool, dict | None]:
    """Whether to rewrite a stream of ``format`` (None: told by its bytes) under ``encoding``, and when a
    rewrite was asked for and will not happen (or only in part), the note that says why: the ``rewrite``
    entry of its result, ``skipped`` naming each transformation with its reason."""
    asked = [*inject, *repair]
    if not asked:
        return False, None
    if format is None:
        reason = "the stream's format was told by its bytes, not its path: it is watched, never rewritten"
    elif encoding.strip() and not encoding_supported(encoding):
        reason = f"unsupported Content-Encoding {encoding!r}: the body passes as it is"
    else:
        reasons = {name: skip_reason(format, name) for name in asked}
        if any(reason is None for reason in reasons.values()):
            return True, None  # the rewriter's own report lists what it skipped
        return False, _note(format, [{"name": name, "reason": reason} for name, reason in reasons.items()])
    return False, _note(format, [{"name": name, "reason": reason} for name in asked])


def _note(format: str | None, skipped: list[dict]) -> dict:
    order = {name: n for n, name in enumerate((*INJECTIONS, *REPAIRS))}
    skipped.sort(key=lambda entry: order.get(entry["name"], len(order)))
    return {"format": format, "inject": [], "repair": [], "skipped": skipped}


def open_watch(
    flow,
    format: str | None,
    settings,
    *,
    keep_body: bool = True,
    on_progress=None,
    worker: AnalysisWorker | None = None,
    price: tuple | None = None,
    facts: RequestFacts | None = None,
    read_request: bool = False,
):
    """The stream callable of a new LLM stream on ``flow`` (its response headers in): a StreamWatch, wrapped
    in a RewriteWatch when a rewrite asked for applies (the headers then fitted to the new body); and the
    note of a rewrite that was asked for and does not apply (None otherwise), also put on the result.
    With a ``worker`` (and an event loop), a stream that is not rewritten is analysed there, and its
    result priced there as ``price`` says (``remote_settings``). ``facts``: the request's, read as it
    passed; the body is then neither read again nor shipped. ``read_request``: the worker reads the
    request (its echo check, its facts; ``worker.read_request``): the body goes there as it is."""
    headers = flow.response.headers
    # The clock the timing facts count from: when mitmproxy had the whole request.
    started = flow.request.timestamp_end or flow.request.timestamp_start
    request = facts
    encoding = headers.get("content-encoding", "")
    if settings.rewrites(flow):
        rewrite, note = rewrite_plan(format, encoding, settings.inject, settings.repair)
    else:  # none asked, or not for this flow (toolcall_lens_rewrite_filter): watched, nothing to explain
        rewrite, note = False, None
    try:
        defer = asyncio.get_running_loop().call_soon
    except RuntimeError:  # no event loop (mitmproxy's test harness): batches are fed as they fill
        defer = None
    upstream = None
    if worker is not None and defer is not None and not rewrite:  # None: no worker to be had
        # The body as it came: the worker decodes a compressed one (Codex's), not the proxy's thread.
        body, coding = request_as_sent(flow.request) if facts is None else (None, None)
        remote = remote_settings(
            format, body if facts is None else facts, encoding or None, started, settings.limits, price
        )
        if flow.is_replay != "request":  # a replay's calls never reach the agent: none to echo
            remote["flow_id"] = flow.id  # the worker keeps its calls under it, for later echo checks
        if coding is not None:
            remote["request_encoding"] = coding
        if read_request and facts is None:
            remote["read_request"] = True
            remote["index_size"] = settings.index_size
            remote["index_bytes"] = settings.index_bytes
        upstream = worker.open(remote, settings.prices)
    if upstream is None:  # analysed here (a rewrite's accumulators too): the body is read here
        if request is None:
            request = flow.request.get_content(strict=False)
        upstream = StreamAccumulator(
            format, request=request, encoding=encoding or None, started_at=started, limits=settings.limits
        )
    inner = flow.response.stream if callable(flow.response.stream) else None
    watch = StreamWatch(
        upstream,
        format,
        settings.body_cap if keep_body else 0,
        inner,
        on_progress,
        settings.live_every,
        defer,
    )
    watch.rewrite_note = note
    if not rewrite:
        return watch, note
    rewriter = StreamRewriter(
        format,
        inject=settings.inject,
        repair=settings.repair,
        encoding=encoding or None,
        max_event_bytes=settings.limits.max_event_bytes,
        max_calls=settings.limits.max_calls,
    )
    # The client's analysis reads what the rewriter sends; the upstream's, what the provider sent.
    watch.accumulator = StreamAccumulator(
        format,
        request=request,
        encoding=None if rewriter.decodes else encoding or None,
        started_at=started,
        limits=settings.limits,
    )
    if rewriter.decodes:
        headers.pop("content-encoding", None)  # the rewritten body goes out decoded
    if "content-length" in headers:
        # The body's length changes; an HTTP/1 client then reads it in chunks.
        del headers["content-length"]
        if flow.request.http_version.startswith("HTTP/1") and "chunked" not in headers.get(
            "transfer-encoding", ""
        ):
            headers["transfer-encoding"] = "chunked"
    return RewriteWatch(upstream, rewriter, watch), None


def replaced(message, watch) -> bool:
    """Whether another addon put a stream callable of its own (or True) in the place of ``watch`` on this
    request or response after it was set, so that no byte came to it (one that calls the callable it
    found is not replacing it)."""
    stream = message.stream
    return bool(stream) and stream is not watch and watch.unseen()
