"""A reference proxy of the benchmark: the core run in a worker process, off the proxy's thread. The stream
callable only holds each chunk with its arrival time; every 32 chunks (as the addon batches them) the batch
goes down a pipe to the worker on the event loop's next turn, and at the end the ``response`` hook waits for
the worker's result (the flow's metadata gets it, as the addon's would). It tells what the analysis would
cost mitmdump if it ran in another process: the design question of issue 21's 90% target.

    mitmdump -s scripts/bench/addons/offproc_stream.py --mode reverse:http://127.0.0.1:PORT

The worker is this file run as a script: ``python offproc_stream.py --worker``.
"""

from __future__ import annotations

import asyncio
import fcntl
import marshal
import os
import struct
import subprocess
import sys
import time

HELD = 32
_LENGTH = struct.Struct("<I")
_PIPE_SIZE = 1 << 20


def _frame(message: object) -> bytes:
    payload = marshal.dumps(message)
    return _LENGTH.pack(len(payload)) + payload


def _read_exactly(fd: int, n: int) -> bytes:
    parts = []
    while n:
        part = os.read(fd, n)
        if not part:
            raise EOFError
        parts.append(part)
        n -= len(part)
    return b"".join(parts)


def worker() -> None:
    """Reads (flow, op, payload) messages on stdin, keeps one accumulator per flow, answers each end with
    the flow's result as JSON on stdout."""
    import orjson

    from accumulator import StreamAccumulator

    inp, out = sys.stdin.fileno(), sys.stdout.fileno()
    live: dict[int, StreamAccumulator] = {}
    while True:
        try:
            (n,) = _LENGTH.unpack(_read_exactly(inp, 4))
            flow, op, payload = marshal.loads(_read_exactly(inp, n))
        except EOFError:
            return
        if op == 0:
            live[flow] = StreamAccumulator(payload[0], started_at=payload[1])
        elif op == 1:
            feed = live[flow].feed
            for chunk, at in payload:
                feed(chunk, at)
        else:
            result = live.pop(flow).finish(payload)
            os.write(out, _frame((flow, orjson.dumps(result))))


class OffProcessStream:
    def __init__(self) -> None:
        self.process: subprocess.Popen | None = None
        self.next_flow = 0
        self.waiting: dict[int, asyncio.Future] = {}
        self.replies = b""
        self.results = 0
        self.calls = 0

    def running(self) -> None:
        here = os.path.dirname(os.path.abspath(__file__))
        root = os.path.dirname(os.path.dirname(os.path.dirname(here)))
        self.process = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=root,
            env={**os.environ, "PYTHONPATH": root},
        )
        for pipe in (self.process.stdin, self.process.stdout):
            fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, _PIPE_SIZE)
        self.to_worker = self.process.stdin.fileno()
        asyncio.get_running_loop().add_reader(self.process.stdout.fileno(), self._on_reply)

    def done(self) -> None:
        if self.process is not None:
            self.process.stdin.close()
            self.process.wait(5)
        print(f"offproc_stream: {self.results} results from the worker, {self.calls} tool calls", flush=True)

    def _on_reply(self) -> None:
        self.replies += os.read(self.process.stdout.fileno(), _PIPE_SIZE)
        while len(self.replies) >= 4:
            (n,) = _LENGTH.unpack_from(self.replies)
            if len(self.replies) < 4 + n:
                return
            flow, result = marshal.loads(self.replies[4 : 4 + n])
            self.replies = self.replies[4 + n :]
            future = self.waiting.pop(flow, None)
            if future is not None and not future.done():
                future.set_result(result)

    def responseheaders(self, flow) -> None:
        key = self.next_flow = self.next_flow + 1
        held: list[tuple[bytes, float]] = []
        loop = asyncio.get_running_loop()
        send = os.write
        to_worker = self.to_worker
        send(to_worker, _frame((key, 0, ("openai-chat", flow.request.timestamp_start))))

        def ship() -> None:
            if held:
                send(to_worker, _frame((key, 1, held[:])))
                held.clear()

        def stream(chunk: bytes) -> bytes:
            if chunk:
                held.append((chunk, time.time()))
                if len(held) == HELD:
                    loop.call_soon(ship)
            return chunk

        flow.response.stream = stream
        flow.metadata["offproc"] = (key, ship)

    def error(self, flow) -> None:
        key, ship = flow.metadata.pop("offproc", (None, None))
        if key is not None:  # the worker ends it and answers; nobody waits for the answer
            ship()
            os.write(self.to_worker, _frame((key, 2, time.time())))

    async def response(self, flow) -> None:
        key, ship = flow.metadata.pop("offproc", (None, None))
        if key is None:
            return
        ship()
        future = asyncio.get_running_loop().create_future()
        self.waiting[key] = future
        os.write(self.to_worker, _frame((key, 2, time.time())))
        result = flow.metadata["toolcall_lens"] = await future
        self.results += 1
        self.calls += result.count(b'"arguments"')


if __name__ == "__main__" and sys.argv[1:] == ["--worker"]:
    worker()
else:
    addons = [OffProcessStream()]
