"""The proxy's thread per flow when requests are long: a real agent's follow-up carries its whole
conversation (a MiB is common), and Codex sends its own zstd-compressed. The addon's hooks run as mitmproxy
runs them, in its test harness on an event loop, with the analysis worker (a real process) and without;
the figure is the thread CPU of all the hooks of a flow, from its request to its annotation (the worker's
CPU is not in it)."""

from __future__ import annotations

import asyncio
import json
import logging
import random
import statistics
import sys
import textwrap
import time

from mitmproxy.test import taddons, tflow

from .report import heading, table
from .streams import make_stream

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd

STREAM = make_stream("bench-2x256", 2, 256)
# Words of 2 to 9 letters: a tool's results as text compresses about as a real conversation does (3x
# with zstd), where one letter repeated would shrink 500-fold.
_WORDS = ["".join(random.Random(n).choices("abcdefghijklmnopqrstuvwxyz", k=2 + n % 8)) for n in range(5000)]


def _text(size: int, seed: int) -> str:
    words = random.Random(seed).choices(_WORDS, k=size // 6 + 1)
    return " ".join(words)[:size]


def as_codex_sends(body: bytes) -> bytes:
    """A request body compressed as Codex compresses its own for OpenAI's backend: zstd, level 3."""
    return zstd.compress(body, 3)


def conversation(turns: int, result_bytes: int = 4000) -> bytes:
    """A Chat Completions request of ``turns`` tool-calling turns of two calls, each answered (text)."""
    messages: list[dict] = [{"role": "user", "content": "start"}]
    for turn in range(turns):
        calls = [
            {
                "id": f"call_{turn}_{k}",
                "type": "function",
                "function": {"name": f"tool_{k}", "arguments": json.dumps({"q": f"x{turn}{k}"})},
            }
            for k in range(2)
        ]
        messages.append({"role": "assistant", "tool_calls": calls})
        messages += [
            {"role": "tool", "tool_call_id": call["id"], "content": _text(result_bytes, 2 * turn + k)}
            for k, call in enumerate(calls)
        ]
    return json.dumps({"model": "bench-2x256", "stream": True, "messages": messages}).encode()


def _flow(request: bytes, coding: str | None = None):
    flow = tflow.tflow(resp=True)
    flow.request.method = "POST"
    flow.request.host = "api.openai.com"
    flow.request.path = "/v1/chat/completions"
    flow.request.content = request
    if coding is not None:  # the body as it went, compressed, and said so
        flow.request.headers["content-encoding"] = coding
        flow.request.raw_content = as_codex_sends(request)
    flow.response.headers["content-type"] = "text/event-stream"
    del flow.response.headers["content-length"]
    flow.response.raw_content = None  # at its headers, a server's response has no body yet
    return flow


async def _hooks_cpu(request: bytes, worker: bool, flows: int, coding: str | None = None) -> float:
    """The median thread CPU (seconds) of all the hooks of a flow, after a few to warm up."""
    import addon as addon_module

    lens = addon_module.ToolcallLens()
    spent = []
    with taddons.context(lens) as tctx:
        tctx.configure(lens, toolcall_lens_worker=worker)
        for n in range(flows + 5):
            # Each flow's body its own, as a real agent's are: mitmproxy keeps the last body it decoded,
            # and the same body again would be decoded once.
            flow = _flow(request.replace(b'"start"', b'"start %d"' % n, 1), coding)
            start = time.thread_time()
            for hook in (lens.request, lens.responseheaders):
                pending = hook(flow)
                if pending is not None:
                    await pending
            for event in STREAM.events:
                flow.response.stream(event)
            flow.response.stream(b"")
            pending = lens.response(flow)
            if pending is not None:
                await pending
            spent.append(time.thread_time() - start)
            assert "toolcall_lens" in flow.metadata
        lens.done()
    return statistics.median(spent[5:])


def bench_long_requests(args) -> None:
    heading("proxy: the proxy's thread per flow, by the length of the request")
    turns_tried, flows, runs = ((0, 20), 10, 2) if args.quick else ((0, 25, 100), 40, 3)
    print(textwrap.fill(__doc__.replace("\n", " "), 105))
    print(
        f"Each request: N tool-calling turns of two calls and 4 KB results (text), the stream "
        f"{len(STREAM.events)} events; plain, and zstd-compressed at level 3 as Codex sends its own to "
        f"OpenAI's backend; medians of {flows} flows, {runs} runs, alternated."
    )
    logging.getLogger("toolcall_lens").setLevel(logging.WARNING)  # the flows' lines are not the figure
    codings = (None, "zstd")

    async def measure() -> dict:  # on one loop: mitmproxy's log handler outlives a test master
        found: dict[tuple[int, str | None, bool], list[float]] = {}
        for _ in range(runs):
            for turns in turns_tried:
                request = conversation(turns)
                for coding in codings:
                    for worker in (True, False):
                        spent = await _hooks_cpu(request, worker, flows, coding)
                        found.setdefault((turns, coding, worker), []).append(spent)
        return found

    found = asyncio.run(measure())
    rows = []
    for turns in turns_tried:
        request = conversation(turns)
        for coding in codings:
            size = len(request) if coding is None else len(as_codex_sends(request))
            rows.append(
                [
                    turns,
                    coding or "none",
                    f"{size / 1024:.0f}",
                    " ".join(f"{s * 1000:.2f}" for s in found[(turns, coding, True)]),
                    " ".join(f"{s * 1000:.2f}" for s in found[(turns, coding, False)]),
                ]
            )
    print(
        table(
            [
                "turns",
                "compressed",
                "request KiB as sent",
                "ms a flow, with the worker",
                "ms a flow, in the proxy",
            ],
            rows,
        )
    )
