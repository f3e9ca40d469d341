"""The watch the addon keeps on an LLM WebSocket flow: every message fed to the core's ``Connection`` as
mitmproxy hands it (whole, inflated, before it is forwarded), and the flow's stored messages trimmed so
that a long connection holds bounded memory. One error boundary: whatever fails inside, the messages
keep flowing unchanged and the failure is recorded on the flow."""

from __future__ import annotations

import contextlib

from accumulator import Connection
from accumulator.report import ConnectionTally

from .watch import HELD_CHUNKS, SHIPPED_CHUNKS, describe
from .worker import FAILED, RemoteConnection, WorkerGone, unpacked

_UPSTREAM_KEPT = 1000  # responses whose upstream comparison a rewritten connection's record keeps
# A quiet connection's held messages are fed this long after the first of them passed (a turn's last
# messages would otherwise wait for the next turn to fill the batch).
FEED_AFTER = 0.2


class WebSocketWatch:
    """``message(msg)`` per message (returns the results it settled); ``finish(...)`` at the end.

    With ``defer`` and ``later`` (the event loop's ``call_soon`` and ``call_later``), the messages of a
    connection whose format is known are held, each with its direction, kind and time, and fed
    ``HELD_CHUNKS`` at a time on the loop's next turn once the message that filled the batch is on its
    way, or ``FEED_AFTER`` seconds after the first of a batch that does not fill; what that settles goes
    to ``on_settled``. As over HTTP, the core then runs warm, and the results are those of feeding message
    by message. Without them (mitmproxy's test harness), every message is fed as it comes."""

    __slots__ = (
        "closed",
        "connection",
        "defer",
        "failure",
        "held",
        "keep",
        "later",
        "next_progress",
        "on_settled",
        "record",
        "tally",
        "trimmed",
    )

    remote = False  # analysed here; RemoteSocketWatch: in the worker

    def __init__(self, connection: Connection, keep: int, defer=None, later=None, on_settled=None) -> None:
        self.connection = connection
        self.defer = defer
        self.later = later
        self.on_settled = on_settled
        self.held: list[tuple] = []  # (from_client, content, is_text, timestamp) not fed yet
        self.keep = keep  # messages kept on the flow (0: all); the older ones are dropped once analysed
        self.trimmed = 0
        self.failure: str | None = None
        self.closed: dict | None = None
        self.next_progress = 0.0
        self.tally = ConnectionTally()  # the comment's figures, one settled response at a time
        # What the flow stores (CONNECTION_SCHEMA): the connection's own list of results, shared, not
        # copied; the summary is refreshed by ``refresh``.
        self.record = {"transport": "websocket", "connection": {}, "responses": connection.results}

    @property
    def ours(self) -> bool:
        """Whether the connection speaks a format we read (known from its path or its first messages)."""
        return self.connection.format is not None

    def message(self, msg) -> list[dict]:
        if self.failure is not None:
            return []
        if self.defer is not None and self.connection.format is not None:
            held = self.held
            held.append((msg.from_client, msg.content, msg.is_text, msg.timestamp))
            if len(held) == HELD_CHUNKS:  # once: the batch goes on growing until it runs
                self.defer(self._feed_later)
            elif len(held) == 1:
                self.later(FEED_AFTER, self._feed_later)
            return []
        try:
            return self.connection.message(msg.from_client, msg.content, msg.is_text, msg.timestamp)
        except Exception as exc:  # noqa: BLE001 - the message must pass whatever happened
            self._failed(exc)
            return []

    def feed_held(self) -> list[dict]:
        """Feed the messages held so far, in order, each with its time; the results that settled. Never
        raises (a failure is the connection's: see ``_failed``)."""
        held, self.held = self.held, []
        if self.failure is not None:
            return []
        settled: list[dict] = []
        message = self.connection.message
        try:
            for from_client, content, is_text, at in held:
                settled += message(from_client, content, is_text, at)
        except Exception as exc:  # noqa: BLE001
            self._failed(exc)
        return settled

    def _feed_later(self) -> None:
        """A held batch, on the event loop (also run by a timer after the batch was fed: then nothing)."""
        if not self.held:
            return
        failed = self.failure
        settled = self.feed_held()
        if (settled or self.failure != failed) and self.on_settled is not None:
            self.on_settled(settled)

    def trim(self, messages: list) -> None:
        """Drop analysed messages beyond ``keep`` from the flow, oldest first, in batches (a deletion at
        the front costs the whole list: doing it once per ``keep`` messages keeps it O(1) per message).
        The last message always stays (mitmproxy forwards it after the hook)."""
        keep = self.keep
        if keep and len(messages) >= 2 * keep:
            dropped = len(messages) - keep
            del messages[:dropped]
            if not self.trimmed:
                self.connection.warnings.add(
                    "websocket-messages-trimmed",
                    f"messages already analysed are dropped from this flow beyond the last {keep} "
                    "(toolcall_lens_websocket_keep); the analysis saw every one",
                    dropped=dropped,
                    kept=keep,
                )
            self.trimmed += dropped

    def finish(self, now: float | None, closed: dict | None) -> list[dict]:
        self.closed = closed
        settled = self.feed_held()
        if self.failure is not None:
            return settled
        try:
            return settled + self.connection.finish(now)
        except Exception as exc:  # noqa: BLE001
            self._failed(exc)
            return []

    def refresh(self, settled: list[dict]) -> None:
        """The record and the tally brought up to date with these newly settled results."""
        for result in settled:
            self.tally.add(result)
        summary = self.connection.summary()
        summary["trimmed"] = self.trimmed
        summary["closed"] = self.closed
        self.record["connection"] = summary

    def comment(self) -> str:
        return self.tally.line(self.record["connection"])

    @property
    def loud(self) -> bool:
        return self.tally.loud or any(
            w["severity"] == "warning" for w in self.record["connection"]["warnings"]
        )

    def _failed(self, exc: BaseException) -> None:
        self.failure = describe(exc)
        self.connection.warnings.add("internal-error", _stopped(self.failure), error=self.failure)


def _stopped(why: str) -> str:
    return f"toolcall-lens failed on this connection and stopped analysing it: {why}"


class RemoteSocketWatch(WebSocketWatch):
    """A WebSocket flow analysed in the worker process (``toolcall_lens_worker``).

    The hook only holds each message; they are shipped ``SHIPPED_CHUNKS`` at a time, or ``FEED_AFTER``
    seconds after the first of a batch that does not fill (``later``: the event loop's ``call_later``),
    and the worker feeds them to a ``Connection`` as a ``WebSocketWatch`` there. What settles comes back
    on the event loop and goes to ``on_settled``; the end is awaited (``finish_remote``). A worker lost
    (or a fault inside the worker's analysis) is the connection's failure: an ``internal-error`` on it,
    the results settled before it kept, and the messages flow on."""

    __slots__ = ("ended",)

    remote = True

    def __init__(self, connection: RemoteConnection, keep: int, later, on_settled) -> None:
        super().__init__(connection, keep, None, later, on_settled)  # type: ignore[arg-type]
        self.ended: list[dict] | None = None  # once the end is awaited: what settled meanwhile
        connection.worker.listen(connection.key, self)

    def message(self, msg) -> list[dict]:
        if self.failure is None:
            held = self.held
            held.append((msg.from_client, msg.content, msg.is_text, msg.timestamp))
            if len(held) >= SHIPPED_CHUNKS:
                self.feed_held()
            elif len(held) == 1:
                self.later(FEED_AFTER, self.feed_held)
        return []

    def feed_held(self, ship: bool = True) -> list[dict]:
        """Ship what is held (without ``ship``: with the next message that goes); what it settles comes
        later (``settled``). Never raises."""
        held, self.held = self.held, []
        if held and self.failure is None:
            try:
                self.connection.feed(held, ship)
            except WorkerGone as exc:
                self.lost(str(exc))
        return []

    def settled(self, payload: tuple) -> None:
        """The worker's word on a batch: the results it settled, the summary, its failure if any. Never
        raises (it runs in the worker's reader, which serves every flow)."""
        try:
            settled, summary, failure = payload
            settled = unpacked(settled)
            self.connection.update(settled, summary)
            if failure is not None:
                self.failure = failure
        except Exception as exc:  # noqa: BLE001 - one connection's fault stays its own
            self.lost(describe(exc))
            return
        if self.ended is not None:
            self.ended += settled
        elif self.on_settled is not None:
            self.on_settled(settled)

    def lost(self, why: str) -> None:
        """The worker is gone: the analysis of this connection stops here, and the flow says so."""
        if self.failure is not None:
            return
        self.failure = why
        self.connection.fail(_stopped(why), why)
        if self.ended is None and self.on_settled is not None:
            self.on_settled([])

    async def finish_remote(self, now: float | None, closed: dict | None) -> list[dict]:
        """``finish`` in the worker: every result settled since the last, once it answers. Never raises."""
        self.closed = closed
        self.ended = ended = []
        self.feed_held(False)  # with the end, in one write
        connection = self.connection
        try:
            if self.failure is None:
                answer = await connection.finish(now)
                if answer[0] == FAILED:
                    self.lost(answer[1])
                else:
                    self.settled(answer)
        except WorkerGone as exc:
            self.lost(str(exc))
        except Exception as exc:  # noqa: BLE001
            self.lost(describe(exc))
        finally:
            connection.worker.unlisten(connection.key)
        return ended


class RewriteSocketWatch(WebSocketWatch):
    """A WebSocket flow whose server messages are rewritten (``toolcall_lens_inject`` / ``_repair``).

    Every server message is dropped and what the rewriter makes of it is injected in its place: mitmproxy
    forwards injected messages in the order they were injected, while a message let through as it came
    could overtake those still queued. ``connection`` reads what the client got (the injected messages:
    the flow's record), ``upstream`` what the provider sent (compared in the record's ``rewrite``). If the
    rewriting fails, the messages after it pass as they come."""

    __slots__ = ("inject", "rewriter", "upstream", "upstream_results")

    def __init__(self, connection: Connection, keep: int, upstream: Connection, rewriter, inject) -> None:
        super().__init__(connection, keep)
        self.upstream = upstream
        self.rewriter = rewriter
        self.inject = inject  # (content, is_text): sends one message to the client after those sent before
        self.upstream_results: dict[int, dict] = {}  # position -> the upstream's result, until compared

    def message(self, msg) -> list[dict]:
        if self.failure is not None:
            return []
        dropped = False
        try:
            if msg.injected:  # ours (or another addon's), on its way: what the client gets
                return self.connection.message(msg.from_client, msg.content, msg.is_text, msg.timestamp)
            upstream = self.upstream
            before = upstream.responses
            for result in upstream.message(msg.from_client, msg.content, msg.is_text, msg.timestamp):
                self.upstream_results[result["websocket"]["position"]] = result
            out = self.rewriter.start_response() if upstream.responses != before else []
            settled: list[dict] = []
            if msg.from_client:
                settled = self.connection.message(True, msg.content, msg.is_text, msg.timestamp)
            else:
                msg.drop()
                dropped = True
                out += self.rewriter.feed(msg.content)
            for content in out:
                self.inject(content, msg.is_text)
            return settled
        except Exception as exc:  # noqa: BLE001 - the message must pass whatever happened
            self._failed(exc)
            if dropped:  # the rewriter failed on it: it goes to the client as it came, after those before it
                with contextlib.suppress(Exception):
                    self.inject(msg.content, msg.is_text)
            return []

    def finish(self, now: float | None, closed: dict | None) -> list[dict]:
        if self.failure is None:
            try:
                for result in self.upstream.finish(now):
                    self.upstream_results[result["websocket"]["position"]] = result
            except Exception as exc:  # noqa: BLE001
                self._failed(exc)
        return super().finish(now, closed)

    def refresh(self, settled: list[dict]) -> None:
        super().refresh(settled)
        report = self.record.get("rewrite") or {**self.rewriter.report(), "upstream": []}
        report.update(self.rewriter.report())
        for result in settled:
            upstream = self.upstream_results.pop(result["websocket"]["position"], None)
            if upstream is not None:
                report["upstream"].append(
                    {
                        "position": result["websocket"]["position"],
                        "calls_same": _calls(upstream) == _calls(result),
                        "complete": upstream["complete"],
                        "warnings": [w["code"] for w in upstream["warnings"]],
                        "compatibility": {k: v["verdict"] for k, v in upstream["compatibility"].items()},
                    }
                )
        del report["upstream"][:-_UPSTREAM_KEPT]
        self.record["rewrite"] = report


def _calls(result: dict) -> list:
    return [(c["name"], c["arguments"]) for ch in result["choices"] for c in ch["tool_calls"]]
