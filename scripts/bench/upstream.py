"""The benchmark's own upstream, a process of its own: POST any path with {"model": "bench-<calls>x<bytes>"}
and get that generated stream, chunked, one event per write (each drained), X-Fake-Delay seconds apart,
each event's system_fingerprint set to its send time. HTTP/1.1 is the fake provider's, over h11.

    .venv/bin/python scripts/bench.py _upstream
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from pathlib import Path

import orjson
from fake_provider.request import Request
from fake_provider.server import Http1Transport, serve, serve_connection
from lab import start_listening

from .streams import FINGERPRINT, Stream, make_stream

ENTRY = Path(__file__).resolve().parents[1] / "bench.py"


class Upstream:
    def __init__(self) -> None:
        self.connections: set[asyncio.Task] = set()
        self.streams: dict[str, Stream] = {}

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await serve_connection(reader, writer, self.answer, self.connections, "bench upstream")

    async def answer(self, request: Request, transport: Http1Transport) -> None:
        if request.method != "POST":
            await transport.send(200, "text/plain", b"ok\n")
            return
        model = orjson.loads(request.body)["model"]
        if model not in self.streams:
            calls, size = map(int, model.removeprefix("bench-").split("x"))
            self.streams[model] = make_stream(model, calls, size)
        stream = self.streams[model]
        events = stream.events
        if "x-bench-unique" in request.headers:  # fresh call ids (same length) for this response
            tag = int(request.headers["x-bench-unique"])
            events = list(events)
            for i, call_id in enumerate(stream.ids):
                fresh = f"call_{tag:012x}{i:012x}"
                events[1 + i] = events[1 + i].replace(call_id.encode(), fresh.encode())
        delay = float(request.headers.get("x-fake-delay", "0"))
        await transport.start(200, {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        for i, event in enumerate(events):
            if i and delay:
                await asyncio.sleep(delay)
            await transport.write(event.replace(FINGERPRINT, b"fp_%020d" % time.monotonic_ns()))
        await transport.end()


def serve_upstream() -> int:
    with contextlib.suppress(KeyboardInterrupt):
        return asyncio.run(serve(Upstream(), "bench upstream", "http", "127.0.0.1", 0))
    return 0


def start_upstream():
    """The upstream as a process (its CPU is not the benchmark's), on a free port."""
    argv = [sys.executable, str(ENTRY), "_upstream"]
    return start_listening("bench upstream", argv, r"bench upstream listening on http://127\.0\.0\.1:(\d+)")
