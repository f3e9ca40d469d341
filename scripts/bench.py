"""How fast and how lean toolcall-lens is: the core beside the floor and its peers, the addon inside a real
mitmdump, and a soak of many flows. Prints text tables; asserts nothing (the targets table says met or not).

    .venv/bin/python scripts/bench.py [core|proxy|rewrite|soak|all] [--quick] [--repeats N] [--flows N]

core   generated Chat Completions streams (small, medium, large; calls interleaved round-robin), side by side:
       the floor (split lines, orjson.loads each data line), the core with identity routing only, the core
       with every hazard strategy, openai-python's ChatCompletionStreamState fed as its SDK feeds it, and
       LangChain's AIMessageChunk merging when langchain-core is installed; then the cost per event as the
       number of parallel calls grows, and tracemalloc peaks against the argument bytes.
proxy  mitmdump in reverse mode with addon.py against the same mitmdump with an identity stream callable
       (and, for reference, one doing the floor's work), on loopback, upstream writing one event per write:
       throughput (runs interleaved) and the latency each event picks up on its way to the client.
rewrite the stream rewriter (toolcall_lens_inject / _repair) on the medium stream fed one event at a time,
       each injection and repair beside the floor and the core's analysis.
soak   10,000 flows through one mitmdump with the addon: resident memory every 1,000 flows and the live
       accumulator count at the end.
all    every table above, then the targets table.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import gc
import http.client
import importlib.metadata
import itertools
import json
import os
import platform
import random
import re
import statistics
import sys
import tempfile
import textwrap
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterable
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: the core package lives at the repository root
    sys.path.insert(0, str(ROOT))

from accumulator import DEFAULT_STRATEGIES, StreamAccumulator

PIECE = 64 * 1024
CREATED = 1767225600
MODEL = "gpt-4.1-2025-04-14"
# A fixed-width system_fingerprint: the proxy benchmark's upstream writes each event's send time into it.
FINGERPRINT = b"fp_" + b"0" * 20
FINGERPRINT_RE = re.compile(rb"fp_(\d{20})")
STATE_PATH = "/__bench/state"
TOOL_NAMES = ("read_file", "search_documents", "get_user_profile", "write_file", "run_query", "fetch_url")
# Argument text: plain words, quoted, path-like, with a newline, a tab and non-ASCII (all escaped in JSON).
LOREM = (
    "the quick brown fox jumps over lazy dog lorem ipsum dolor sit amet consectetur adipiscing elit sed do "
    'eiusmod tempor incididunt ut labore et dolore magna aliqua "quoted" path/to/file.py line\n tab\t é ü'
)
WORDS = tuple(LOREM.split(" "))


# -- generated streams ---------------------------------------------------------------------------------------


@dataclasses.dataclass
class Stream:
    """One generated Chat Completions stream: its events (each ``data: ...\\n\\n``) and what it carries."""

    name: str
    calls: int
    events: list[bytes]
    ids: list[str]
    names: list[str]
    arguments: list[str]

    @property
    def body(self) -> bytes:
        return b"".join(self.events)

    @property
    def argument_bytes(self) -> int:
        return sum(len(arguments.encode()) for arguments in self.arguments)

    def pieces(self, feeding: str) -> list[bytes]:
        if feeding == "event":
            return self.events
        body = self.body
        return [body[i : i + PIECE] for i in range(0, len(body), PIECE)]


def _arguments(rng: random.Random, size: int, number: int) -> str:
    """A JSON object of about ``size`` bytes, with escapes and non-ASCII text, as tool arguments have."""
    head = {"path": f"src/module_{number}.py", "line": rng.randint(1, 9999), "overwrite": False}
    words: list[str] = []
    length = len(orjson.dumps({**head, "content": ""}))
    while length < size:
        word = rng.choice(WORDS)
        words.append(word)
        length += len(orjson.dumps(word)) - 1  # its escaped length, plus a space
    return orjson.dumps({**head, "content": " ".join(words)}).decode()


def _fragments(rng: random.Random, text: str) -> list[str]:
    """The argument text cut into fragments of 12 to 28 characters (a token or a few: ~20 bytes)."""
    pieces, start = [], 0
    while start < len(text):
        end = start + rng.randint(12, 28)
        pieces.append(text[start:end])
        start = end
    return pieces


def _chunk(delta: dict, finish_reason: str | None = None) -> bytes:
    payload = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": MODEL,
        "service_tier": "default",
        "system_fingerprint": FINGERPRINT.decode(),
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
    }
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def make_stream(name: str, calls: int, argument_size: int, seed: int = 7) -> Stream:
    """``calls`` parallel tool calls of ~``argument_size`` bytes of arguments each, interleaved round-robin:
    every call's opening delta (id, type, name, empty arguments), then one ~20-byte fragment of each call
    in turn; a role chunk first, a finish chunk and ``[DONE]`` last."""
    rng = random.Random(seed * 1_000_003 + calls * 7919 + argument_size)
    ids = [f"call_{rng.getrandbits(96):024x}" for _ in range(calls)]
    names = [f"{TOOL_NAMES[i % len(TOOL_NAMES)]}_{i}" for i in range(calls)]
    arguments = [_arguments(rng, argument_size, i) for i in range(calls)]
    fragments = [_fragments(rng, text) for text in arguments]
    events = [_chunk({"role": "assistant", "content": None, "refusal": None})]
    for i in range(calls):
        opener = {
            "index": i,
            "id": ids[i],
            "type": "function",
            "function": {"name": names[i], "arguments": ""},
        }
        events.append(_chunk({"tool_calls": [opener]}))
    for round_ in range(max(map(len, fragments))):
        for i in range(calls):
            if round_ < len(fragments[i]):
                events.append(
                    _chunk({"tool_calls": [{"index": i, "function": {"arguments": fragments[i][round_]}}]})
                )
    events.append(_chunk({}, "tool_calls"))
    events.append(b"data: [DONE]\n\n")
    return Stream(name, calls, events, ids, names, arguments)


def stream_sizes(quick: bool) -> dict[str, tuple[int, int]]:
    if quick:
        return {"small": (3, 200), "medium": (8, 1024), "large": (32, 2048)}
    return {"small": (3, 200), "medium": (8, 4096), "large": (32, 65536)}


# -- the contenders: each takes the stream's pieces and returns (id, name, arguments) per call ---------------


def run_floor(pieces: Iterable[bytes]) -> list:
    """The least any reader must do: cut lines, orjson.loads every data line. Rebuilds nothing."""
    loads = orjson.loads
    carry = b""
    for piece in pieces:
        lines = (carry + piece).split(b"\n")
        carry = lines.pop()
        for line in lines:
            if line.startswith(b"data: ") and line != b"data: [DONE]":
                loads(line[6:])
    return []


def core_runner(strategies: tuple[str, ...]) -> Callable[[Iterable[bytes]], list]:
    def run_core(pieces: Iterable[bytes]) -> list:
        accumulator = StreamAccumulator("openai-chat", strategies=strategies)
        for piece in pieces:
            accumulator.feed(piece)
        result = accumulator.finish()
        return [(c["id"], c["name"], c["arguments"]) for c in result["choices"][0]["tool_calls"]]

    return run_core


def addon_runner() -> tuple[Callable | None, str]:
    """The addon's own stream callable (addon.StreamWatch) around an accumulator built as the addon builds
    it (request body, clock, stall threshold, every strategy): what mitmdump calls once per chunk."""
    try:
        from addon import StreamWatch
    except Exception as exc:  # noqa: BLE001 - a row that says why it is missing
        return None, f"unavailable ({exc!r})"
    request = chat_body(MODEL)

    def run_watch(pieces: Iterable[bytes]) -> list:
        accumulator = StreamAccumulator(
            "openai-chat",
            request=request,
            strategies=tuple(DEFAULT_STRATEGIES),
            started_at=time.time(),
            stall_seconds=10.0,
        )
        watch = StreamWatch(accumulator, "openai-chat", 16 * 2**20)
        for piece in pieces:
            watch(piece)
        result, _body = watch.finish()
        return [(c["id"], c["name"], c["arguments"]) for c in result["choices"][0]["tool_calls"]]

    return run_watch, "addon.StreamWatch"


def openai_runner() -> tuple[Callable | None, str]:
    """openai-python as ``client.chat.completions.stream()`` runs: its SSE decoder, ``json.loads`` of each
    event, ``construct_type(ChatCompletionChunk, ...)`` (what Stream.__stream__ does without strict
    validation), ``ChatCompletionStreamState.handle_chunk`` (events consumed), ``get_final_completion()``."""
    try:
        import openai
        from openai._models import construct_type
        from openai._streaming import SSEDecoder
        from openai.lib.streaming.chat import ChatCompletionStreamState
        from openai.types.chat import ChatCompletionChunk
    except ImportError as exc:
        return None, f"not installed ({exc})"

    def run_openai(pieces: Iterable[bytes]) -> list:
        state = ChatCompletionStreamState()
        for sse in SSEDecoder().iter_bytes(iter(pieces)):
            if sse.data.startswith("[DONE]"):
                break
            chunk = construct_type(type_=ChatCompletionChunk, value=sse.json())
            for _event in state.handle_chunk(chunk):
                pass
        completion = state.get_final_completion()
        calls = completion.choices[0].message.tool_calls or []
        return [(c.id, c.function.name, c.function.arguments) for c in calls]

    return run_openai, f"openai {openai.__version__}"


def langchain_runners() -> tuple[dict[str, Callable], str]:
    """LangChain's own merging of AIMessageChunk (as langchain-openai builds them from each delta:
    ``tool_call_chunks`` with name, args, id, index), on events parsed as the floor parses them. Two ways
    LangChain merges: ``gathered = gathered + chunk`` per event (the streaming idiom of its docs and
    agents) and one ``chunks[0] + chunks[1:]`` at the end (``generate_from_stream``)."""
    try:
        import langchain_core
        from langchain_core.messages import AIMessageChunk
        from langchain_core.messages.tool import tool_call_chunk
    except ImportError:
        return {}, "not installed (pip install langchain-core to add it)"

    def chunks_of(pieces: Iterable[bytes]):
        loads = orjson.loads
        carry = b""
        for piece in pieces:
            lines = (carry + piece).split(b"\n")
            carry = lines.pop()
            for line in lines:
                if not line.startswith(b"data: ") or line == b"data: [DONE]":
                    continue
                delta = loads(line[6:])["choices"][0]["delta"]
                raw = delta.get("tool_calls") or []
                tool_chunks = [
                    tool_call_chunk(
                        name=rtc.get("function", {}).get("name"),
                        args=rtc.get("function", {}).get("arguments"),
                        id=rtc.get("id"),
                        index=rtc.get("index"),
                    )
                    for rtc in raw
                ]
                yield AIMessageChunk(content=delta.get("content") or "", tool_call_chunks=tool_chunks)

    def calls_of(message) -> list:
        return [(c["id"], c["name"], c["args"]) for c in message.tool_call_chunks]

    def run_running(pieces: Iterable[bytes]) -> list:
        gathered = None
        for chunk in chunks_of(pieces):
            gathered = chunk if gathered is None else gathered + chunk
        return calls_of(gathered)

    def run_once(pieces: Iterable[bytes]) -> list:
        chunks = list(chunks_of(pieces))
        return calls_of(chunks[0] + chunks[1:])

    runners = {
        "LangChain, gathered + chunk per event": run_running,
        "LangChain, one merge at the end": run_once,
    }
    return runners, f"langchain-core {langchain_core.__version__}"


# -- measuring -----------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Measure:
    label: str
    events: int
    nbytes: int
    times: list[float]  # seconds per run
    peak: int | None = None  # tracemalloc peak bytes of one run
    correct: bool | None = None
    note: str = ""
    arguments: int = 0  # argument bytes the stream carries

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def us_per_event(self) -> float:
        return self.median / self.events * 1e6

    @property
    def spread(self) -> float:
        return (max(self.times) - min(self.times)) / self.median if self.median else 0.0


def time_runs(fn: Callable, pieces: list[bytes], repeats: int, warmup: bool = True) -> list[float]:
    if warmup:
        fn(pieces)
    times = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        fn(pieces)
        times.append(time.perf_counter() - start)
    return times


def traced_peak(fn: Callable, pieces: list[bytes]) -> int:
    """tracemalloc peak of one run, above what was allocated before it (in its own run: tracing is slow)."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        output = fn(pieces)
        peak = tracemalloc.get_traced_memory()[1] - base
        del output
    finally:
        tracemalloc.stop()
    return peak


def expected_calls(stream: Stream) -> list:
    return list(zip(stream.ids, stream.names, stream.arguments, strict=True))


# -- printing ------------------------------------------------------------------------------------------------


def table(headers: list[str], rows: list[list], right: set[int] | None = None) -> str:
    right = set(range(1, len(headers))) if right is None else right
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row):
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))
        )

    return "\n".join([line(cells[0]), "  ".join("-" * w for w in widths)] + [line(r) for r in cells[1:]])


def heading(text: str) -> None:
    print(f"\n== {text} " + "=" * max(0, 100 - len(text)), flush=True)


def mib(n: float | None) -> str:
    return "-" if n is None else f"{n / 2**20:.2f} MiB"


def kib(n: float | None) -> str:
    if n is None:
        return "-"
    return f"{n / 2**10:.1f} KiB" if n < 10 * 2**20 else mib(n)


def rate(n: float) -> str:
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f}{unit}"
    return f"{n:.0f}"


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def machine() -> str:
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next(
        (ln.split(":", 1)[1].strip() for ln in cpuinfo.splitlines() if ln.startswith("model name")), "?"
    )
    mhz = next((ln.split(":", 1)[1].strip() for ln in cpuinfo.splitlines() if ln.startswith("cpu MHz")), "?")
    flags = next((ln.split(":", 1)[1].split() for ln in cpuinfo.splitlines() if ln.startswith("flags")), [])
    meminfo = Path("/proc/meminfo").read_text() if Path("/proc/meminfo").exists() else ""
    total = next((int(ln.split()[1]) * 1024 for ln in meminfo.splitlines() if ln.startswith("MemTotal")), 0)
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    virt = " (virtual machine)" if "hypervisor" in flags else ""
    load = os.getloadavg()
    return "\n".join(
        [
            f"CPU:      {model}, {mhz} MHz{virt}; {os.cpu_count()} logical CPUs, {usable} usable here",
            f"memory:   {total / 2**30:.1f} GiB; load average {' '.join(f'{x:.2f}' for x in load)}",
            f"system:   {platform.system()} {platform.release()} {platform.machine()}",
            f"Python:   {platform.python_implementation()} {platform.python_version()}",
            (
                f"packages: mitmproxy {_version('mitmproxy')}, orjson {_version('orjson')}, "
                f"openai {_version('openai')}, pydantic {_version('pydantic')}, "
                f"langchain-core {_version('langchain-core')}"
            ),
        ]
    )


# -- findings, for the targets table ------------------------------------------------------------------------

FINDINGS: dict[str, object] = {}


# -- core mode -----------------------------------------------------------------------------------------------


def bench_core(args) -> None:
    quick = args.quick
    repeats = args.repeats or (2 if quick else 7)
    identity = core_runner(())
    every = core_runner(tuple(DEFAULT_STRATEGIES))
    openai_run, openai_version = openai_runner()
    watch_run, watch_note = addon_runner()
    langchain, langchain_version = langchain_runners()

    heading("core: side by side")
    print(
        textwrap.dedent(f"""\
        Generated Chat Completions streams: N parallel tool calls interleaved round-robin, ~20-byte argument
        fragments (12-28 chars), realistic chunk JSON (id, object, created, model, service_tier,
        system_fingerprint, logprobs), a finish chunk and [DONE]. Medians of {repeats} runs after a warm-up;
        "spread" = (max - min) / median; "x floor" = us/event / the floor's us/event with the same feeding.
        Peak = tracemalloc peak of one run, measured in a separate run. Every contender's calls are compared
        with the generated ones ("rebuilt ok" = every id, name and argument string exact; the floor rebuilds
        nothing).
        Feeding: "64 KiB" = the body in 64 KiB pieces; "per event" = one feed per event, what the addon gets
        when the upstream writes one event per write. Core strategies: {", ".join(DEFAULT_STRATEGIES)}.
        The addon's stream callable: addon.StreamWatch around an accumulator set up as the addon sets it
        up (request body, a clock reading per chunk, stall threshold, the body kept), without mitmproxy.
        Peers: {openai_version}; LangChain: {langchain_version}.""")
    )
    if watch_run is None:
        print(f"The addon's stream callable: {watch_note}.")
    for size, (calls, argument_size) in stream_sizes(quick).items():
        stream = make_stream(size, calls, argument_size)
        expected = expected_calls(stream)
        body_len = len(stream.body)
        measures: list[Measure] = []
        floors: dict[str, Measure] = {}
        contenders: list[tuple[str, str, Callable, int, str]] = []
        for feeding in ("64 KiB", "per event"):
            key = "event" if feeding == "per event" else "piece"
            contenders += [
                (f"floor (split lines + orjson.loads) [{feeding}]", key, run_floor, repeats, ""),
                (f"core, identity routing only [{feeding}]", key, identity, repeats, ""),
                (f"core, every strategy (default) [{feeding}]", key, every, repeats, ""),
            ]
        if watch_run is not None:
            contenders.append(
                ("addon's stream callable (StreamWatch) [per event]", "event", watch_run, repeats, "")
            )
        slow_repeats = repeats if size != "large" else max(1, min(repeats, 3))
        if openai_run is not None:
            contenders.append(
                ("openai-python ChatCompletionStreamState [64 KiB]", "piece", openai_run, slow_repeats, "")
            )
        for label, run in langchain.items():
            contenders.append((f"{label} [64 KiB]", "piece", run, slow_repeats, ""))
        for label, key, fn, n, note in contenders:
            pieces = stream.pieces(key)
            if "gathered" in label and size == "large":
                # Every + re-parses all the partial arguments (AIMessageChunk.init_tool_calls): quadratic.
                measures.append(
                    Measure(
                        label,
                        len(stream.events),
                        body_len,
                        [float("nan")],
                        note=_langchain_estimate(label, stream),
                    )
                )
                continue
            single = n < repeats
            times = time_runs(fn, pieces, n, warmup=not single)
            output = fn(pieces)
            correct = None if fn is run_floor else output == expected
            peak = None
            if not single or size != "large":
                peak = traced_peak(fn, pieces)
            note = f"{n} run(s), no warm-up" if single else note
            m = Measure(
                label, len(stream.events), body_len, times, peak, correct, note, stream.argument_bytes
            )
            measures.append(m)
            if fn is run_floor:
                floors[key] = m
            FINDINGS[f"core/{size}/{label}"] = m
        heading(
            f"core: {size} stream: {calls} calls x ~{argument_size} B arguments; "
            f"{len(stream.events)} events, "
            f"{body_len / 2**20:.2f} MiB, {stream.argument_bytes / 1024:.1f} KiB of arguments"
        )
        rows = []
        for m in measures:
            if m.times[0] != m.times[0]:  # NaN: not run
                rows.append([m.label, "-", "-", "-", "-", "-", "-", "-", m.note])
                continue
            floor = floors["event" if "per event" in m.label else "piece"]
            ratio = m.us_per_event / floor.us_per_event
            ok = "-" if m.correct is None else ("ok" if m.correct else "WRONG")
            rows.append(
                [
                    m.label,
                    f"{m.us_per_event:.2f}",
                    rate(m.events / m.median),
                    f"{m.nbytes / m.median / 1e6:.1f}",
                    f"{ratio:.2f}x",
                    f"{m.spread * 100:.0f}%",
                    kib(m.peak),
                    ok,
                    m.note,
                ]
            )
        print(
            table(
                ["contender", "us/event", "events/s", "MB/s", "x floor", "spread", "peak", "rebuilt", "note"],
                rows,
                right={1, 2, 3, 4, 5, 6},
            )
        )

    bench_calls_scaling(args, repeats)
    bench_memory(args)


def _langchain_estimate(label: str, stream: Stream) -> str:
    """Each + re-parses every call's partial arguments (AIMessageChunk.init_tool_calls): the cost of an event
    grows with the arguments so far. Scaled from the medium run: x argument bytes, x events."""
    medium = FINDINGS.get(f"core/medium/{label}")
    if not isinstance(medium, Measure):
        return "not run: quadratic in the argument bytes"
    scale = stream.argument_bytes / medium.arguments
    seconds = medium.us_per_event * scale * len(stream.events) / 1e6
    return (
        f"not run: quadratic (each + re-parses all arguments so far); ~{duration(seconds)} a run, "
        "scaled from medium"
    )


def duration(seconds: float) -> str:
    for unit, scale in (("h", 3600), ("min", 60)):
        if seconds >= scale:
            return f"{seconds / scale:.1f} {unit}"
    return f"{seconds:.0f} s"


def bench_calls_scaling(args, repeats: int) -> None:
    size = 512 if args.quick else 4096
    heading(f"core: cost per event as parallel calls grow (~{size} B of arguments per call, 64 KiB pieces)")
    identity = core_runner(())
    every = core_runner(tuple(DEFAULT_STRATEGIES))
    rows = []
    per_event: dict[str, list[float]] = {"identity": [], "every": []}
    for calls in (8, 32, 128):
        stream = make_stream(f"{calls} calls", calls, size)
        pieces = stream.pieces("piece")
        expected = expected_calls(stream)
        floor = Measure("floor", len(stream.events), len(stream.body), time_runs(run_floor, pieces, repeats))
        row = [calls, len(stream.events), f"{floor.us_per_event:.2f}"]
        for key, fn in (("identity", identity), ("every", every)):
            m = Measure(key, len(stream.events), len(stream.body), time_runs(fn, pieces, repeats))
            if fn(pieces) != expected:
                m.note = "WRONG"
            per_event[key].append(m.us_per_event)
            row += [
                f"{m.us_per_event:.2f}",
                f"{m.us_per_event / floor.us_per_event:.2f}x",
                f"{m.spread * 100:.0f}%",
            ]
        rows.append(row)
    print(
        table(
            [
                "calls",
                "events",
                "floor us/ev",
                "identity us/ev",
                "x floor",
                "spread",
                "every strat. us/ev",
                "x floor",
                "spread",
            ],
            rows,
        )
    )
    for key, label in (("identity", "identity routing"), ("every", "every strategy")):
        values = per_event[key]
        print(
            f"{label}: us/event at 128 calls / at 8 calls = {values[-1] / values[0]:.2f}; "
            f"max / min over 8, 32, 128 = {max(values) / min(values):.2f}"
        )
    FINDINGS["scaling"] = per_event


def bench_memory(args) -> None:
    heading("core: memory of one accumulator against its argument bytes (tracemalloc peak, 64 KiB pieces)")
    rows = []
    found = {}
    for size, (calls, argument_size) in stream_sizes(args.quick).items():
        stream = make_stream(size, calls, argument_size)
        pieces = stream.pieces("piece")
        arg = stream.argument_bytes
        row = [size, calls, len(stream.events), kib(len(stream.body)), kib(arg)]
        for key, fn in (("identity", core_runner(())), ("every", core_runner(tuple(DEFAULT_STRATEGIES)))):
            peak = traced_peak(fn, pieces)
            found[(size, key)] = (peak, arg)
            row += [kib(peak), f"{peak / arg:.2f}"]
        rows.append(row)
    print(
        table(
            [
                "stream",
                "calls",
                "events",
                "body",
                "arguments",
                "identity peak",
                "per arg B",
                "every strat. peak",
                "per arg B",
            ],
            rows,
        )
    )
    for key, label in (("identity", "identity routing"), ("every", "every strategy")):
        (peak_m, arg_m), (peak_l, arg_l) = found[("medium", key)], found[("large", key)]
        print(
            f"{label}: marginal cost (peak large - peak medium) / (arguments large - medium) = "
            f"{(peak_l - peak_m) / (arg_l - arg_m):.2f} B per argument byte"
        )
    print(
        "The peak covers feeding and finish() (the result dict included); the stream's bytes are not "
        "counted.\n"
        "The addon also keeps each streamed body on the flow (toolcall_lens_body_cap, 16 MiB by default):\n"
        "one more copy of the body per flow, on top of this."
    )
    FINDINGS["memory"] = found


# -- proxy mode ----------------------------------------------------------------------------------------------

IDENTITY_ADDON = '''\
"""The comparison proxy: every response streamed through a callable that returns each chunk as it is."""

from mitmproxy import http


class IdentityStream:
    def responseheaders(self, flow: http.HTTPFlow) -> None:
        flow.response.stream = lambda chunk: chunk


addons = [IdentityStream()]
'''

FLOOR_ADDON = '''\
"""A reference proxy: every response streamed through the floor's work (cut lines, orjson.loads each data
line), the least any analysis of the events must add."""

import orjson
from mitmproxy import http


class FloorStream:
    def responseheaders(self, flow: http.HTTPFlow) -> None:
        carry = [b""]

        def stream(chunk: bytes) -> bytes:
            lines = (carry[0] + chunk).split(b"\\n")
            carry[0] = lines.pop()
            for line in lines:
                if line.startswith(b"data: ") and line != b"data: [DONE]":
                    orjson.loads(line[6:])
            return chunk

        flow.response.stream = stream


addons = [FloorStream()]
'''

STATE_ADDON = f'''\
"""Reports the loaded toolcall-lens addon's live per-flow state: GET {STATE_PATH} through the proxy answers it
(without going upstream) and logs a toolcall-lens-state line."""

import gc
import json
import logging

from mitmproxy import ctx, http

logger = logging.getLogger("bench_state")


class BenchState:
    def __init__(self) -> None:
        self.responses = 0
        self.annotated = 0

    def state(self, current) -> dict:
        lens = ctx.master.addons.get("toolcalllens")
        gc.collect()
        objects = gc.get_objects()
        alive = sum(1 for o in objects if type(o).__name__ == "StreamAccumulator")
        flows = sum(1 for o in objects if isinstance(o, http.HTTPFlow) and o is not current)
        return {{
            "watches": len(lens.watches),
            "echo": len(lens.echo_warnings),
            "observed": len(lens.observed),
            "accumulators_alive": alive,
            "flows_alive": flows,
            "responses": self.responses,
            "annotated": self.annotated,
        }}

    def request(self, flow: http.HTTPFlow) -> None:
        if flow.request.path == "{STATE_PATH}":
            state = self.state(flow)
            logger.info("toolcall-lens-state " + " ".join(f"{{k}}={{v}}" for k, v in state.items()))
            flow.response = http.Response.make(200, json.dumps(state), {{"content-type": "application/json"}})

    def response(self, flow: http.HTTPFlow) -> None:
        if flow.request.path != "{STATE_PATH}":
            self.responses += 1
            self.annotated += "toolcall_lens" in flow.metadata


addons = [BenchState()]
'''


def start_mitmdump(upstream_port: int | None, *scripts: Path, name: str = "mitmdump"):
    """mitmdump in reverse mode in front of 127.0.0.1:``upstream_port`` (None: a regular proxy), with the
    scripts given."""
    from lab import proxy_argv, start_proxy

    return start_proxy(proxy_argv(upstream_port, scripts=scripts), name)


def start_upstream():
    """This script's own upstream (``_upstream`` mode): generated streams, one event per write."""
    from lab import Process

    process = Process("bench upstream", [sys.executable, str(Path(__file__).resolve()), "_upstream"])
    try:
        port = int(process.wait_for(r"bench upstream listening on 127\.0\.0\.1:(\d+)").group(1))
    except BaseException:
        process.stop()
        raise
    return process, port


def serve_upstream() -> int:
    """POST any path, body {"model": "bench-<calls>x<bytes>"}: that stream, chunked, one event per write
    (each drained), X-Fake-Delay seconds apart, each event's fingerprint set to its send time."""
    streams: dict[str, Stream] = {}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method = lines[0].split(" ", 1)[0]
                headers = {}
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                if method != "POST":
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
                    await writer.drain()
                    continue
                model = orjson.loads(body)["model"]
                if model not in streams:
                    calls, size = map(int, model.removeprefix("bench-").split("x"))
                    streams[model] = make_stream(model, calls, size)
                stream = streams[model]
                events = stream.events
                if "x-bench-unique" in headers:  # fresh call ids (same length) for this response
                    tag = int(headers["x-bench-unique"])
                    events = list(events)
                    for i, call_id in enumerate(stream.ids):
                        fresh = f"call_{tag:012x}{i:012x}"
                        events[1 + i] = events[1 + i].replace(call_id.encode(), fresh.encode())
                delay = float(headers.get("x-fake-delay", "0"))
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                    b"Transfer-Encoding: chunked\r\n\r\n"
                )
                await writer.drain()
                for i, event in enumerate(events):
                    if i and delay:
                        await asyncio.sleep(delay)
                    piece = event.replace(FINGERPRINT, b"fp_%020d" % time.monotonic_ns())
                    writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    await writer.drain()
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        print(f"bench upstream listening on 127.0.0.1:{server.sockets[0].getsockname()[1]}", flush=True)
        async with server:
            await server.serve_forever()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
    return 0


def chat_body(model: str, echo: bool = False) -> bytes:
    messages: list[dict] = [{"role": "user", "content": "Find the RBI circulars and my profile."}]
    if echo:  # the client's follow-up: the calls of the `interleaved` scenario and their results
        calls = [
            ("call_abc", "search_circulars", '{"query": "RBI circulars"}'),
            ("call_xyz", "get_user_profile", '{"user_id": "u123"}'),
        ]
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                    for i, n, a in calls
                ],
            }
        )
        messages += [{"role": "tool", "tool_call_id": i, "content": "ok"} for i, _, _ in calls]
    return orjson.dumps({"model": model, "stream": True, "messages": messages})


HEADERS = {
    "Content-Type": "application/json",
    "Authorization": "Bearer sk-bench-not-a-key",
    "X-Fake-Delay": "0",
}


def post(
    conn: http.client.HTTPConnection,
    body: bytes,
    headers: dict | None = None,
    url: str = "/v1/chat/completions",
) -> bytes:
    conn.request("POST", url, body, headers or HEADERS)
    response = conn.getresponse()
    data = response.read()
    if response.status != 200:
        raise RuntimeError(f"status {response.status}: {data[:200]!r}")
    return data


def cpu_seconds(pid: int) -> float:
    """CPU time of every thread of the process, from schedstat (nanoseconds; /proc/PID/stat counts ticks)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that just ended
            total += int((task / "schedstat").read_text().split()[0])
    return total / 1e9


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def throughput_run(port: int, bodies: list[bytes], clients: int, expected: Callable[[bytes], int]) -> tuple:
    """``clients`` threads, one keep-alive connection each, sharing ``bodies`` in order. Returns (seconds,
    events received, failures)."""
    queue = list(reversed(bodies))
    lock = threading.Lock()
    events = [0] * clients
    failures: list[str] = []

    def client(k: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        try:
            while True:
                with lock:
                    if not queue:
                        return
                    body = queue.pop()
                data = post(conn, body)
                got = expected(data)
                if got < 0:
                    failures.append(f"unexpected body of {len(data)} bytes")
                events[k] += max(got, 0)
        except Exception as exc:  # noqa: BLE001 - reported in the table
            failures.append(repr(exc))
        finally:
            conn.close()

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - start, sum(events), failures


def latency_run(port: int, model: str, delay: float) -> list[float]:
    """One streamed request; for each event, its arrival time at this client minus the time the upstream
    wrote it (both CLOCK_MONOTONIC on this machine), in seconds."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request(
            "POST", "/v1/chat/completions", chat_body(model), {**HEADERS, "X-Fake-Delay": str(delay)}
        )
        response = conn.getresponse()
        latencies = []
        while line := response.readline():
            now = time.monotonic_ns()
            if match := FINGERPRINT_RE.search(line):
                latencies.append((now - int(match.group(1))) / 1e9)
        return latencies
    finally:
        conn.close()


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def bench_proxy(args) -> None:
    from lab import start_fake_provider

    quick = args.quick
    rounds = 2 if quick else 5
    long_model = "bench-8x1024" if quick else "bench-8x4096"
    long_requests, short_requests, clients = (2, 20, 2) if quick else (16, 160, 4)
    latency_model, latency_delay = ("bench-4x256", 0.002) if quick else ("bench-8x1024", 0.002)
    long_stream = make_stream(long_model, *map(int, long_model.removeprefix("bench-").split("x")))
    long_len, long_events = len(long_stream.body), len(long_stream.events)

    heading("proxy: mitmdump with addon.py against mitmdump with an identity stream callable")
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="toolcall-lens-bench-")))
        (tmp / "identity_stream.py").write_text(IDENTITY_ADDON)
        (tmp / "floor_stream.py").write_text(FLOOR_ADDON)
        provider, provider_port = start_fake_provider(delay=0)
        stack.callback(provider.stop)
        upstream, upstream_port = start_upstream()
        stack.callback(upstream.stop)
        proxies = {}
        for label, script in (
            ("addon.py", ROOT / "addon.py"),
            ("identity callable", tmp / "identity_stream.py"),
            ("floor callable", tmp / "floor_stream.py"),
        ):
            for source, port in (("upstream", upstream_port), ("provider", provider_port)):
                process, listen = start_mitmdump(port, script, name=f"mitmdump {label} -> {source}")
                stack.callback(process.stop)
                proxies[(label, source)] = (process, listen)
        direct = {"upstream": upstream_port, "provider": provider_port}
        print(
            textwrap.dedent(f"""\
            Everything on loopback: the upstreams, mitmdump {_version("mitmproxy")} in reverse mode with
            addon.py at its defaults, the same mitmdump with a responseheaders hook setting
            flow.response.stream = lambda chunk: chunk (the comparison), and with a callable doing the floor's
            work (cut lines, orjson.loads each data line: the least any analysis adds; for reference), and the
            clients (raw http.client, threads of this process). Each upstream writes one event per write, each
            drained, as providers flush. The proxies run interleaved (order rotated each round), {rounds}
            rounds; medians over rounds, spread = (max - min) / median. "proxy CPU" = mitmdump's CPU time
            per event (all its threads, /proc/PID/task/*/schedstat), less noisy than wall time on a shared
            machine. "direct" (no proxy) is for scale only.""")
        )

        workloads = [
            (
                (
                    f"long streams: {long_model.removeprefix('bench-')} (calls x bytes), "
                    f"{long_events} events each, {long_requests} requests over {clients} connections, "
                    "this script's upstream"
                ),
                "upstream",
                [chat_body(long_model)] * long_requests,
                lambda data: long_events if len(data) == long_len else -1,
            ),
            (
                (
                    f"short flows: fake_provider 'interleaved' and 'sequential' (8 to 13 events each), "
                    f"{short_requests} requests over {clients} connections"
                ),
                "provider",
                [chat_body("interleaved" if i % 2 else "sequential") for i in range(short_requests)],
                lambda data: data.count(b"data: ") if data.endswith(b"data: [DONE]\n\n") else -1,
            ),
        ]
        for title, source, bodies, expected in workloads:
            heading(f"proxy: throughput, {title}")
            results: dict[str, list[tuple[float, int, float]]] = {}
            failures: list[str] = []
            targets = [
                ("addon.py", proxies[("addon.py", source)]),
                ("identity callable", proxies[("identity callable", source)]),
                ("floor callable", proxies[("floor callable", source)]),
                ("direct", (None, direct[source])),
            ]
            for _label, (_process, port) in targets:  # warm-up
                throughput_run(port, bodies[: clients * 2], clients, expected)
            for round_ in range(rounds):
                order = targets[round_ % len(targets) :] + targets[: round_ % len(targets)]
                for label, (process, port) in order:
                    cpu0 = cpu_seconds(process.popen.pid) if process else 0.0
                    seconds, events, failed = throughput_run(port, bodies, clients, expected)
                    cpu = (cpu_seconds(process.popen.pid) - cpu0) if process else float("nan")
                    failures += failed
                    results.setdefault(label, []).append((seconds, events, cpu))
            rows = []
            summary = {}
            for label, runs in results.items():
                per_second = [events / seconds for seconds, events, _ in runs]
                cpu = [c / events * 1e6 for _, events, c in runs if events]
                med = statistics.median(per_second)
                summary[label] = (med, statistics.median(cpu) if cpu else float("nan"))
                rows.append(
                    [
                        label,
                        rate(med),
                        f"{statistics.median(len(bodies) / seconds for seconds, _, _ in runs):.1f}",
                        f"{(max(per_second) - min(per_second)) / med * 100:.0f}%",
                        "-" if label == "direct" else f"{statistics.median(cpu):.1f}",
                    ]
                )
            for row, (label, (med, cpu)) in zip(rows, summary.items()):
                base, base_cpu = summary["identity callable"]
                row.append("-" if label == "direct" else f"{med / base * 100:.0f}%")
                row.append("-" if label == "direct" else f"{cpu / base_cpu:.2f}x")
            print(
                table(
                    [
                        "proxy",
                        "events/s",
                        "flows/s",
                        "spread",
                        "proxy CPU us/ev",
                        "of identity thr.",
                        "CPU x identity",
                    ],
                    rows,
                )
            )
            if failures:
                print(f"FAILURES ({len(failures)}): {failures[:3]}")
            FINDINGS[f"proxy/{source}"] = (
                summary["addon.py"][0] / summary["identity callable"][0],
                bool(failures),
                summary["floor callable"][0] / summary["identity callable"][0],
            )

        heading(
            f"proxy: latency added per event ({latency_model.removeprefix('bench-')} stream, "
            f"{latency_delay * 1000:.0f} ms between events)"
        )
        print(
            textwrap.dedent("""\
            Method: the upstream writes its send time (CLOCK_MONOTONIC ns) into each event's
            system_fingerprint just before the write; the client (one request at a time, nothing else
            running) takes the time as each event's line comes out of readline(). Latency = arrival - send,
            for every event, through each proxy (and direct), rounds interleaved. Added = the addon proxy's
            quantile minus the identity proxy's same quantile (the quantiles of two distributions, not of
            paired differences); per-round p50 and p99 show the noise.""")
        )
        latencies: dict[str, list[list[float]]] = {}
        targets = [
            ("addon.py", proxies[("addon.py", "upstream")][1]),
            ("identity callable", proxies[("identity callable", "upstream")][1]),
            ("direct", upstream_port),
        ]
        for label, port in targets:
            latency_run(port, latency_model, 0)  # warm-up
        for round_ in range(rounds):
            order = targets[round_ % len(targets) :] + targets[: round_ % len(targets)]
            for label, port in order:
                latencies.setdefault(label, []).append(latency_run(port, latency_model, latency_delay))
        rows = []
        pooled = {label: [x for run in runs for x in run] for label, runs in latencies.items()}
        for label, runs in latencies.items():
            values = pooled[label]
            rows.append(
                [
                    label,
                    len(values),
                    *(f"{quantile(values, q) * 1e3:.3f}" for q in (0.5, 0.9, 0.99)),
                    f"{max(values) * 1e3:.3f}",
                    " ".join(f"{quantile(run, 0.5) * 1e3:.3f}" for run in runs),
                    " ".join(f"{quantile(run, 0.99) * 1e3:.3f}" for run in runs),
                ]
            )
        print(
            table(
                ["path", "events", "p50 ms", "p90 ms", "p99 ms", "max ms", "p50 per round", "p99 per round"],
                rows,
                right={1, 2, 3, 4, 5},
            )
        )
        added = {
            q: quantile(pooled["addon.py"], q) - quantile(pooled["identity callable"], q) for q in (0.5, 0.99)
        }
        print(f"added by the addon: p50 {added[0.5] * 1e3:+.3f} ms, p99 {added[0.99] * 1e3:+.3f} ms")
        FINDINGS["latency"] = added


# -- soak mode -----------------------------------------------------------------------------------------------


def bench_rewrite(args) -> None:
    """The rewriter's cost per event, fed as the addon feeds it (one event per call), beside the floor."""
    from accumulator.rewrite import StreamRewriter

    calls, size = stream_sizes(args.quick)["medium"]
    stream = make_stream("medium", calls, size)
    pieces = stream.events
    repeats = args.repeats or (2 if args.quick else 7)
    heading(
        f"rewrite: {calls} calls x ~{size} B, {len(pieces):,} events, one event per feed (as the addon feeds)"
    )

    def rewriter(inject=(), repair=()):
        def run(pieces):
            r = StreamRewriter("openai-chat", inject=inject, repair=repair)
            out = [piece for chunk in pieces for piece in r.feed(chunk)]
            return out + r.finish()

        return run

    contenders = [
        ("floor: split lines + orjson.loads", run_floor),
        ("core analysis, every strategy (the addon's watch)", core_runner(tuple(DEFAULT_STRATEGIES))),
        ("inject interleave", rewriter(["interleave"])),
        (
            "inject split-names + repeat-names + collide-index",
            rewriter(["split-names", "repeat-names", "collide-index"]),
        ),
        ("inject rechunk", rewriter(["rechunk"])),
        ("repair serialize", rewriter(repair=["serialize"])),
        ("repair reindex", rewriter(repair=["reindex"])),
        ("inject interleave + repair serialize", rewriter(["interleave"], ["serialize"])),
    ]
    rows, floor = [], None
    for label, fn in contenders:
        best = min(time_runs(fn, pieces, repeats))
        floor = floor or best
        per_event = best / len(pieces) * 1e6
        rows.append([label, f"{per_event:.2f}", rate(len(pieces) / best), f"{best / floor:.2f}"])
    print(table(["", "µs/event", "events/s", "x floor"], rows, right={1, 2, 3}))
    print(
        "A rewritten flow pays for the rewriter and for two analyses (the upstream's stream and the client's);\n"
        "rewriting is off by default, and a flow not rewritten pays nothing for it."
    )


def bench_soak(args) -> None:
    from lab import start_fake_provider

    flows = args.flows or (200 if args.quick else 10_000)
    clients = 4
    every = max(1, flows // 10)
    heading(f"soak: {flows} flows through one mitmdump with addon.py")
    print(
        textwrap.dedent(f"""\
        {clients} concurrent clients (raw http.client, one keep-alive connection each) send {flows} streamed
        requests through one mitmdump (addon.py at its defaults; a regular proxy, so one instance reaches
        both upstreams), X-Fake-Delay 0, in turn: fake_provider 'interleaved'; this script's upstream, 6
        interleaved calls of ~200 B with fresh ids every response; fake_provider 'sequential' with a
        follow-up carrying the interleaved calls (so the echo check runs); the 6-call stream again. The
        fresh ids fill the echo index (bounded at 10,000 calls) after ~3,300 flows. A second script addon
        next to addon.py reads the ToolcallLens instance (ctx.master.addons.get("toolcalllens")): GET
        {STATE_PATH} through the proxy answers its state without going upstream, after a gc.collect():
        watches (per-flow stream callables), echo (pending echo warnings), observed (the echo index),
        accumulators alive (StreamAccumulator objects in the heap), flows alive (HTTPFlow objects in the
        heap), annotated (flows the addon annotated). RSS = mitmdump's VmRSS. Sampled every {every} flows
        while the other clients keep going (so a few flows are in flight), and once more when all are
        done.""")
    )
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="toolcall-lens-bench-")))
        (tmp / "bench_state.py").write_text(STATE_ADDON)
        provider, provider_port = start_fake_provider(delay=0)
        stack.callback(provider.stop)
        upstream, upstream_port = start_upstream()
        stack.callback(upstream.stop)
        proxy, port = start_mitmdump(None, ROOT / "addon.py", tmp / "bench_state.py")
        stack.callback(proxy.stop)
        pid = proxy.popen.pid
        provider_url = f"http://127.0.0.1:{provider_port}/v1/chat/completions"
        upstream_url = f"http://127.0.0.1:{upstream_port}/v1/chat/completions"

        def state() -> dict:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            try:
                conn.request("GET", f"http://127.0.0.1:{provider_port}{STATE_PATH}")
                return json.loads(conn.getresponse().read())
            finally:
                conn.close()

        def request(n: int) -> tuple[str, bytes, dict]:
            kind = n % 4
            if kind in (1, 3):
                return upstream_url, chat_body("bench-6x200"), {**HEADERS, "X-Bench-Unique": str(n)}
            return (
                provider_url,
                chat_body("interleaved" if kind == 0 else "sequential", echo=kind == 2),
                HEADERS,
            )

        samples = [(0, rss_bytes(pid), state(), 0.0)]
        counter = itertools.count(1)
        lock = threading.Lock()
        failures: list[str] = []
        done = [0]
        start = time.perf_counter()

        def client() -> None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            try:
                while (n := next(counter)) <= flows:
                    url, body, headers = request(n)
                    data = post(conn, body, headers, url)
                    if not data.endswith(b"data: [DONE]\n\n"):
                        failures.append(f"flow {n}: incomplete body")
                    with lock:
                        done[0] += 1
                        sample = done[0] % every == 0 and done[0] < flows
                    if sample:
                        samples.append((done[0], rss_bytes(pid), state(), time.perf_counter() - start))
            except Exception as exc:  # noqa: BLE001 - reported below
                failures.append(repr(exc))
            finally:
                conn.close()

        threads = [threading.Thread(target=client) for _ in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - start
        final = state()
        samples.append((done[0], rss_bytes(pid), final, elapsed))
        line = proxy.wait_for(rf"toolcall-lens-state .*annotated={final['annotated']}\b").group(0)
        rows = [
            [
                n,
                mib(rss),
                s["watches"],
                s["echo"],
                s["accumulators_alive"],
                s["flows_alive"],
                s["observed"],
                s["annotated"],
                f"{t:.1f}",
            ]
            for n, rss, s, t in samples
        ]
        print(
            table(
                [
                    "flows",
                    "RSS",
                    "watches",
                    "echo",
                    "accumulators alive",
                    "flows alive",
                    "observed",
                    "annotated",
                    "seconds",
                ],
                rows,
            )
        )
        print(
            f"{done[0]} flows in {elapsed:.1f} s ({done[0] / elapsed:.0f} flows/s); failures: {len(failures)}"
            + (f" {failures[:3]}" if failures else "")
        )
        print(f"the state addon's last line in mitmdump's output: {line.split('] ')[-1]}")
        half = min(samples[1:], key=lambda s: abs(s[0] - flows // 2))
        growth = (samples[-1][1] - half[1]) / half[1]
        print(
            f"RSS growth from {half[0]} to {samples[-1][0]} flows: {growth * 100:+.1f}% "
            f"({mib(samples[-1][1] - half[1])}); "
            f"from 0 to {samples[-1][0]}: {mib(samples[-1][1] - samples[0][1])}"
        )
        FINDINGS["soak"] = {
            "final": final,
            "growth": growth,
            "half": half[0],
            "flows": done[0],
            "failures": len(failures),
            "quick": args.quick,
        }


# -- targets -------------------------------------------------------------------------------------------------


def print_targets() -> None:
    heading("targets (from the issue; measured above, never asserted by a test)")
    rows = []

    def add(target: str, measured: str, met: bool | None) -> None:
        rows.append([target, measured, "not measured" if met is None else ("met" if met else "NOT MET")])

    for feeding in ("64 KiB", "per event"):
        floor = FINDINGS.get(f"core/medium/floor (split lines + orjson.loads) [{feeding}]")
        for label, limit in (("core, identity routing only", 1.5), ("core, every strategy (default)", 2.0)):
            m = FINDINGS.get(f"core/medium/{label} [{feeding}]")
            if floor and m:
                ratio = m.us_per_event / floor.us_per_event
                add(
                    f"{label.removeprefix('core, ')}: <= {limit}x the floor per event (medium, {feeding})",
                    f"{ratio:.2f}x ({m.us_per_event:.2f} vs {floor.us_per_event:.2f} us/event)",
                    ratio <= limit,
                )
            else:
                add(f"{label}: <= {limit}x floor (medium, {feeding})", "-", None)
    scaling = FINDINGS.get("scaling")
    for key, label in (("identity", "identity routing"), ("every", "every strategy")):
        if scaling:
            values = scaling[key]
            growth = values[-1] / values[0]
            add(
                f"{label}: cost per event flat as calls grow (128 calls / 8 calls <= 1.25x)",
                f"{' / '.join(f'{v:.2f}' for v in values)} us/event at 8/32/128: {growth:.2f}x",
                growth <= 1.25,
            )
        else:
            add(f"{label}: flat over 8/32/128 calls", "-", None)
    openai_m = FINDINGS.get("core/medium/openai-python ChatCompletionStreamState [64 KiB]")
    core_m = FINDINGS.get("core/medium/core, every strategy (default) [64 KiB]")
    if openai_m and core_m:
        speedup = openai_m.us_per_event / core_m.us_per_event
        add(
            ">= 30x faster than openai-python's stream state (medium, core with every strategy)",
            f"{speedup:.1f}x ({openai_m.us_per_event:.1f} vs {core_m.us_per_event:.2f} us/event)",
            speedup >= 30,
        )
    else:
        add(">= 30x faster than openai-python's stream state", "-", None)
    for source, label in (("upstream", "long streams"), ("provider", "short flows")):
        found = FINDINGS.get(f"proxy/{source}")
        if found:
            share, failed, floor_share = found
            add(
                f"through mitmdump: >= 90% of the identity callable's throughput ({label})",
                f"{share * 100:.0f}% (the floor callable: {floor_share * 100:.0f}%)"
                + (" (with failures)" if failed else ""),
                share >= 0.9 and not failed,
            )
        else:
            add(f"through mitmdump: >= 90% of identity throughput ({label})", "-", None)
    latency = FINDINGS.get("latency")
    if latency:
        add(
            "through mitmdump: < 1 ms added per event at p99",
            f"p99 {latency[0.99] * 1e3:+.3f} ms (p50 {latency[0.5] * 1e3:+.3f} ms)",
            latency[0.99] < 1e-3,
        )
    else:
        add("through mitmdump: < 1 ms added per event at p99", "-", None)
    memory = FINDINGS.get("memory")
    if memory:
        for key, label in (("identity", "identity"), ("every", "every strategy")):
            k_medium = memory[("medium", key)][0] / memory[("medium", key)][1]
            k_large = memory[("large", key)][0] / memory[("large", key)][1]
            ratio = k_large / k_medium
            add(
                f"memory proportional to argument bytes ({label}: peak per argument byte, "
                "large / medium <= 1.5x)",
                f"{k_medium:.2f} -> {k_large:.2f} B per argument byte ({ratio:.2f}x)",
                ratio <= 1.5,
            )
    else:
        add("memory per flow proportional to argument bytes", "-", None)
    soak = FINDINGS.get("soak")
    if soak:
        final = soak["final"]
        zero = final["watches"] == 0 and final["accumulators_alive"] == 0 and final["echo"] == 0
        add(
            f"soak: live accumulators back at zero after {soak['flows']} flows",
            f"watches {final['watches']}, accumulators alive {final['accumulators_alive']}, "
            f"echo {final['echo']}, "
            f"flows alive {final['flows_alive']}; {soak['failures']} failures",
            zero and not soak["failures"],
        )
        add(
            f"soak: resident memory flat (growth from flow {soak['half']} to the end <= 5%)",
            f"{soak['growth'] * 100:+.1f}%" + (" (--quick: too few flows to judge)" if soak["quick"] else ""),
            None if soak["quick"] else soak["growth"] <= 0.05,
        )
    else:
        add("soak: accumulators back at zero, resident memory flat", "-", None)
    print(table(["target", "measured", "verdict"], rows, right=set()))


# -- the front door ------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "mode", nargs="?", default="core", choices=("core", "proxy", "rewrite", "soak", "all", "_upstream")
    )
    parser.add_argument(
        "--quick", action="store_true", help="small everything: a smoke run, figures are noise"
    )
    parser.add_argument(
        "--repeats", type=int, default=0, help="timed runs per row (default 7; 2 with --quick)"
    )
    parser.add_argument("--flows", type=int, default=0, help="soak flows (default 10,000; 200 with --quick)")
    args = parser.parse_args(argv)
    if args.mode == "_upstream":
        return serve_upstream()
    sys.path.insert(0, str(ROOT / "scripts"))  # lab.py
    heading(
        "toolcall-lens benchmark" + (" (--quick: smoke run, the figures mean little)" if args.quick else "")
    )
    print(machine())
    start = time.perf_counter()
    if args.mode in ("core", "all"):
        bench_core(args)
    if args.mode in ("proxy", "all"):
        bench_proxy(args)
    if args.mode in ("rewrite", "all"):
        bench_rewrite(args)
    if args.mode in ("soak", "all"):
        bench_soak(args)
    print_targets()
    print(f"\ntotal time: {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
