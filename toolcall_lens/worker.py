"""Analysis in a worker process (``toolcall_lens_worker``): the proxy's thread only holds each chunk and
ships it, in the batches it would have fed its own core; the worker runs the same core on another CPU and
answers each flow's end with its result. docs/performance.md has what it saves and costs.

The proxy side (``AnalysisWorker``, ``RemoteAccumulator``) runs on mitmproxy's event loop: a flow's end
waits for its result without stopping other flows (the hook returns an awaitable). The worker is this
module run as ``python -m toolcall_lens.worker``: messages in on stdin, answers out on stdout, each a
length and a ``marshal`` payload (bytes, numbers, strings, lists and dicts, which is all a stream and a
result hold). Nothing a flow does can stop the worker: a fault inside one flow's analysis ends that
flow's result as a failure, as it would in the proxy. If the worker dies or stops answering, every flow
waiting on it gets a failure result saying so, the bytes keep flowing, and the next flow starts a new one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import marshal
import os
import select
import struct
import subprocess
import sys
import time
from pathlib import Path

logger = logging.getLogger("toolcall_lens")

OPEN, FEED, NOTE, SNAPSHOT, FINISH = range(5)
FAILED = "failed"
_LENGTH = struct.Struct("<I")
_PIPE_SIZE = 1 << 20  # bytes a pipe holds before a write waits (what the kernel allows; 64 KiB otherwise)
ANSWER_TIMEOUT = 30.0  # seconds a flow's end waits for its result before the worker is taken for stuck
# Seconds a write may wait for room in a full pipe (the proxy's thread waits meanwhile) before the worker
# is taken for stuck: a worker keeps up with the proxy many times over, so a full pipe means it is not.
WRITE_TIMEOUT = 2.0
# Workers in a row that end before they answer anything (a Python that cannot run this module, say) after
# which the proxy stops starting them and analyses in its own thread, as without the option.
DEAD_STARTS = 3


def _frame(message: object) -> bytes:
    payload = marshal.dumps(message)
    return _LENGTH.pack(len(payload)) + payload


def describe(exc: BaseException) -> str:
    """An exception as one line for a warning or the log (the watches' and the worker's)."""
    try:
        return f"{type(exc).__name__}: {exc}"[:500]
    except Exception:  # noqa: BLE001 - even a broken __str__ must not escape
        return type(exc).__name__


# -- the worker process ----------------------------------------------------------------------------------


def _read_exactly(stream, n: int) -> bytes | None:
    data = stream.read(n)
    return data if len(data) == n else None


def serve(stdin, stdout) -> None:
    """Answer messages from ``stdin`` (a binary stream) on ``stdout`` until ``stdin`` ends."""
    from accumulator import StreamAccumulator
    from accumulator.limits import Limits

    flows: dict[int, StreamAccumulator | str] = {}  # a str: why that flow's analysis failed

    def answer(key: int, op: int, payload: object) -> None:
        stdout.write(_frame((key, op, payload)))
        stdout.flush()

    while True:
        head = _read_exactly(stdin, 4)
        if head is None:
            return
        body = _read_exactly(stdin, _LENGTH.unpack(head)[0])
        if body is None:
            return
        key, op, payload = marshal.loads(body)
        accumulator = flows.get(key)
        try:
            if op == OPEN:
                settings = dict(payload)
                settings["limits"] = Limits(**settings["limits"])
                flows[key] = StreamAccumulator(settings.pop("format"), **settings)
            elif op == FEED:
                if isinstance(accumulator, StreamAccumulator):
                    feed = accumulator.feed
                    for chunk, now in payload:
                        feed(chunk, now)
            elif op == NOTE:
                if isinstance(accumulator, StreamAccumulator):
                    code, message, details = payload
                    accumulator.note(code, message, **details)
            elif op == SNAPSHOT:
                snapshot = accumulator.snapshot() if isinstance(accumulator, StreamAccumulator) else None
                answer(key, SNAPSHOT, snapshot)
            elif op == FINISH:
                flows.pop(key, None)
                if isinstance(accumulator, StreamAccumulator):
                    answer(key, FINISH, (accumulator.finish(payload), accumulator.format))
                else:
                    answer(key, FINISH, (FAILED, accumulator or "the worker never saw this flow open"))
        except Exception as exc:  # noqa: BLE001 - one flow's fault is that flow's failure, never the worker's
            if op == FINISH:
                answer(key, FINISH, (FAILED, describe(exc)))
            elif op == SNAPSHOT:
                answer(key, SNAPSHOT, None)
            else:
                flows[key] = describe(exc)


def main() -> None:
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
        self._replies = bytearray()
        self.started = 0  # processes started, over the proxy's life
        self.gone: str | None = None  # why the last process ended, if it did
        self._unavailable = False  # the last start failed (said once in the log)
        self._answered = False  # the running worker has answered at least once
        self.dead_starts = 0  # workers in a row that ended before answering anything

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def open(self, settings: dict) -> RemoteAccumulator | None:
        """A new flow's accumulator in the worker (started first if there is none); None if no worker
        can be had (the flow is then analysed in the proxy, and the log says why)."""
        try:
            if self.dead_starts >= DEAD_STARTS:
                raise WorkerGone(
                    f"{self.dead_starts} workers in a row ended before answering anything ({self.gone})"
                )
            if not self.alive:
                self._start()
            self._next_key += 1
            remote = RemoteAccumulator(self, self._next_key, settings.get("format"))
            self.send(remote.key, OPEN, settings)
        except Exception as exc:  # noqa: BLE001 - no worker: the flow is analysed where it is
            if not self._unavailable:
                logger.warning(
                    "toolcall-lens: no analysis worker (%s): analysing in the proxy", describe(exc)
                )
            self._unavailable = True
            return None
        self._unavailable = False
        return remote

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
        )
        self.started += 1
        self.gone = None
        self._answered = False
        logger.info("toolcall-lens: analysis worker started (pid %d)", self.process.pid)
        for pipe in (self.process.stdin, self.process.stdout):
            try:
                import fcntl

                fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, _PIPE_SIZE)
            except (ImportError, OSError, AttributeError):  # not Linux, or a lower limit: the default
                pass
        os.set_blocking(self.process.stdin.fileno(), False)  # a stuck worker must not stop the proxy
        self._loop = asyncio.get_running_loop()
        self._replies.clear()
        self._loop.add_reader(self.process.stdout.fileno(), self._on_readable, self.process)

    def send(self, key: int, op: int, payload: object) -> None:
        """One message to the worker; raises WorkerGone if it cannot take it."""
        process = self.process
        if process is None:
            raise WorkerGone(self.gone or "the analysis worker is not running")
        if process.poll() is not None:
            self._lost(f"the analysis worker exited (code {process.returncode})")
            raise WorkerGone(self.gone)
        data = memoryview(_frame((key, op, payload)))
        try:
            fd = process.stdin.fileno()
            deadline = None
            while data:
                try:
                    data = data[os.write(fd, data) :]
                except BlockingIOError:  # the pipe is full: wait for room, a little
                    if deadline is None:
                        deadline = time.monotonic() + WRITE_TIMEOUT
                    left = deadline - time.monotonic()
                    if left <= 0 or not select.select([], [fd], [], left)[1]:
                        self._lost(
                            f"the analysis worker fell behind by a full pipe for {WRITE_TIMEOUT:g} s and was stopped"
                        )
                        raise WorkerGone(self.gone) from None
        except OSError as exc:
            self._lost(f"the analysis worker exited ({describe(exc)})")
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

    async def answer(self, key: int, op: int, payload: object) -> object:
        """The answer to a message, or WorkerGone: after ANSWER_TIMEOUT the worker is taken for stuck,
        stopped, and every flow waiting on it is told."""
        future = self.ask(key, op, payload)
        try:
            return await asyncio.wait_for(asyncio.shield(future), ANSWER_TIMEOUT)
        except TimeoutError:
            self._lost(f"the analysis worker gave no answer in {ANSWER_TIMEOUT:g} s and was stopped")
            raise WorkerGone(self.gone) from None

    def _on_readable(self, process: subprocess.Popen) -> None:
        if process is not self.process:
            return
        try:
            data = os.read(process.stdout.fileno(), _PIPE_SIZE)
        except OSError:
            data = b""
        if not data:
            code = process.poll()
            self._lost(f"the analysis worker exited (code {code})")
            return
        self._answered = True
        replies = self._replies
        replies += data
        start = 0
        while len(replies) - start >= 4:
            (n,) = _LENGTH.unpack_from(replies, start)
            if len(replies) - start - 4 < n:
                break
            key, op, payload = marshal.loads(replies[start + 4 : start + 4 + n])
            start += 4 + n
            waiting = self._waiting.get((key, op))
            if waiting:
                future = waiting.pop(0)
                if not waiting:
                    del self._waiting[(key, op)]
                if not future.done():
                    future.set_result(payload)
        del replies[:start]

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

    def _close(self) -> None:
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

    def feed_batch(self, held: list) -> None:
        self.worker.send(self.key, FEED, held)

    def note(self, code: str, message: str, **details) -> None:
        self.worker.send(self.key, NOTE, (code, message, details))

    def snapshot(self) -> asyncio.Future:
        return self.worker.ask(self.key, SNAPSHOT, None)

    async def finish(self, now: float) -> tuple[object, str | None]:
        """(the result, or FAILED; the format, or why it failed)."""
        return await self.worker.answer(self.key, FINISH, now)


def remote_settings(format, request, encoding, started, limits) -> dict:
    """The arguments of a flow's accumulator, as the worker rebuilds them."""
    return {
        "format": format,
        "request": request,
        "encoding": encoding,
        "started_at": started,
        "limits": dataclasses.asdict(limits),
    }


if __name__ == "__main__":
    main()
