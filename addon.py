"""toolcall-lens: watch streamed LLM responses pass through mitmproxy, rebuild every tool call by identity,
and flag streams that naive accumulators would have got wrong. The traffic is never delayed or changed,
unless asked: ``toolcall_lens_inject`` sends clients hostile stream shapes on purpose (a test bench), and
``toolcall_lens_repair`` makes streams safe for fragile clients.

    mitmdump -s addon.py --listen-host 127.0.0.1 --mode reverse:https://api.openai.com@8081
    (then OPENAI_BASE_URL=http://127.0.0.1:8081/v1)

Each LLM flow gets ``flow.metadata["toolcall_lens"]`` (the result, as the CLI prints it), a one-line
``flow.comment``, a marker when a warning was raised, its body kept for dumps, and a log line; mitmweb
shows it in the "toolcall-lens" content view, growing while the stream runs. Stored flows lose their
API keys as soon as the request has gone out. Commands (mitmweb's command bar, mitmproxy's console):
``toolcall.report @all``, ``toolcall.export @marked /tmp/llm.jsonl``.

This file is the wiring: hooks, options and commands. What they use lives in ``toolcall_lens/`` (the
watches, the content view, redaction, the export) and in the core, ``accumulator/``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import fnmatch
import functools
import logging
import time  # tests patch the clock the watches read through this module
import weakref
from collections.abc import Awaitable, Callable, Sequence

from mitmproxy import command, contentviews, ctx, exceptions, hooks, http
from mitmproxy import flow as mflow
from mitmproxy import types as mtypes

from accumulator import Connection, analyze_exchange, classify, failure_result, formats
from accumulator.echo import ObservedCalls, add_evidence
from accumulator.exchange import maybe_llm, stored_timing
from accumulator.relay import Relays
from accumulator.report import summary_line
from accumulator.result import add_warnings, unread_result
from accumulator.rewrite.messages import MessageRewriter
from accumulator.sessions import SESSION_HEADERS, Asked, Sessions, format_session
from accumulator.warnings import severity_of
from toolcall_lens import handover, options
from toolcall_lens.export import JsonlFile, annotated, record, report_line, write_all
from toolcall_lens.loglines import LogLines, pretty_url
from toolcall_lens.otel import FlowFacts, SpanExport
from toolcall_lens.redact import REDACTED, Masked, redact_credentials, restore_credentials, still_redacted
from toolcall_lens.view import METADATA_KEY, ToolcallLensView, message_time
from toolcall_lens.watch import (
    BodyWatch,
    RewriteWatch,
    StreamWatch,
    describe,
    kept_in_part,
    open_watch,
    replaced,
    rewrite_plan,
)
from toolcall_lens.websocket import RemoteSocketWatch, RewriteSocketWatch, WebSocketWatch
from toolcall_lens.worker import AnalysisWorker, price, read_request, request_as_sent

logger = logging.getLogger("toolcall_lens")

# Kept importable from here, where they lived before the split.
__all__ = ["METADATA_KEY", "REDACTED", "RewriteWatch", "StreamWatch", "ToolcallLens", "redact_credentials"]


# Seconds the proxy's end waits for the flows still awaiting the worker's answer (mitmproxy saves a dump's
# flows after this addon's hooks: a flow that ended just before Ctrl-C is then saved annotated).
DONE_WAIT = 5.0
# Seconds an LLM request read on the proxy's thread (with rewriting, or a buffered response's) waits, at
# most, for the results of earlier streams still on their way from the worker, so that its echoes of their
# calls are checked (a wait only while such results are pending; the worker reads its own streams'
# requests after the results it made before, in order).
ECHO_WAIT = 2.0
# The metadata entry naming the flow whose keys a flow's request holds masked (its own id, until copied).
# Every flow with a key has it, LLM flow or not: its name keeps it out of `~meta toolcall_lens`, which
# finds the LLM flows.
MASKED_OF = "masked_keys_of"


_SESSION_NAMES = {name.encode(): name for name in SESSION_HEADERS}
# The addon's name in mitmproxy's addon manager (its class name, lowercased).
NAME = "toolcalllens"


def _session_headers(headers) -> dict[str, str]:
    """A request's session headers (``SESSION_HEADERS``) as a plain dict, its values as mitmproxy's
    ``headers.get`` gives them, read in one pass over its fields (mitmproxy's lookup by name costs ~4 µs,
    and a response is placed in its session by three)."""
    found: dict[str, list[str]] = {}
    for name, value in headers.fields:
        known = _SESSION_NAMES.get(name.lower())
        if known is not None:
            found.setdefault(known, []).append(value.decode("utf-8", "surrogateescape"))
    return {name: ", ".join(values) for name, values in found.items()}


def _say_stale(what: str) -> bool:
    """Whether the modules under toolcall_lens/ and accumulator/ changed since the proxy imported them (an
    update): said as a warning, since a reload of the script does not run them."""
    changed = handover.stale()
    if changed:
        more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        logger.warning(
            "%s, but its modules changed since the proxy started (%s%s): restart the proxy to run them",
            what,
            ", ".join(changed[:3]),
            more,
        )
    return bool(changed)


def _warning(code: str, message: str, **details) -> dict:
    return {"code": code, "severity": severity_of(code), "message": message, **details}


def _unseen(format: str, streamed: bool) -> dict:
    """The result of an exchange whose stream callable another addon replaced (``watch.replaced``)."""
    message = (
        "another addon replaced toolcall-lens's stream callable on this flow after it was set "
        "(flow.response.stream): the stream passed unseen. Load addon.py after that addon "
        "(-s theirs.py -s addon.py), or have it call the callable it finds"
    )
    return unread_result(format, "stream-not-seen", message, streamed=streamed)


def _not_kept(format: str, limit: str | None, kept: BodyWatch | None, unseen: bool) -> dict:
    """The result of a message whose body mitmproxy streamed on and no one kept: past ``limit`` (its
    stream_large_bodies) as it came, or with no body cap; else another addon streamed it (``unseen``: its
    callable took the place of the addon's; none: it set one after the addon's hook had found none)."""
    if unseen or (kept is None and not limit):
        return _unseen(format, streamed=False)
    if kept is not None:  # kept by no cap
        why = "toolcall_lens_body_cap is 0: its body was not kept"
        return unread_result(
            format,
            "body-not-kept",
            f"{why}; nothing to read",
            streamed=False,
            option="toolcall_lens_body_cap",
            limit=0,
        )
    message = (
        f"mitmproxy streamed this response itself (stream_large_bodies={limit}: it grew past that as it came)"
        " and kept no body; nothing to read. Set store_streamed_bodies=true to keep and read it"
    )
    return unread_result(
        format, "body-not-kept", message, streamed=False, option="stream_large_bodies", limit=limit
    )


def _whole(flow: http.HTTPFlow) -> bool:
    """A response whose body is all here as its headers are: a flow loaded from a file (never live), or
    one an addon answered before it could go upstream (its content set; a response from a server has
    none until its body has come)."""
    return not flow.live or (flow.response is not None and flow.response.raw_content is not None)


# A response an addon answered goes out in one piece (mitmproxy writes its content at once).
_NO_WRITES = "a response an addon answered goes out in one piece: there are no writes to cut"


def _whole_settings(settings: options.Settings) -> tuple[options.Settings, dict | None]:
    """The settings a response an addon answered is rewritten with: ``rechunk`` left out, and its note."""
    if "rechunk" not in settings.inject:
        return settings, None
    inject = tuple(name for name in settings.inject if name != "rechunk")
    return dataclasses.replace(settings, inject=inject), {"name": "rechunk", "reason": _NO_WRITES}


def _add_skip(result: dict, format: str | None, skip: dict | None) -> None:
    """A rewrite that could not apply, named in the result's ``rewrite`` note (made if there is none)."""
    if skip is None:
        return
    note = result.setdefault("rewrite", {"format": format, "inject": [], "repair": [], "skipped": []})
    note.setdefault("skipped", []).append(skip)


def _reasons(skipped: dict) -> str:
    return "; ".join(f"{s['name']}: {s['reason']}" for s in skipped["skipped"])


def _when_answered(snapshot, running: Callable[[], bool], show: Callable[[dict | None], None]) -> None:
    """``show(snapshot)`` now; or, for a snapshot the worker is to send (a future), when it comes, if the
    flow is still ``running`` then (a snapshot that never comes is dropped)."""
    if not isinstance(snapshot, asyncio.Future):
        show(snapshot)
        return

    def answered(answer: asyncio.Future) -> None:
        if running() and not answer.cancelled() and not answer.exception():
            show(answer.result())

    snapshot.add_done_callback(answered)


class ToolcallLens:
    def __init__(self) -> None:
        self.watches: dict[str, StreamWatch | RewriteWatch] = {}  # flow id -> its callable, until it ends
        self.sockets: dict[str, WebSocketWatch] = {}  # flow id -> its WebSocket watch, until it ends
        self.observed = ObservedCalls()  # calls reconstructed from recent responses, to check echoes
        # flow id -> its request's echo warnings and evidence summary, until the flow is annotated
        self.echo_warnings: dict[str, tuple[list[dict], dict]] = {}
        self.sessions = Sessions()  # agent runs, turn by turn (accumulator.sessions)
        self.relays = Relays()  # the responses a gateway seen on both sides relayed (accumulator.relay)
        # flow id -> what its request says of its session (the results it sends back, the response it
        # follows), until the flow is annotated
        self.turn_facts: dict[str, Asked] = {}
        # flow id -> a rewrite asked for a response an addon answered that cannot apply to it (rechunk),
        # until the flow is annotated
        self.whole_skips: dict[str, dict] = {}
        self.jsonl: JsonlFile | None = None  # the toolcall_lens_jsonl file, opened for appending
        self.settings: options.Settings | None = None
        self.started = False  # the running hook came: mitmproxy is past its start-up checks
        # The OpenTelemetry export, when toolcall_lens_otlp_endpoint is set.
        self.otlp: SpanExport | None = None
        # The worker process of toolcall_lens_worker, started at its first flow.
        self.worker = AnalysisWorker()
        # flows whose end awaits the worker's answer -> done once it is annotated
        self.ending: dict[str, asyncio.Future] = {}
        # Each flow's log line: a record of its own, or, when flows end faster than a human reads, a few
        # in one record a tenth of a second later (toolcall_lens/loglines.py says why).
        self.lines = LogLines(logger)
        self.url_starts: dict[tuple[str, str], str] = {}  # (scheme, Host header) -> "scheme://host[:port]"
        self.master = None  # the mitmproxy master that loaded it
        # flow -> the API keys its stored request no longer holds (toolcall_lens/redact.py), put back when
        # it is replayed; in memory only, for as long as mitmproxy keeps the flow (mitmweb's list).
        self.masked: weakref.WeakKeyDictionary[http.HTTPFlow, Masked] = weakref.WeakKeyDictionary()

    def load(self, loader) -> None:
        options.add_options(loader)
        self._take_over(loader.master)
        self.master = loader.master

    def _take_over(self, master) -> None:
        """Loaded in place of an addon mitmproxy just removed, its script reloaded
        (``toolcall_lens/handover.py``): this one goes on with that one's state, the same objects, so its
        streams in flight finish here, and its connections, sessions, echo index, export and worker go on.
        The two share one attribute dict: the callbacks the first left on its flows (live updates, a
        connection's batches) act on the state this one keeps. What this version adds starts fresh."""
        before = handover.take(master)
        if before is None:
            return
        state = before.__dict__
        for name, value in self.__dict__.items():
            state.setdefault(name, value)
        self.__dict__ = state
        logger.info(
            "toolcall-lens: script reloaded; %d stream(s) and %d connection(s) in flight carry on",
            len(self.watches),
            len(self.sockets),
        )
        _say_stale("toolcall-lens: addon.py reloaded")

    def _unclaimed(self) -> None:
        """Removed and not taken over: its script was taken out of ``scripts``, or did not load again
        (mitmproxy logs why). Shut down as at the proxy's end; the flows in flight pass on unread."""
        if not _say_stale("toolcall-lens: stopped"):
            logger.info("toolcall-lens: stopped: its script was unloaded, or did not load again")
        self._done()

    def configure(self, updated) -> None:
        if not any(name.startswith(options.PREFIX) for name in updated):
            return
        try:
            settings = options.parse(ctx.options)
            # Opened anew only when changed: a reloaded script is configured with every option again, and
            # its export goes on (an OTLP export closed sends its sessions' spans).
            if "toolcall_lens_jsonl" in updated and not self._same(settings, "jsonl"):
                self._open_export(settings.jsonl)
            if any(name.startswith(options.PREFIX + "otlp_") for name in updated) and not self._same(
                settings, "otlp_endpoint", "otlp_headers", "otlp_content"
            ):
                self._open_otlp(settings)
        except exceptions.OptionsError as exc:
            if self.started or ctx.master.addons.get("errorcheck") is None:
                raise  # a change while running: mitmproxy refuses it, says why, and keeps the old values
            # At start-up mitmproxy prints an OptionsError from a script's configure with a traceback; an
            # error logged before the running hook makes it exit (its errorcheck addon) on this line alone.
            logger.error("%s", exc)
            return
        self.observed.size = settings.index_size
        self.observed.max_bytes = settings.index_bytes
        self.sessions.loop_after = settings.loop_after
        self.settings = settings

    def _same(self, settings: options.Settings, *names: str) -> bool:
        """Whether these settings are those in force already."""
        before = self.settings
        return before is not None and all(getattr(before, n) == getattr(settings, n) for n in names)

    def running(self) -> None:
        self.started = True

    # -- hooks ---------------------------------------------------------------------------------------------

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        # mitmweb's Replay, replay.client, mitmdump -C: it goes out again (live; a replay loaded from a
        # file runs these hooks too, as a record, and keeps what it recorded).
        if flow.is_replay == "request" and flow.live:
            try:
                self._replaying(flow)
            except Exception as exc:  # noqa: BLE001 - the replay goes as mitmproxy sends it
                logger.warning("toolcall-lens: preparing a replay of %s failed: %s", flow.id, describe(exc))
        # mitmproxy streams a request whose content-length is over its stream_large_bodies (an agent's
        # request is a MiB) and keeps none of it: an LLM request's body is kept here as it passes, for the
        # checks that read it (the echoes, the declared tools, the session), as mitmproxy would have kept it.
        stream = flow.request.stream
        if stream and formats.path_format(flow.request.path) is not None and self._host_watched(flow):
            flow.request.stream = BodyWatch(self._settings().body_cap, stream if callable(stream) else None)

    def request(self, flow: http.HTTPFlow) -> Awaitable[None] | None:
        if flow.is_replay == "request" and flow.live:  # after modify_headers, which may give the key
            try:
                self._say_if_keyless(flow)
            except Exception as exc:  # noqa: BLE001
                logger.warning("toolcall-lens: reading a replay's request failed: %s", describe(exc))
        # The watch, unless another addon's callable took its place (then it saw nothing to put back).
        kept = flow.request.stream
        if type(kept) is BodyWatch:
            if flow.request.raw_content is None and kept.seen <= kept.cap:  # streamed by mitmproxy: kept here
                flow.request.raw_content = kept.body()
            # Its work is done (the body has gone): what stood there before it goes back, so that a replay
            # of this flow streams its request as it would without the addon, through one new watch, not
            # through this one (which would keep a second copy, and a third at the next replay).
            flow.request.stream = kept.inner if kept.inner is not None else True
        # Read-only: the echoes of earlier calls in the conversation, checked against what was streamed.
        if self._read_in_worker():
            # Read where its response is analysed: a stream's in the worker (``worker.read_request``), a
            # buffered response's here as it comes. Not here and now: a real agent's request is a MiB.
            return None
        found = formats.path_format(flow.request.path)
        if found is None or not self._host_watched(flow):
            return None
        if self.ending:  # an earlier stream's result is on its way from the worker: its calls are checked too
            return self._request_when_answered(flow, found[0])
        self._examine(flow, found[0])
        return None

    def _redact(self, flow: http.HTTPFlow) -> None:
        masked = redact_credentials(flow)
        if masked is not None:
            self.masked[flow] = masked
            # A copy of the flow (mitmweb's Duplicate) carries its metadata, and finds the keys by this id.
            flow.metadata[MASKED_OF] = flow.id

    def _masked_of_copy(self, flow: http.HTTPFlow) -> Masked | None:
        """The keys of the flow this one was copied from (mitmweb's Duplicate, or a dump this proxy wrote,
        opened again), while mitmproxy keeps that flow; the copy keeps them from then on."""
        origin = flow.metadata.get(MASKED_OF)
        if type(origin) is not str:
            return None
        for other, masked in list(self.masked.items()):
            if other.id == origin:
                self.masked[flow] = masked
                return masked
        return None

    def _replaying(self, flow: http.HTTPFlow) -> None:
        """A flow replayed: its request goes out again with the keys this addon masked put back (masked
        again once it has gone), and the earlier response's annotation goes with that response."""
        masked = self.masked.get(flow) or self._masked_of_copy(flow)
        if masked is not None:
            restore_credentials(flow, masked)
        earlier = flow.metadata.pop(METADATA_KEY, None)
        flow.metadata.pop("toolcall_lens_live", None)
        flow.metadata.pop("toolcall_lens_echoes", None)  # back-references to the earlier response's calls
        if type(earlier) is not dict:
            return
        try:
            line = summary_line(earlier)
        except Exception:  # noqa: BLE001 - a record loaded from an older file: the comment stays
            return
        if flow.comment == line or flow.comment.startswith(line + " | "):  # the addon's, not the user's
            flow.comment = ""
        marker = self._settings().marker
        warnings = earlier.get("warnings")
        loud = type(warnings) is list and any(
            type(w) is dict and w.get("severity") == "warning" for w in warnings
        )
        if loud and marker and flow.marked == marker:  # the addon's marker, not the user's
            flow.marked = ""

    def _say_if_keyless(self, flow: http.HTTPFlow) -> None:
        left = still_redacted(flow.request)
        if left:  # a flow loaded from a capture, or copied: its keys are in no file
            logger.warning(
                "toolcall-lens: replaying %s with its %s redacted: the provider will refuse it. Its capture "
                "holds no key (toolcall_lens_redact); give one with mitmproxy's modify_headers, e.g. "
                "--set modify_headers='/~q/Authorization/Bearer KEY'",
                self._url(flow).partition("?")[0],
                ", ".join(left),
            )

    def _read_in_worker(self) -> bool:
        """Whether requests are read where their responses are analysed, not as they pass: with the worker
        (an event loop to run it on, none given up), and no rewriting (a rewritten stream is analysed in
        the proxy)."""
        settings = self._settings()
        if not settings.worker or settings.inject or settings.repair or not self.worker.usable:
            return False
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no event loop (mitmproxy's test harness): no worker
            return False
        return True

    async def _request_when_answered(
        self, flow: http.HTTPFlow, format: str, sent: float | None = None, buffered=None, kept=None
    ) -> None:
        # A client that reads a stream to its last event sends its follow-up as mitmproxy takes the
        # stream's end: the follow-up waits for the results on their way (ECHO_WAIT at most). A buffered
        # response whose request is read as it comes (``buffered``: its exchange) is analysed after.
        await asyncio.wait(list(self.ending.values()), timeout=ECHO_WAIT)
        self._examine(flow, format, sent)
        if buffered is not None:
            self._analyse_whole(flow, buffered, kept)

    def _examine(self, flow: http.HTTPFlow, format: str, sent: float | None = None) -> None:
        """The request's echo check and session facts, read now, as the worker reads a stream's
        (``read_request``; ``sent``: when it was sent, for a check made after, as its response comes)."""
        raw, coding = request_as_sent(flow.request)
        facts, echoes, evidence, failed = read_request(
            self.observed, raw, format, sent, coding, self._settings().limits
        )
        if failed is not None:  # the result still says a check was tried, and why it has nothing to say
            logger.warning("toolcall-lens: echo check failed: %s", failed)
        if facts is not None:
            self.turn_facts[flow.id] = facts._replace(read_from=raw)
        # Kept even when all is well: the result then says what was checked ("evidence"), or why nothing.
        self.echo_warnings[flow.id] = (echoes, evidence)
        if echoes:
            self._link_earlier_flows(flow, echoes)

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        # The request has gone out: from now on the stored flow needs no key (and -w must never see one).
        settings = self._settings()
        if settings.redact:
            self._redact(flow)
        exchange = self._classify(flow)
        if exchange is None:
            return  # not an LLM exchange: no callable, no cost
        if not exchange.streamed:
            # A JSON response, or an error where a stream was asked for, is buffered by mitmproxy as usual
            # and read in `response`. Unless mitmproxy streams it all the same (its content-length is over
            # stream_large_bodies) or another addon does: then nothing would keep its body but this.
            stream = flow.response.stream
            if stream:
                watch = BodyWatch(settings.body_cap, stream if callable(stream) else None)
                self.watches[flow.id] = watch
                flow.response.stream = watch
            return
        if _whole(flow):
            # Its body is all here before its headers go out: loaded from a file (`-r`, mitmweb's File >
            # Open), or answered by an addon (server replay, a mock). No callable would ever see it, and
            # a watch would put its empty record in the body's place: it is read whole in `response`,
            # rewritten first if asked (a replay's; a flow loaded from a file is a record, never rewritten).
            if flow.live and settings.rewrites(flow):
                self._rewrite_whole(flow, exchange, settings)
            return
        # With mitmproxy's own store_streamed_bodies on, it keeps the body itself: no second copy.
        own_copy = "store_streamed_bodies" in ctx.options and ctx.options.store_streamed_bodies
        # A partial, not a lambda: one object the collector follows for the flow's life, not four.
        progress = functools.partial(self._progress, flow) if settings.live_every else None
        # What the request hook read of the request: its body is not read again, unless another addon
        # changed it before it went out.
        turn = self.turn_facts.get(flow.id)
        if turn is not None and turn.read_from is not flow.request.raw_content:
            turn = None
        # Read once: the worker prices with it, the flow's log line tells it.
        url = self._url(flow)
        # Not read as it passed (``request``): read with the stream's analysis, in the worker.
        unread = (
            turn is None
            and exchange.format is not None
            and flow.id not in self.echo_warnings
            and self._read_in_worker()
        )
        watch, skipped = open_watch(
            flow,
            exchange.format,
            settings,
            keep_body=not own_copy,
            on_progress=progress,
            worker=self.worker if settings.worker else None,
            price=self._asked(flow, url) if settings.worker else None,
            facts=turn.request if turn is not None else None,
            read_request=unread,
        )
        if unread and not (isinstance(watch, StreamWatch) and watch.remote):  # no worker to be had after all
            self._examine(flow, exchange.format, flow.request.timestamp_end)
        if skipped is not None:
            logger.info("toolcall-lens: not rewriting %s: %s", url, _reasons(skipped))
        watch.url = url
        self.watches[flow.id] = watch
        flow.response.stream = watch

    def _rewrite_whole(self, flow: http.HTTPFlow, exchange, settings: options.Settings) -> None:
        """A response an addon answered (a server replay of a recorded session), rewritten before it goes
        out as its stream would have been: the whole body through the same RewriteWatch at once, its
        headers fitted. Finished in ``response`` as a live rewrite is. Where no rewrite applies, the body
        goes as it came, and its result says why (``_analyse_whole``)."""
        settings, skip = _whole_settings(settings)
        if skip is not None:
            self.whole_skips[flow.id] = skip
        if not settings.rewrites(flow):
            return
        turn = self.turn_facts.get(flow.id)
        facts = turn.request if turn is not None and turn.read_from is flow.request.raw_content else None
        watch, skipped = open_watch(flow, exchange.format, settings, keep_body=False, facts=facts)
        if not isinstance(watch, RewriteWatch):
            if skipped is not None:
                logger.info("toolcall-lens: not rewriting %s: %s", self._url(flow), _reasons(skipped))
            return
        body = flow.response.raw_content or b""
        pieces = [*(watch(body) if body else ()), *watch(b"")]  # b"": the end, as mitmproxy says it
        flow.response.raw_content = b"".join(pieces)
        watch.url = self._url(flow)
        self.watches[flow.id] = watch

    def response(self, flow: http.HTTPFlow) -> Awaitable[None] | None:
        watch = self.watches.pop(flow.id, None)
        kept = None
        if isinstance(watch, BodyWatch):  # a message mitmproxy streamed: its body back, read as buffered
            if watch.cap and not replaced(flow.response, watch):
                flow.response.raw_content = watch.body()
            kept = watch
        elif watch is not None:
            if isinstance(watch, StreamWatch) and watch.remote:
                return self._finish_remote(flow, watch)  # mitmproxy awaits it; other flows go on meanwhile
            self._finish_stream(flow, watch)
            return None
        exchange = self._classify(flow)
        if exchange is None or (flow.response.raw_content is None and (exchange.streamed or not flow.live)):
            # Not ours (a gateway's HTML page), or a stream whose body is not here (it passed before the
            # addon was loaded, or a dump kept none: a result recorded live stays as it is): nothing to
            # read, and no result to carry the request's echo warnings.
            self._forget(flow)
            return
        if exchange.format is not None and flow.id not in self.echo_warnings and self._read_in_worker():
            # Its request was left to be read with its response (``request``): here, as it is analysed.
            sent = flow.request.timestamp_end
            if self.ending:  # after the results on their way from the worker, as a request would
                return self._request_when_answered(flow, exchange.format, sent, exchange, kept)
            self._examine(flow, exchange.format, sent)
        self._analyse_whole(flow, exchange, kept)
        return None

    def _analyse_whole(
        self, flow: http.HTTPFlow, exchange, kept: BodyWatch | None = None, read: str | None = None
    ) -> None:
        """An LLM response read and annotated here, whole: a buffered one (a JSON message, an HTTP error;
        ``kept``: its body kept as mitmproxy streamed it), or a stream whose body came whole (``_whole``),
        read from its bytes as sent, as the CLI reads a dump's. Its body is never changed."""
        response = flow.response
        streamed = exchange.streamed
        # What the request hook read of the request, if it still is what went out: not read again.
        turn = self.turn_facts.get(flow.id)
        facts = turn.request if turn is not None and turn.read_from is flow.request.raw_content else None
        if not streamed and response.raw_content is None:
            # mitmproxy streamed it on, its body kept by none: past stream_large_bodies as it came (no
            # content-length said so before its headers' hook), or kept by no cap (toolcall_lens_body_cap 0).
            limit = ctx.options.stream_large_bodies if "stream_large_bodies" in ctx.options else None
            unseen = kept is not None and replaced(flow.response, kept)
            self._annotate(flow, _not_kept(exchange.format, limit, kept, unseen))
            return
        try:
            result = analyze_exchange(
                exchange,
                (response.raw_content if streamed else response.get_content(strict=False)) or b"",
                request=facts if facts is not None else flow.request.get_content(strict=False),
                encoding=response.headers.get("content-encoding") if streamed else None,
                status=response.status_code,
                reason=response.reason,
                content_type=response.headers.get("content-type", ""),
                limits=self._settings().limits,
            )
        except Exception as exc:  # noqa: BLE001
            result = failure_result(exchange.format, describe(exc), streamed=streamed)
        if result is None:  # a stream on a path of no known format that turned out to be no LLM stream
            self._forget(flow)
            return
        if kept is not None and kept.seen > kept.cap:
            message = kept_in_part(kept.cap, kept.seen)
            add_warnings(result, [_warning("body-truncated", message, kept=kept.cap, seen=kept.seen)])
        if streamed:
            settings, _ = _whole_settings(self._settings())
            if flow.live and settings.rewrites(flow):  # asked, and not applied (``_rewrite_whole``): why
                _, note = rewrite_plan(
                    exchange.format,
                    response.headers.get("content-encoding", ""),
                    settings.inject,
                    settings.repair,
                )
                if note is not None:
                    result["rewrite"] = note
            _add_skip(result, exchange.format, self.whole_skips.pop(flow.id, None))
            # Its timing: what the addon recorded live, if the flow was loaded with its record; else the
            # flow's own timestamps (a replayed answer's are the replay's).
            recorded = flow.metadata.get(METADATA_KEY)
            if read is None:
                read = "whole: loaded from a file" if not flow.live else "whole: answered by an addon"
            source = {"read": read}
            told = stored_timing(
                result,
                recorded if type(recorded) is dict else None,
                (flow.request.timestamp_end, response.timestamp_start, response.timestamp_end),
            )
            if told is not None:
                source["timing"] = told
            result["source"] = source
        self._annotate(flow, result)

    def error(self, flow: http.HTTPFlow) -> Awaitable[None] | None:
        # An upstream or client abort fires only this hook; the stream's own end marker says whether
        # the stream was complete (the sync openai SDK disconnects right after [DONE]).
        if self._settings().redact and flow.response is None:
            self._redact(flow)  # no response headers came: this is the first safe moment
        watch = self.watches.pop(flow.id, None)
        if isinstance(watch, BodyWatch):  # a message cut short: not read, as a buffered one is not
            watch = None
        if isinstance(watch, StreamWatch) and watch.remote:
            # No state to forget after it: only a flow on a known path has some, and its result takes it.
            return self._finish_remote(flow, watch)
        if watch is not None:
            self._finish_stream(flow, watch)
        self._forget(flow)
        return None

    def _forget(self, flow: http.HTTPFlow) -> None:
        self.echo_warnings.pop(flow.id, None)
        self.turn_facts.pop(flow.id, None)
        self.whole_skips.pop(flow.id, None)

    # -- WebSocket connections (OpenAI Responses WebSocket mode, Realtime, Gemini Live) ---------------------

    def websocket_start(self, flow: http.HTTPFlow) -> None:
        if not self._host_watched(flow):
            return
        settings = self._settings()
        # The upgrade path names the format; else its first messages will (None until then).
        format = formats.websocket_format(flow.request.path)
        connection = Connection(format, path=flow.request.path, limits=settings.limits)
        if flow.live and settings.rewrites(flow):  # a connection loaded from a file is a record: read only
            self.sockets[flow.id] = self._rewrite_socket(flow, format, connection, settings)
        else:
            self.sockets[flow.id] = self._socket_watch(flow, connection, settings)

    def websocket_message(self, flow: http.HTTPFlow) -> None:
        watch = self.sockets.get(flow.id)
        if watch is None:
            return
        messages = flow.websocket.messages
        settled = watch.message(messages[-1])
        if not watch.ours:
            if watch.connection.given_up:  # no LLM connection: forgotten, its messages left as they are
                del self.sockets[flow.id]
            return
        if watch.keep:
            watch.trim(messages)
        if settled:
            self._annotate_connection(flow, watch, settled)
        elif self._settings().live_every:
            now = time.time()
            if now >= watch.next_progress:
                watch.next_progress = now + self._settings().live_every
                settled = watch.feed_held()  # what it shows is never behind
                if settled:
                    self._annotate_connection(flow, watch, settled)
                else:
                    self._connection_progress(flow, watch)

    def websocket_end(self, flow: http.HTTPFlow) -> Awaitable[None] | None:
        watch = self.sockets.pop(flow.id, None)
        if watch is None:
            return
        ws = flow.websocket
        closed = {"code": ws.close_code, "reason": ws.close_reason, "by_client": ws.closed_by_client}
        if watch.remote:  # mitmproxy awaits it; other flows go on meanwhile
            return self._end_remote_socket(flow, watch, ws.timestamp_end, closed)
        settled = watch.finish(ws.timestamp_end, closed)
        if watch.ours:
            self._annotate_connection(flow, watch, settled)
        return None

    async def _end_remote_socket(self, flow: http.HTTPFlow, watch, now: float | None, closed: dict) -> None:
        """A connection analysed in the worker: annotated once its last results are back."""
        annotated = self.ending[flow.id] = asyncio.get_running_loop().create_future()
        try:
            settled = await watch.finish_remote(now, closed)
            self._annotate_connection(flow, watch, settled)
        finally:
            del self.ending[flow.id]
            annotated.set_result(None)

    def done(self) -> Awaitable[None] | None:
        master = ctx.master
        if self.master is master and master.addons.get(NAME) is not self:
            # Removed while the proxy runs: its script is being reloaded. Kept for the addon loaded next,
            # which goes on with it (``_take_over``); shut down as below if none does.
            handover.park(master, self, self._unclaimed)
            return None
        if self.ending:  # the proxy stops (Ctrl-C) as flows await the worker: they are annotated first
            return self._done_when_answered()
        self._done()
        return None

    async def _done_when_answered(self) -> None:
        await asyncio.wait(list(self.ending.values()), timeout=DONE_WAIT)
        for _ in range(3):  # the same hook of the addons after this one (the dump's) then runs for them
            await asyncio.sleep(0)
        self._done()

    def _done(self) -> None:
        self.worker.stop()
        self.sockets.clear()
        self.watches.clear()
        self.echo_warnings.clear()
        self.turn_facts.clear()
        self.whole_skips.clear()
        self._open_export("")
        if self.otlp is not None:
            self.otlp.close()  # the sessions' spans, then what is pending, within a few seconds
            self.otlp = None
        self.lines.close()  # a flow failed as the worker stopped is annotated later: its line at once

    # -- commands ------------------------------------------------------------------------------------------

    # mitmweb reaches a command at /commands/NAME, a route that takes lowercase letters and dots only.
    @command.command("toolcall.report")
    def report(self, flows: Sequence[mflow.Flow]) -> str:
        """One line per LLM flow: time, host, format, model, calls, warnings."""
        return "\n".join(report_line(flow, result) for flow, result in annotated(flows)) or "no LLM flows"

    @command.command("toolcall.export")
    def export(self, flows: Sequence[mflow.Flow], path: mtypes.Path) -> None:
        """Write the LLM flows among these to a JSONL file, one record each."""
        write_all(path, (record(flow, result) for flow, result in annotated(flows)))
        logger.info("toolcall-lens: exported LLM flows to %s", path)

    @command.command("toolcall.sessions")
    def sessions_report(self, flows: Sequence[mflow.Flow]) -> str:
        """The agent sessions of these flows, turn by turn: calls, what came back, tokens, cost, loops."""
        wanted = list(
            dict.fromkeys(s.id for flow in flows if (s := self.sessions.of_flow(flow.id)) is not None)
        )
        records = [self.sessions.record(session) for i in wanted if (session := self.sessions.get(i))]
        return "\n\n".join(format_session(record) for record in records) or "no agent sessions"

    # The earlier names, kept for mitmproxy's console and scripts (mitmweb cannot call them).
    @command.command("toolcall_lens.report")
    def report_by_earlier_name(self, flows: Sequence[mflow.Flow]) -> str:
        """toolcall.report, by its earlier name."""
        return self.report(flows)

    @command.command("toolcall_lens.export")
    def export_by_earlier_name(self, flows: Sequence[mflow.Flow], path: mtypes.Path) -> None:
        """toolcall.export, by its earlier name."""
        self.export(flows, path)

    @command.command("toolcall.otlp")
    def otlp_status(self) -> str:
        """What the OpenTelemetry export sent and lost so far."""
        return (
            self.otlp.status()
            if self.otlp is not None
            else "no OTLP export (toolcall_lens_otlp_endpoint is empty)"
        )

    @command.command("toolcall_lens.sessions")
    def sessions_by_long_name(self, flows: Sequence[mflow.Flow]) -> str:
        """toolcall.sessions, by the name the addon's other long names share."""
        return self.sessions_report(flows)

    # -- wiring --------------------------------------------------------------------------------------------

    def _settings(self) -> options.Settings:
        if self.settings is None:  # hooks before any configure (a bare test context)
            self.settings = options.parse(ctx.options)
        return self.settings

    def _classify(self, flow: http.HTTPFlow):
        # The path and content type come first and cost a few string checks: other traffic pays no more.
        response = flow.response
        if response is None or response.status_code == 101:  # a WebSocket upgrade: its own hooks read it
            return None
        content_type = response.headers.get("content-type", "")
        if not maybe_llm(flow.request.path, content_type) or not self._host_watched(flow):
            return None
        request = flow.request
        return classify(
            path=request.path,
            status=response.status_code,
            content_type=content_type,
            # Read only where it decides: a stream's request (a MiB, perhaps compressed) is read in the worker.
            request=lambda: request.get_content(strict=False),
        )

    def _host_watched(self, flow: http.HTTPFlow) -> bool:
        hosts = self._settings().hosts
        return not hosts or any(
            fnmatch.fnmatch(host, pattern)
            for pattern in hosts
            for host in (flow.request.host, flow.request.pretty_host)
        )

    def _open_otlp(self, settings: options.Settings) -> None:
        if self.otlp is not None:
            self.otlp.close()
            self.otlp = None
        if not settings.otlp_endpoint:
            return
        try:
            self.otlp = SpanExport(
                settings.otlp_endpoint, dict(settings.otlp_headers), content=settings.otlp_content
            )
        except ImportError as exc:
            raise exceptions.OptionsError(f"toolcall_lens_otlp_endpoint: {exc}") from None

    def _emit(self, flow: http.HTTPFlow, result: dict, model: str | None) -> None:
        """The response's span, to the OTLP export if there is one; a failure here costs the flow nothing."""
        if self.otlp is None:
            return
        try:
            request = flow.request
            websocket = result.get("websocket")
            if websocket:
                start = message_time(flow, websocket["first_message"]) or request.timestamp_start
                end = message_time(flow, websocket["last_message"])
            else:
                start = request.timestamp_start
                response = flow.response
                end = (response.timestamp_end if response else None) or (
                    flow.error.timestamp if flow.error else time.time()
                )
            facts = FlowFacts(start, end, request.host, request.port, model)
            self.otlp.emit(result, facts)
        except Exception as exc:  # noqa: BLE001
            logger.warning("toolcall-lens: the OTLP span failed: %s", describe(exc))

    def _open_export(self, path: str) -> None:
        if self.jsonl is not None:
            self.jsonl.close()
            self.jsonl = None
        if path:
            try:
                self.jsonl = JsonlFile(path)
            except OSError as exc:
                raise exceptions.OptionsError(
                    f"toolcall_lens_jsonl: cannot open {path}: {exc.strerror}"
                ) from None

    def _progress(self, flow: http.HTTPFlow, watch: StreamWatch) -> None:
        """A running stream's calls so far, on the flow, and mitmweb told to show them."""
        _when_answered(
            watch.accumulator.snapshot(),
            lambda: self.watches.get(flow.id) is watch,
            lambda snapshot: self._show_progress(flow, snapshot),
        )

    def _show_progress(self, flow: http.HTTPFlow, snapshot: dict | None) -> None:
        if snapshot is None:
            return
        flow.metadata["toolcall_lens_live"] = snapshot
        names = [c["name"] or "?" for choice in snapshot["choices"] for c in choice["tool_calls"]]
        flow.comment = (
            f"{snapshot['format']} {snapshot['model'] or '?'}: streaming, {snapshot['events']} events"
            + (f", {len(names)} call(s) so far: {', '.join(names)}" if names else "")
        )
        ctx.master.addons.trigger(hooks.UpdateHook([flow]))

    def _socket_watch(self, flow: http.HTTPFlow, connection: Connection, settings) -> WebSocketWatch:
        """A WebSocket flow's watch, feeding its core in batches on the event loop where there is one."""
        # A connection loaded from a file keeps every message it was loaded with (it is a record).
        keep = settings.websocket_keep if flow.live else 0
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop (mitmproxy's test harness): every message is fed as it comes
            return WebSocketWatch(connection, keep)

        def settled_later(settled: list[dict]) -> None:
            # On the event loop, after the hooks: mitmweb is told, as for a live update.
            try:
                if self.sockets.get(flow.id) is watch:
                    self._annotate_connection(flow, watch, settled)
                    ctx.master.addons.trigger(hooks.UpdateHook([flow]))
            except Exception as exc:  # noqa: BLE001 - the traffic goes on whatever happened here
                logger.warning("toolcall-lens: WebSocket annotation failed: %s", describe(exc))

        remote = None
        if settings.worker and connection.format is not None:  # named by its path: analysed in the worker
            remote = self.worker.connect(
                connection.format,
                flow.request.path,
                settings.limits,
                settings.prices,
                self._asked(flow),
                flow_id=flow.id,
            )
        if remote is not None:
            watch: WebSocketWatch = RemoteSocketWatch(remote, keep, loop.call_later, settled_later)
        else:
            watch = WebSocketWatch(connection, keep, loop.call_soon, loop.call_later, settled_later)
        return watch

    def _rewrite_socket(
        self, flow: http.HTTPFlow, format, connection: Connection, settings
    ) -> WebSocketWatch:
        """The watch of a WebSocket flow whose server messages are to be rewritten, when that applies; a
        plain watch whose record says why not otherwise."""
        if format is None:
            watch = WebSocketWatch(connection, settings.websocket_keep)
            reason = "the connection's format was told by its messages, not its path: it is watched, never rewritten"
            skipped = [{"name": name, "reason": reason} for name in (*settings.inject, *settings.repair)]
            watch.record["rewrite"] = {"inject": [], "repair": [], "skipped": skipped}
            return watch
        rewriter = MessageRewriter(
            format, inject=settings.inject, repair=settings.repair, max_calls=settings.limits.max_calls
        )
        if not rewriter.applies:
            watch = WebSocketWatch(connection, settings.websocket_keep)
            watch.record["rewrite"] = rewriter.report()
            return watch
        upstream = Connection(format, path=flow.request.path, limits=settings.limits)

        def inject(content: bytes, is_text: bool) -> None:
            ctx.master.commands.call("inject.websocket", flow, True, content, is_text)

        return RewriteSocketWatch(connection, settings.websocket_keep, upstream, rewriter, inject)

    def _annotate_connection(self, flow: http.HTTPFlow, watch: WebSocketWatch, settled: list[dict]) -> None:
        """A WebSocket flow's record, comment and marker, now that responses were settled (or it ended);
        one log line and one JSONL record per settled response."""
        # Priced and placed first: a loop the session sees is in the tally, the comment and the marker. (The
        # upgrade's headers and URL, read once for the batch: mitmproxy's lookups cost 4 us each.)
        headers = _session_headers(flow.request.headers)
        url = self._url(flow)
        asked_models = [self._price_and_place(flow, result, True, headers, url) for result in settled]
        watch.refresh(settled)
        flow.metadata.pop("toolcall_lens_live", None)
        flow.metadata[METADATA_KEY] = watch.record
        flow.comment = watch.comment()
        marker = self._settings().marker
        if watch.loud and marker:
            flow.marked = marker
        # One log line per response; the lines of responses settled together, one record per level (each
        # record costs mitmproxy ~60-90 us of CPU, a line in it next to nothing).
        lines: list[tuple[int, str]] = []
        for result, model in zip(settled, asked_models, strict=True):
            self._emit(flow, result, model)
            self.observed.record(result, flow.id)
            if not watch.remote:  # the worker's echo checks know the calls of the results it made
                self.worker.record(flow.id, result, None)
            bad = any(w["severity"] == "warning" for w in result["warnings"])
            position = result["websocket"]["position"]
            lines.append(
                (
                    logging.WARNING if bad else logging.INFO,
                    f"toolcall-lens WebSocket {url} response {position}: {summary_line(result)}",
                )
            )
            if self.jsonl is not None:
                try:
                    self.jsonl.append(record(flow, result))
                except OSError as exc:
                    logger.warning("toolcall-lens: cannot append to %s: %s", self.jsonl.path, exc)
        if lines:
            self.lines.say(lines)
        # No UpdateHook here: mitmproxy sends one after every websocket hook (its addon manager).

    def _connection_progress(self, flow: http.HTTPFlow, watch: WebSocketWatch) -> None:
        snapshot = watch.connection.snapshot()
        if not isinstance(snapshot, asyncio.Future):  # in the hook: mitmproxy tells mitmweb after it
            self._show_connection_progress(flow, snapshot)
            return

        def show(snapshot: dict | None) -> None:
            self._show_connection_progress(flow, snapshot)
            ctx.master.addons.trigger(hooks.UpdateHook([flow]))

        _when_answered(snapshot, lambda: self.sockets.get(flow.id) is watch, show)

    def _show_connection_progress(self, flow: http.HTTPFlow, snapshot: dict | None) -> None:
        if snapshot is None:
            return
        flow.metadata["toolcall_lens_live"] = snapshot
        names = [
            c["name"] or "?"
            for running in snapshot["running"]
            for choice in running.get("choices", ())
            for c in choice["tool_calls"]
        ]
        flow.comment = (
            f"{snapshot['format']} websocket: {snapshot['finished']} response(s) done, "
            f"{len(snapshot['running'])} running"
            + (f", {len(names)} call(s) so far: {', '.join(names)}" if names else "")
        )

    def _link_earlier_flows(self, flow: http.HTTPFlow, found: list[dict]) -> None:
        """Give each earlier flow whose calls were echoed wrong a back-reference, while it is in the view."""
        view = ctx.master.addons.get("view")
        if view is None:
            return
        changed = []
        for warning in found:
            earlier = view.get_by_id(warning.get("earlier_flow") or "")
            if earlier is None or earlier is flow:
                continue
            links = earlier.metadata.setdefault("toolcall_lens_echoes", [])
            if not any(link["flow_id"] == flow.id for link in links):
                links.append({"flow_id": flow.id, "code": warning["code"], "ids": []})
                said = "a call dropped by" if warning["code"] == "unanswered-call" else "echoed wrong by"
                earlier.comment = f"{earlier.comment} | {said} flow {flow.id}".lstrip(" |")
                changed.append(earlier)
            next(link for link in links if link["flow_id"] == flow.id)["ids"].append(warning.get("id"))
        if changed:
            ctx.master.addons.trigger(hooks.UpdateHook(changed))

    def _finish_stream(self, flow: http.HTTPFlow, watch) -> None:
        self._finished(flow, watch, *watch.finish())

    async def _finish_remote(self, flow: http.HTTPFlow, watch: StreamWatch) -> None:
        """A stream analysed in the worker: annotated once its result is back."""
        annotated = self.ending[flow.id] = asyncio.get_running_loop().create_future()
        try:
            result, body = await watch.finish_remote()
            self._finished(flow, watch, result, body)
        finally:
            del self.ending[flow.id]
            annotated.set_result(None)

    def _finished(self, flow: http.HTTPFlow, watch, result: dict | None, body: bytes) -> None:
        # Another addon's stream callable took this one's place after it was set: it saw nothing.
        unseen = flow.response is not None and replaced(flow.response, watch)
        if watch.body_cap and flow.response is not None and not unseen:
            flow.response.raw_content = body
        remote = isinstance(watch, StreamWatch) and watch.remote
        read = watch.request_read if remote else None
        if read is not None:  # what the worker read of the request (its echo warnings are on the result)
            echoes, tool_results, previous_response_id, model, failed = read
            if failed is not None:  # the result's evidence says why too, as for a request read here
                logger.warning("toolcall-lens: echo check failed: %s", failed)
            self.turn_facts[flow.id] = Asked(tool_results, previous_response_id, model)
            if echoes:
                self._link_earlier_flows(flow, echoes)
        if unseen and result is not None:
            exchange = self._classify(flow)
            if exchange is not None and flow.response.raw_content is not None:  # store_streamed_bodies
                self._analyse_whole(
                    flow, exchange, read="whole: its stream callable replaced by another addon"
                )
                return
            result = _unseen(result["format"], streamed=True)
        if result is not None:  # None: a stream of unknown format that was no LLM stream we read
            _add_skip(result, result.get("format"), self.whole_skips.pop(flow.id, None))
            self._annotate(flow, result, watch.url, remote)
        else:
            self._forget(flow)

    def _url(self, flow: http.HTTPFlow) -> str:
        """The request URL as mitmproxy shows it (``pretty_url``): what the addon logs and prices with."""
        return pretty_url(flow.request, self.url_starts)

    def _asked(self, flow: http.HTTPFlow, url: str | None = None) -> tuple:
        """How the worker prices a flow's results: (its URL, its request's time, the model it asked for)."""
        facts = self.turn_facts.get(flow.id)
        return url or self._url(flow), flow.request.timestamp_start, facts.model if facts else None

    def _price_and_place(
        self,
        flow: http.HTTPFlow,
        result: dict,
        connection: bool = False,
        headers=None,
        url: str | None = None,
    ) -> str | None:
        """The response's cost, and its place in its agent session (loop warnings with it). Returns the
        model its request asked for."""
        settings = self._settings()
        request = flow.request
        facts = self.turn_facts.pop(flow.id, None) or Asked([], None, None)
        if "cost" not in result:  # a result from the worker comes priced
            price(settings.prices, result, url or self._url(flow), request.timestamp_start, facts.model)
        try:
            self.sessions.place(
                result,
                flow.id,
                headers=_session_headers(request.headers) if headers is None else headers,
                previous_response_id=facts.previous_response_id,
                tool_results=facts.tool_results,
                connection=connection,
                time=request.timestamp_start,
                replay=flow.is_replay == "request",
            )
        except Exception as exc:  # noqa: BLE001
            logger.warning("toolcall-lens: placing a flow in its session failed: %s", describe(exc))
        return facts.model

    def _annotate(
        self, flow: http.HTTPFlow, result: dict, url: str | None = None, remote: bool = False
    ) -> None:
        """A flow's result on it (``url``: its request's pretty URL, if read already; ``remote``: the
        result came from the worker, which knows its calls)."""
        echoes = self.echo_warnings.pop(flow.id, None)
        url = url or self._url(flow)
        if echoes is not None:
            add_evidence(result, *echoes)
        request, response = flow.request, flow.response
        done = response.timestamp_end if response is not None and response.timestamp_end else time.time()
        try:
            self.relays.check(
                result, flow.id, f"{request.host}:{request.port}", request.timestamp_start, done
            )
        except Exception as exc:  # noqa: BLE001 - a fault here costs the flow its pairing, nothing more
            logger.warning("toolcall-lens: pairing a gateway's two sides failed: %s", describe(exc))
        self._emit(flow, result, self._price_and_place(flow, result, url=url))
        ended = time.time()
        # A replay's calls went to mitmproxy, not to the agent: none of its requests will echo them, and
        # they must not take the place of the calls it did get (its next turn would "drop" them).
        if flow.is_replay != "request":
            self.observed.record(result, flow.id, ended)
            if not remote:
                self.worker.record(flow.id, result, ended)
        flow.metadata.pop("toolcall_lens_live", None)
        flow.metadata[METADATA_KEY] = result
        line = summary_line(result)
        flow.comment = line
        loud = any(w["severity"] == "warning" for w in result["warnings"])
        marker = self._settings().marker
        if loud and marker:
            flow.marked = marker
        level = logging.WARNING if loud else logging.INFO
        replay = " [replay]" if flow.is_replay == "request" else ""  # as mitmproxy tells its replays
        self.lines.say([(level, f"toolcall-lens{replay} {flow.request.method} {url}: {line}")])
        if self.jsonl is not None:
            try:
                self.jsonl.append(record(flow, result))
            except OSError as exc:
                logger.warning("toolcall-lens: cannot append to %s: %s", self.jsonl.path, exc)


contentviews.add(ToolcallLensView)
addons = [ToolcallLens()]
