"""Analysis in a worker process (``toolcall_lens_worker``): the proxy's thread only holds each chunk and
ships it, in the batches it would have fed its own core; the worker runs the same core on another CPU and
answers each flow's end with its result. docs/performance.md has what it saves and costs.

The proxy side (``AnalysisWorker``, ``RemoteAccumulator``) runs on mitmproxy's event loop: a flow's end
waits for its result without stopping other flows (the hook returns an awaitable). The worker is this
module run as ``python -m toolcall_lens.worker``: messages in on stdin, answers out on stdout, each a
length and a ``marshal`` payload (bytes, numbers, strings, lists and dicts, which is all a stream and a
result hold); a result travels inside it as its JSON (``packed``), which the proxy reads back faster, and
a request's body after it, as it is (``send``'s ``raw``: no copy on the proxy's side). The worker reads each
stream's request (its echo check, what it declares, the session facts), against the calls of every result
it made and the proxy told it of (``ObservedCalls``), and sends what the proxy's session needs with the
result.
Nothing a flow does can stop the worker: a fault inside one flow's analysis ends that flow's result as a
failure, as it would in the proxy. If the worker dies or stops answering, every flow waiting on it gets a
failure result saying so, the bytes keep flowing, and the next flow starts a new one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import marshal
import os
import select
import signal
import struct
import subprocess
import sys
import time
from bisect import insort
from collections import deque
from datetime import UTC, datetime
from pathlib import Path

import orjson

from accumulator import Connection, StreamAccumulator, sessions
from accumulator.cost import Prices, parse_price_file
from accumulator.echo import ObservedCalls, add_evidence, no_evidence
from accumulator.limits import DEFAULT_LIMITS, Limits
from accumulator.request import RequestFacts, decoded, request_body
from accumulator.warnings import WarningLog
from accumulator.websocket import MAX_RESULTS

logger = logging.getLogger("toolcall_lens")

# OPEN a flow's stream, CONNECT a WebSocket connection; FEED, NOTE, SNAPSHOT and FINISH either; SETTLED:
# the worker's word that a connection's batch settled responses (or failed), unasked; PRICES: the prices
# the results are priced with (the worker prices them: genai-prices takes 70-130 us a response); RECORD:
# the calls of a result the proxy made itself, for the echo checks the worker makes.
OPEN, FEED, NOTE, SNAPSHOT, FINISH, CONNECT, SETTLED, PRICES, RECORD = range(9)
FAILED = "failed"
_LENGTH = struct.Struct("<I")
_PIPE_SIZE = 1 << 20  # bytes a pipe holds before a write waits (what the kernel allows; 64 KiB otherwise)
# Bytes the proxy asks for in one read of the answers (it reads until none are left). A read of a MiB costs
# its thread an mmap and a munmap (~11 us) however little comes; 64 KiB comes from the heap (~1 us).
_READ_SIZE = 1 << 16
ANSWER_TIMEOUT = 30.0  # seconds a flow's end waits for its result before the worker is taken for stuck
# Seconds a write may wait for room in a full pipe (the proxy's thread waits meanwhile) before the worker
# is taken for stuck: a worker keeps up with the proxy many times over, so a full pipe means it is not.
WRITE_TIMEOUT = 2.0
# Messages and bodies up to this size are joined into one write; a larger body goes as it is (``writev``):
# a real agent's request is a MiB, and each copy of it costs the proxy's thread ~100 us.
_JOINED = 1 << 16
_PARTS = 512  # buffers in one writev (the kernel takes 1024)
# Workers in a row that end before they answer anything (a Python that cannot run this module, say) after
# which the proxy stops starting them and analyses in its own thread, as without the option.
DEAD_STARTS = 3


def _frame(message: object) -> bytes:
    payload = marshal.dumps(message)
    return _LENGTH.pack(len(payload)) + payload


def _coalesced(parts: list) -> list:
    """The buffers of one flush, each run of small ones joined (one write wakes the worker once); a large
    body stays the object it is."""
    out: list = []
    run: list = []
    for part in parts:
        if len(part) < _JOINED:
            run.append(part)
            continue
        if run:
            out.append(b"".join(run))
            run = []
        out.append(part)
    if run:
        out.append(b"".join(run))
    return out


def _after(parts: list, written: int) -> list:
    """What is left of ``parts`` once ``written`` bytes of them went."""
    done = 0
    while done < len(parts) and written >= len(parts[done]):
        written -= len(parts[done])
        done += 1
    rest = parts[done:]
    if written:
        rest[0] = memoryview(rest[0])[written:]
    return rest


def packed(results: dict | list | None) -> object:
    """A result, or a list of them, as the worker sends it: its JSON, which the proxy's thread reads back
    in ~60% of the time marshal takes for the same dicts (5 against 8.4 us for a short flow's result);
    the value itself where JSON cannot hold it (an integer beyond 64 bits)."""
    if results is None:
        return None
    try:
        return orjson.dumps(results)
    except orjson.JSONEncodeError:
        return results


def unpacked(results: object) -> object:
    """What ``packed`` made of a result (or of a list of them), as it was."""
    return orjson.loads(results) if type(results) is bytes else results


def price(prices, result: dict, url: str, started: float, model: str | None) -> None:
    """``result["cost"]`` (and ``cost_note`` when there is none): as of ``started`` (the request's time, a
    timestamp), for the model the request asked for where the response names none. A lookup that fails
    is said in the note and costs the flow nothing else. The proxy's, and the worker's."""
    try:
        when = datetime.fromtimestamp(started, UTC)
        result["cost"], note = prices.cost(result, url=url, when=when, model=model)
        if note is not None:
            result["cost_note"] = note
    except Exception as exc:  # noqa: BLE001
        result["cost"], result["cost_note"] = None, f"pricing failed: {describe(exc)}"


def describe(exc: BaseException) -> str:
    """An exception as one line for a warning or the log (the watches' and the worker's)."""
    try:
        return f"{type(exc).__name__}: {exc}"[:500]
    except Exception:  # noqa: BLE001 - even a broken __str__ must not escape
        return type(exc).__name__


def request_as_sent(request) -> tuple[bytes | None, str | None]:
    """A request's body as it came, and its Content-Encoding (None: none): decoded where it is read
    (``read_request``), in the worker for a stream. Codex sends its requests compressed (zstd): decoding
    818 KiB of one costs ~0.8 ms, which the proxy's thread no longer spends (docs/performance.md)."""
    coding = request.headers.get("content-encoding", "").strip()
    return request.raw_content, coding or None


def read_request(
    observed: ObservedCalls,
    body,
    format: str | None,
    sent: float | None = None,
    encoding: str | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> tuple[sessions.Asked | None, list[dict], dict, str | None]:
    """A request body read once, where it is read (the addon's thread as a request passes, or the worker's
    as its stream begins): (its facts, None where they could not be read; the echo check's warnings and
    evidence, its responses matched by position as of ``sent``; why the reading failed, or None). A
    failure costs the flow its facts and evidence (which says why), nothing more. ``encoding``: the
    body's Content-Encoding (``request_as_sent``), decoded first."""
    # Streamed by mitmproxy and not kept (too long for toolcall_lens_body_cap), or stored without it.
    if body is None:
        why = (
            "the request's body is not there (mitmproxy streamed it on, its stream_large_bodies; "
            "or it was stored without it)"
        )
        return None, [], no_evidence(why), None
    if encoding is not None:
        try:
            body = request_body(body, encoding, limits.max_decoded_bytes)
        except ValueError as exc:  # said as it is: the body, not the check, is at fault
            return None, [], no_evidence(str(exc)), str(exc)
    try:
        request = decoded(body)
        facts = sessions.asked(request, format)
        echoes, evidence = observed.examine(request, format, sent)
    except Exception as exc:  # noqa: BLE001 - a failed check must not touch the flow
        why = describe(exc)
        return None, [], no_evidence(f"the check failed: {why}"), why
    return facts, echoes, evidence, None


# -- the worker process ----------------------------------------------------------------------------------


def _read_exactly(stream, n: int) -> bytes | None:
    data = stream.read(n)
    return data if len(data) == n else None


def serve(stdin, stdout) -> None:
    """Answer messages from ``stdin`` (a binary stream) on ``stdout`` until ``stdin`` ends."""
    from .websocket import WebSocketWatch  # here: websocket.py imports this module

    # A stream's accumulator, a connection's watch (the proxy's own class, fed as it would feed it), or
    # why that flow's analysis failed.
    flows: dict[int, StreamAccumulator | WebSocketWatch | str] = {}
    asked: dict[int, tuple] = {}  # flow -> (url, request time, model asked): how its results are priced
    prices = Prices()
    observed = ObservedCalls()  # the calls of recent results, as the proxy's echo check keeps them
    flow_ids: dict[int, str] = {}  # flow -> the proxy's flow id, which its results are recorded under
    # flow -> what its request said, read here: (echo warnings, evidence, tool results, previous response
    # id, model asked, why the reading failed or None)
    requests: dict[int, tuple] = {}

    def answer(key: int, op: int, payload: object) -> None:
        stdout.write(_frame((key, op, payload)))
        stdout.flush()

    def said(key: int, where: tuple | None, watch: WebSocketWatch, settled: list) -> tuple:
        for result in settled if where is not None else ():
            price(prices, result, *where)
        flow_id = flow_ids.get(key)
        for result in settled if flow_id is not None else ():
            observed.record(result, flow_id)
        return packed(settled), watch.connection.summary(), watch.failure

    while True:
        head = _read_exactly(stdin, 4)
        if head is None:
            return
        body = _read_exactly(stdin, _LENGTH.unpack(head)[0])
        if body is None:
            return
        message = marshal.loads(body)
        key, op, payload = message[:3]
        raw = None
        if len(message) > 3:  # a body follows, as it is
            raw = _read_exactly(stdin, message[3])
            if raw is None:
                return
        flow = flows.get(key)
        try:
            if op == OPEN:
                settings = dict(payload)
                settings["limits"] = Limits(**settings["limits"])
                facts = settings.pop("facts", None)
                coding = settings.pop("request_encoding", None)  # the body's, as it came: decoded here
                if facts is not None:
                    settings["request"] = RequestFacts(*facts)
                elif raw is not None:
                    settings["request"] = raw
                asked[key] = settings.pop("price", None)
                flow_id, read = settings.pop("flow_id", None), settings.pop("read_request", False)
                if flow_id is not None:
                    flow_ids[key] = flow_id
                observed.size = settings.pop("index_size", observed.size)
                observed.max_bytes = settings.pop("index_bytes", observed.max_bytes)
                if read:
                    facts, echoes, evidence, failed = read_request(
                        observed,
                        settings["request"],
                        settings["format"],
                        settings["started_at"],
                        coding,
                        settings["limits"],
                    )
                    if facts is None:  # the accumulator reads what it can of the body itself
                        if coding is not None:  # a body that does not decode has nothing to give it
                            settings["request"] = None
                        facts = sessions.Asked([], None, None)
                    else:
                        settings["request"] = facts.request
                    requests[key] = (
                        echoes,
                        evidence,
                        facts.tool_results,
                        facts.previous_response_id,
                        facts.model,
                        failed,
                    )
                    where = asked[key]
                    if where is not None and where[2] is None:  # the model the request asked for
                        asked[key] = (*where[:2], facts.model)
                elif coding is not None and raw is not None:  # only the accumulator reads it
                    try:
                        settings["request"] = request_body(raw, coding, settings["limits"].max_decoded_bytes)
                    except ValueError:  # its facts are lost, as for a body that is no JSON
                        settings["request"] = None
                flows[key] = StreamAccumulator(settings.pop("format"), **settings)
            elif op == CONNECT:
                format, path, limits, asked[key], *rest = payload
                if rest:
                    flow_ids[key] = rest[0]
                flows[key] = WebSocketWatch(Connection(format, path=path, limits=Limits(**limits)), 0)
            elif op == RECORD:
                flow_id, result, ended = payload
                observed.record(unpacked(result), flow_id, ended)
            elif op == PRICES:
                source, content = payload
                prices = Prices(parse_price_file(content, source), source, content) if content else Prices()
            elif op == FEED:
                if isinstance(flow, StreamAccumulator):
                    feed = flow.feed
                    chunks, times = payload  # a batch's chunks, and when each came (``StreamWatch``)
                    for chunk, now in zip(chunks, times, strict=True):
                        feed(chunk, now)
                elif isinstance(flow, WebSocketWatch) and flow.failure is None:
                    flow.held = payload
                    settled = flow.feed_held()  # never raises: a fault is the connection's failure
                    if settled or flow.failure is not None:
                        answer(key, SETTLED, said(key, asked.get(key), flow, settled))
            elif op == NOTE:
                code, message, details = payload
                if isinstance(flow, StreamAccumulator):
                    flow.note(code, message, **details)
                elif isinstance(flow, WebSocketWatch):
                    flow.connection.warnings.add(code, message, **details)
            elif op == SNAPSHOT:
                if isinstance(flow, StreamAccumulator):
                    answer(key, SNAPSHOT, flow.snapshot())
                else:
                    answer(
                        key,
                        SNAPSHOT,
                        flow.connection.snapshot() if isinstance(flow, WebSocketWatch) else None,
                    )
            elif op == FINISH:
                flows.pop(key, None)
                where = asked.pop(key, None)
                read = requests.pop(key, None)
                if isinstance(flow, StreamAccumulator):
                    flow_id = flow_ids.pop(key, None)
                    result = flow.finish(payload)
                    if result is not None:
                        if read is not None:
                            add_evidence(result, read[0], read[1])
                        if where is not None:
                            price(prices, result, *where)
                        if flow_id is not None:
                            observed.record(result, flow_id, payload)
                    told = packed([read[0], *read[2:]]) if read is not None else None
                    answer(key, FINISH, (packed(result), flow.format, told))
                elif isinstance(flow, WebSocketWatch):
                    answer(key, FINISH, said(key, where, flow, flow.finish(payload, None)))
                    flow_ids.pop(key, None)
                else:
                    flow_ids.pop(key, None)
                    answer(key, FINISH, (FAILED, flow or "the worker never saw this flow open"))
        except Exception as exc:  # noqa: BLE001 - one flow's fault is that flow's failure, never the worker's
            if op == PRICES:  # read by the proxy already: it cannot fail here but for a bug
                prices = Prices()
            elif op == FINISH:
                answer(key, FINISH, (FAILED, describe(exc)))
            elif op == SNAPSHOT:
                answer(key, SNAPSHOT, None)
            else:
                flows[key] = describe(exc)


def main() -> None:
    # A signal meant for the proxy (its own session keeps the terminal's and the group's away) must not end
    # the worker either: it lets the proxy finish the flows it holds, and ends when its input does.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    serve(sys.stdin.buffer, sys.stdout.buffer)


# -- the proxy's side ------------------------------------------------------------------------------------


class WorkerGone(Exception):
    """The worker exited or stopped answering: the analysis of a flow waiting on it is lost."""


class AnalysisWorker:
    """The worker process, as the addon sees it: started on first use, one per proxy, answers routed to
    the flow that asked. Used from the event loop's thread only."""

    def __init__(self) -> None:
        self.process: subprocess.Popen | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._next_key = 0
        # (flow, message) -> the futures waiting for its answers, oldest first (the worker answers in order)
        self._waiting: dict[tuple[int, int], list[asyncio.Future]] = {}
        # The answers awaited (``answer``), oldest first, each with its deadline, and the one timer that
        # watches the oldest: a timeout of its own for each costs a flow's end ~15 us of the proxy's CPU.
        self._deadlines: deque[tuple[float, asyncio.Future]] = deque()
        self._watchdog: asyncio.TimerHandle | None = None
        self._replies = bytearray()
        self._outbox: list[bytes] = []  # messages that wait for one that flushes (``send``)
        self._listeners: dict[int, object] = {}  # connection -> who hears what the worker says unasked
        self._prices = None
        self.started = 0  # processes started, over the proxy's life
        self.gone: str | None = None  # why the last process ended, if it did
        self._unavailable = False  # the last start failed (said once in the log)
        self._answered = False  # the running worker has answered at least once
        self.dead_starts = 0  # workers in a row that ended before answering anything

    @property
    def alive(self) -> bool:
        """A worker runs, as far as the proxy has seen: one that exits closes its pipes, and the proxy sees
        that as it reads its answers or writes to it (``_lost``). No ``waitpid`` at each flow's open: ~14 us
        of the proxy's thread a flow under load (py-spy, docs/performance.md)."""
        return self.process is not None

    @property
    def usable(self) -> bool:
        """Whether a flow opened now may be analysed in a worker (one runs or can be started), as far as
        can be told before trying: not given up after failed starts, not on Windows."""
        return self.dead_starts < DEAD_STARTS and sys.platform != "win32"

    def open(self, settings: dict, prices=None) -> RemoteAccumulator | None:
        """A new flow's accumulator in the worker (started first if there is none); None if no worker
        can be had (the flow is then analysed in the proxy, and the log says why). With ``prices`` and
        the settings' ``price`` (``remote_settings``), its result comes back priced. A request body goes
        after the message as it is (no copy of a MiB on the proxy's thread)."""
        request = settings.get("request")
        raw = None
        if type(request) is bytes:
            settings, raw = {**settings, "request": None}, request
        key = self._open(OPEN, settings, prices, raw)
        return None if key is None else RemoteAccumulator(self, key, settings.get("format"))

    def record(self, flow_id: str, result: dict, ended: float | None) -> None:
        """Tell a running worker the calls of a result the proxy made itself (a buffered response, a flow
        it analysed itself), for the echo checks the worker makes; with the next message that goes.
        Nothing without a worker: the next one starts with no calls known."""
        if self.process is None:
            return
        try:
            self.send(0, RECORD, (flow_id, packed(result), ended), flush=False)
        except WorkerGone:
            pass

    def connect(
        self,
        format: str,
        path: str,
        limits,
        prices=None,
        price: tuple | None = None,
        flow_id: str | None = None,
    ) -> RemoteConnection | None:
        """A new WebSocket connection's ``Connection`` in the worker, as ``open`` for a stream; ``price``:
        (the URL, the request's time, the model asked for), as ``remote_settings`` takes them; ``flow_id``:
        the proxy's, which the worker keeps its results' calls under."""
        payload = (format, path, _limits(limits), price) + ((flow_id,) if flow_id is not None else ())
        key = self._open(CONNECT, payload, prices)
        return None if key is None else RemoteConnection(self, key, format, path)

    def _open(self, op: int, payload: object, prices, raw: bytes | None = None) -> int | None:
        try:
            if self.dead_starts >= DEAD_STARTS:
                raise WorkerGone(
                    f"{self.dead_starts} workers in a row ended before answering anything ({self.gone})"
                )
            if sys.platform == "win32":
                raise WorkerGone("not on Windows, where mitmproxy's event loop cannot watch a pipe")
            if not self.alive:
                self._start()
            if prices is not None and prices is not self._prices:  # the option changed, or a new worker
                self.send(0, PRICES, (prices.source, prices.content), flush=False)
                self._prices = prices
            self._next_key += 1
            self.send(self._next_key, op, payload, flush=False, raw=raw)  # with its first batch, or its end
        except Exception as exc:  # noqa: BLE001 - no worker: the flow is analysed where it is
            if not self._unavailable:
                logger.warning(
                    "toolcall-lens: no analysis worker (%s): analysing in the proxy", describe(exc)
                )
            self._unavailable = True
            return None
        self._unavailable = False
        return self._next_key

    def listen(self, key: int, listener) -> None:
        """``listener.settled(payload)`` for each SETTLED the worker sends about ``key``;
        ``listener.lost(why)`` if the worker is lost first. Until ``unlisten``."""
        self._listeners[key] = listener

    def unlisten(self, key: int) -> None:
        self._listeners.pop(key, None)

    def _start(self) -> None:
        self.stop()
        root = str(Path(__file__).resolve().parent.parent)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "toolcall_lens.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            cwd=root,
            # Its own session: Ctrl-C in a terminal, or a SIGTERM to the proxy's process group, does not
            # reach it, so the proxy can finish the flows it holds as it stops. It ends with its input.
            start_new_session=True,
        )
        self.started += 1
        self._prices = None  # the prices this worker was given
        self.gone = None
        self._answered = False
        try:
            self._watch_pipes()
        except BaseException:
            self._close()  # a worker whose answers cannot be read is no worker
            raise
        logger.info("toolcall-lens: analysis worker started (pid %d)", self.process.pid)

    def _watch_pipes(self) -> None:
        assert self.process is not None
        for pipe in (self.process.stdin, self.process.stdout):
            try:
                import fcntl

                fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, _PIPE_SIZE)
            except (ImportError, OSError, AttributeError):  # not Linux, or a lower limit: the default
                pass
        os.set_blocking(self.process.stdin.fileno(), False)  # a stuck worker must not stop the proxy
        os.set_blocking(self.process.stdout.fileno(), False)  # its answers are read until none are left
        self._loop = asyncio.get_running_loop()
        self._replies.clear()
        self._loop.add_reader(self.process.stdout.fileno(), self._on_readable, self.process)

    def send(self, key: int, op: int, payload: object, flush: bool = True, raw: bytes | None = None) -> None:
        """One message to the worker; raises WorkerGone if it cannot take it. Without ``flush`` it waits
        for the next message that flushes, and goes with it in one write (each write wakes the worker,
        and costs the proxy's thread more than the bytes do: a short flow's open, last batch and end go
        as one). ``raw``: bytes the worker reads after the message, as they are."""
        process = self.process
        if process is None:
            raise WorkerGone(self.gone or "the analysis worker is not running")
        if raw is None:
            self._outbox.append(_frame((key, op, payload)))
        else:
            self._outbox += (_frame((key, op, payload, len(raw))), raw)
        if not flush:
            return
        # No waitpid here (~13 us of the proxy's thread a flow under load): a worker that exited has
        # closed its end of the pipe, and the write below fails with EPIPE.
        parts = _coalesced(self._outbox)
        self._outbox.clear()
        try:
            fd, answers = process.stdin.fileno(), process.stdout.fileno()
            deadline = None
            while parts:
                try:
                    if len(parts) == 1:
                        parts = _after(parts, os.write(fd, parts[0]))
                    else:
                        parts = _after(parts, os.writev(fd, parts[:_PARTS]))
                except BlockingIOError:  # the pipe is full: wait for room, a little
                    if deadline is None:
                        deadline = time.monotonic() + WRITE_TIMEOUT
                    left = deadline - time.monotonic()
                    readable, writable, _ = (
                        select.select([answers], [fd], [], left) if left > 0 else ([], [], [])
                    )
                    if readable and not writable:
                        # The worker may wait for room for its answers (it reads nothing meanwhile): they
                        # are read now and taken on the loop's next turn.
                        if not self._read(process):
                            self._lost(f"the analysis worker exited (code {process.poll()})")
                            raise WorkerGone(self.gone) from None
                        assert self._loop is not None
                        self._loop.call_soon(self._take_answers)
                    elif not writable:
                        self._lost(
                            f"the analysis worker fell behind by a full pipe for {WRITE_TIMEOUT:g} s and was stopped"
                        )
                        raise WorkerGone(self.gone) from None
        except OSError as exc:
            code = process.poll()
            self._lost(
                f"the analysis worker exited (code {code})"
                if code is not None
                else f"the analysis worker exited ({describe(exc)})"
            )
            raise WorkerGone(self.gone) from None

    def ask(self, key: int, op: int, payload: object) -> asyncio.Future:
        """Send a message that is answered: a future of the answer (WorkerGone if none will come)."""
        assert self._loop is not None
        future = self._loop.create_future()
        try:
            self.send(key, op, payload)
        except WorkerGone as exc:
            future.set_exception(exc)
            return future
        self._waiting.setdefault((key, op), []).append(future)
        return future

    def answer(self, key: int, op: int, payload: object) -> asyncio.Future:
        """The answer to a message, to await, or WorkerGone: when none came in ANSWER_TIMEOUT the worker
        is taken for stuck, stopped, and every flow waiting on it is told."""
        future = self.ask(key, op, payload)
        if not future.done():
            assert self._loop is not None
            self._deadlines.append((self._loop.time() + ANSWER_TIMEOUT, future))
            if self._watchdog is None:
                self._watchdog = self._loop.call_at(self._deadlines[0][0], self._check_deadlines)
        return future

    def _check_deadlines(self) -> None:
        """The watchdog: the oldest answer still awaited came in time, or the worker is stuck."""
        self._watchdog = None
        deadlines = self._deadlines
        while deadlines and deadlines[0][1].done():
            deadlines.popleft()
        if not deadlines:
            return
        assert self._loop is not None
        if deadlines[0][0] <= self._loop.time():
            self._lost(f"the analysis worker gave no answer in {ANSWER_TIMEOUT:g} s and was stopped")
            return
        self._watchdog = self._loop.call_at(deadlines[0][0], self._check_deadlines)

    def _on_readable(self, process: subprocess.Popen) -> None:
        if process is not self.process:
            return
        alive = self._read(process)
        self._take_answers()
        if not alive:
            self._lost(f"the analysis worker exited (code {process.poll()})")

    def _read(self, process: subprocess.Popen) -> bool:
        """Read what the worker has written, until none is left (False: it has ended)."""
        fd = process.stdout.fileno()
        while True:
            try:
                data = os.read(fd, _READ_SIZE)
            except BlockingIOError:
                return True
            except OSError:
                return False
            if not data:
                return False
            self._answered = True
            self._replies += data
            if len(data) < _READ_SIZE:
                return True

    def _take_answers(self) -> None:
        """The whole answers read so far, each to who waits for it."""
        replies = self._replies
        start = 0
        while len(replies) - start >= 4:
            (n,) = _LENGTH.unpack_from(replies, start)
            if len(replies) - start - 4 < n:
                break
            key, op, payload = marshal.loads(replies[start + 4 : start + 4 + n])
            start += 4 + n
            if op == SETTLED:
                listener = self._listeners.get(key)
                if listener is not None:
                    listener.settled(payload)
                continue
            waiting = self._waiting.get((key, op))
            if waiting:
                future = waiting.pop(0)
                if not waiting:
                    del self._waiting[(key, op)]
                if not future.done():
                    future.set_result(payload)
        del replies[:start]
        deadlines = self._deadlines  # answered ones leave at once (the worker answers in order)
        while deadlines and deadlines[0][1].done():
            deadlines.popleft()

    def _lost(self, why: str, quiet: bool = False) -> None:
        """The worker is gone (or stuck): it is stopped, and every flow waiting on it is told why."""
        if self.process is not None and not quiet:
            self.dead_starts = 0 if self._answered else self.dead_starts + 1
            logger.warning(
                "toolcall-lens: %s; the flows it held end as failures, the next starts a new one", why
            )
        self.gone = why
        self._close()
        waiting, self._waiting = self._waiting, {}
        for futures in waiting.values():
            for future in futures:
                if not future.done():
                    future.set_exception(WorkerGone(why))
        listeners, self._listeners = self._listeners, {}
        for listener in listeners.values() if not quiet else ():  # the proxy's end is no connection's fault
            listener.lost(why)

    def _close(self) -> None:
        self._outbox.clear()  # for the worker gone
        self._deadlines.clear()  # their futures are told by ``_lost``
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        process, self.process = self.process, None
        if process is None:
            return
        if self._loop is not None:
            try:
                self._loop.remove_reader(process.stdout.fileno())
            except (ValueError, OSError, RuntimeError):
                pass
        for pipe in (process.stdin, process.stdout):
            try:
                pipe.close()
            except OSError:
                pass
        if process.poll() is None:
            process.kill()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            pass

    def stop(self) -> None:
        """At the proxy's end: the worker ends with its input (and is killed if it does not)."""
        process = self.process
        if process is not None and process.poll() is None:
            try:
                process.stdin.close()
                process.wait(2)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self._lost("the proxy is shutting down", quiet=True)


class RemoteAccumulator:
    """One flow's accumulator in the worker, with the part of ``StreamAccumulator``'s interface a
    ``StreamWatch`` uses. Feeding ships the batch; ``finish`` and ``snapshot`` are answered later."""

    __slots__ = ("format", "key", "worker")

    def __init__(self, worker: AnalysisWorker, key: int, format: str | None) -> None:
        self.worker = worker
        self.key = key
        self.format = format

    def feed_batch(self, held: tuple[list[bytes], list[float]], flush: bool = True) -> None:
        """Ship a batch: its chunks, and when each came (two lists, as ``StreamWatch`` holds them; framed
        at once, so the caller may empty them after)."""
        self.worker.send(self.key, FEED, held, flush)

    def note(self, code: str, message: str, **details) -> None:
        self.worker.send(self.key, NOTE, (code, message, details), flush=False)  # before the end

    def snapshot(self) -> asyncio.Future:
        return self.worker.ask(self.key, SNAPSHOT, None)

    async def finish(self, now: float) -> tuple[object, str | None, list | None]:
        """(the result, or FAILED; the format, or why it failed; what the worker read of the request,
        when it read it: [echo warnings, tool results, previous response id, model asked, why the reading
        failed or None], which the proxy logs as it logs its own)."""
        answer = await self.worker.answer(self.key, FINISH, now)
        return unpacked(answer[0]), answer[1], unpacked(answer[2]) if len(answer) > 2 else None


class RemoteConnection:
    """One WebSocket connection's ``Connection`` in the worker, with the part of its interface a
    ``WebSocketWatch`` uses. ``results`` and ``summary()`` are what the worker said last (its settled
    results kept here as the ``Connection`` keeps them: in order of position, the newest
    ``MAX_RESULTS``); ``snapshot`` and ``finish`` are answered later."""

    __slots__ = ("_summary", "format", "given_up", "key", "results", "warnings", "worker")

    def __init__(self, worker: AnalysisWorker, key: int, format: str, path: str) -> None:
        self.worker = worker
        self.key = key
        self.format = format
        self.given_up = False  # its format is known: it is never given up
        self.results: list[dict] = []
        self._summary = Connection(format, path=path).summary()  # until the worker says more
        self.warnings = _RemoteWarnings(self)

    def feed(self, held: list, flush: bool = True) -> None:
        self.worker.send(self.key, FEED, held, flush)

    def update(self, settled: list[dict], summary: dict) -> None:
        results = self.results
        for result in settled:
            insort(results, result, key=lambda r: r["websocket"]["position"])
        del results[:-MAX_RESULTS]
        self._summary = summary

    def fail(self, message: str, why: str) -> None:
        """An ``internal-error`` the proxy saw (the worker lost), added to the last summary's warnings."""
        summary = self._summary
        warnings = WarningLog.of(summary["warnings"], summary["warnings_over_cap"])
        warnings.add("internal-error", message, error=why)
        self._summary = {**summary, "warnings": warnings.to_list(), "warnings_over_cap": warnings.suppressed}

    def summary(self) -> dict:
        return dict(self._summary)

    def snapshot(self) -> asyncio.Future:
        return self.worker.ask(self.key, SNAPSHOT, None)

    async def finish(self, now: float | None) -> tuple:
        """(settled results, summary, failure or None); or (FAILED, why) if the worker lost the flow."""
        return await self.worker.answer(self.key, FINISH, now)


class _RemoteWarnings:
    """``Connection.warnings`` for a connection in the worker: ``add`` is sent there."""

    __slots__ = ("connection",)

    def __init__(self, connection: RemoteConnection) -> None:
        self.connection = connection

    def add(self, code: str, message: str, **details) -> None:
        """Sent with the next batch. Never raises: a worker already gone told the connection so."""
        connection = self.connection
        try:
            connection.worker.send(connection.key, NOTE, (code, message, details), flush=False)
        except WorkerGone:
            pass


def _limits(limits) -> dict:
    """A flow's limits as the worker rebuilds them: a copy of what ``dataclasses.asdict`` (slow) gave for
    the same object before (a proxy has one or two)."""
    return dict(_asdict(limits))


@functools.lru_cache(maxsize=8)
def _asdict(limits) -> dict:
    return dataclasses.asdict(limits)


def remote_settings(format, request, encoding, started, limits, price: tuple | None = None) -> dict:
    """The arguments of a flow's accumulator, as the worker rebuilds them; ``request``: its body, or
    its facts (``RequestFacts``, shipped as a tuple); ``price``: (the URL, the request's time, the model
    it asked for) to price the result there (None: the proxy prices it)."""
    facts = None
    if isinstance(request, RequestFacts):
        facts = (request.tools, request.parallel, request.forced, request.usage_asked, request.tools_open)
        request = None
    return {
        "format": format,
        "request": request,
        "facts": facts,
        "encoding": encoding,
        "started_at": started,
        "limits": _limits(limits),
        "price": price,
    }


if __name__ == "__main__":
    main()
