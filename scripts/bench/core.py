"""The core side by side: the floor, the core with identity routing only and with every strategy, the addon's
stream callable and the peers, on the small, medium and large streams, each fed in 64 KiB pieces and per event."""

from __future__ import annotations

import textwrap
from collections.abc import Callable

from accumulator import COMPILED, DEFAULT_STRATEGIES

from .contenders import addon_runner, core_runner, langchain_runners, openai_runner, run_floor
from .measure import Measure, time_runs, traced_peak
from .memory import bench_memory
from .report import FINDINGS, duration, heading, kib, rate, table
from .scaling import bench_calls_scaling
from .streams import Stream, expected_calls, make_stream, stream_sizes

CORE = "compiled (mypyc)" if COMPILED else "pure Python (its sources)"


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
        Core: {CORE}. Peers: {openai_version}; LangChain: {langchain_version}.""")
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
