"""The addon inside a real mitmdump, against the same mitmdump with an identity stream callable (and, for
reference, one doing the floor's work), on loopback: throughput, runs interleaved, and the latency each
event picks up on its way to the client."""

from __future__ import annotations

import contextlib
import http.client
import statistics
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable

from lab import start_fake_provider

from accumulator import StreamAccumulator
from toolcall_lens.watch import HELD_CHUNKS

from .measure import paired, quantile
from .report import FINDINGS, heading, rate, table, version
from .requests import bench_long_requests
from .streams import FINGERPRINT_RE, chat_body, make_stream
from .traffic import ADDON, ADDONS, HEADERS, children_cpu_seconds, cpu_seconds, post, start_mitmdump
from .upstream import start_upstream

# Probes of the short flows (``addons/addon_without.py``): the addon with parts of its per-flow work off.
# The addon's plumbing alone: classification, the worker's round trip, the body kept.
PLUMBING = "request,redact,annotate"
WITHOUT = (
    ("addon.py without request reading, session, summary", "request,session,summary"),
    ("addon.py without request reading, redaction, annotation", PLUMBING),
)
# A reference of the short flows: the two references in one mitmdump, the bare core in a worker and what
# the addon shows of each flow (a comment, the metadata, one log line). The least an addon of this design
# (analysis in a worker, a line a flow) costs, before any of its features: the room the 90% target leaves.
DESIGN = "core off-process + a line a flow"


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


# Between two feeds of the cold run: a walk over ~10 MB of objects, as a proxy's other work between two
# chunks of one flow (other flows, its layers, asyncio) goes through memory the core does not use.
_ELSEWHERE = [{"key": [n, str(n), (n, n)]} for n in range(30_000)]


def _walk_elsewhere() -> int:
    total = 0
    for entry in _ELSEWHERE:
        total += entry["key"][0]
    return total


def core_alone(events: list[bytes], busy: bool = False, cold: bool = False, runs: int = 3) -> float:
    """The core as core_stream.py runs it (one feed per event, a clock reading each), in this process:
    thread CPU µs per event in the feeds alone, median of ``runs`` after a warm-up. ``busy``: with another
    process spinning on the other core (as the clients and the upstream keep it while the proxy runs);
    ``cold``: with a walk over other memory between two feeds (as the proxy's own work between two
    chunks). Measured once per round, between the proxies' runs: the machine's speed drifts."""
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
    clock = time.thread_time_ns
    try:
        times = []
        for _ in range(runs + 1):
            spent = 0
            accumulator = StreamAccumulator("openai-chat")
            for event in events:
                if cold:
                    _walk_elsewhere()
                start = clock()
                accumulator.feed(event, time.time())
                spent += clock() - start
            accumulator.finish(time.time())
            times.append(spent / len(events) / 1e3)
        return statistics.median(times[1:])
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()


def alone_round(events: list[bytes], found: dict[str, list[float]]) -> None:
    """One round of the core alone, idle, beside a busy core and with cold caches (on fewer events: each
    walk takes a millisecond or more)."""
    found.setdefault("alone", []).append(core_alone(events))
    found.setdefault("busy", []).append(core_alone(events, busy=True))
    found.setdefault("cold", []).append(core_alone(events[:300], cold=True, runs=1))


def core_inside(summary: dict, alone_runs: dict[str, list[float]]) -> None:
    """What each callable adds to mitmdump's CPU per event, against the core alone in this process."""
    identity_cpu = summary["identity callable"][1]
    added = {
        label: summary[label][1] - identity_cpu
        for label in ("floor callable", "core callable", "addon.py", "addon.py, in the proxy")
    }
    alone, busy, cold = (statistics.median(alone_runs[key]) for key in ("alone", "busy", "cold"))
    core = added["core callable"]
    print(
        textwrap.dedent(f"""        Added CPU per event inside mitmdump (its CPU per event less the identity callable's): floor
        {added["floor callable"]:.1f} µs, core {core:.1f} µs, addon {added["addon.py"]:.1f} µs, analysing
        in the proxy {added["addon.py, in the proxy"]:.1f} µs (fed {HELD_CHUNKS} chunks at a time; the core
        callable one chunk at a time; the addon at its defaults ships them to its worker).
        The same core alone in this process, fed the same events the same way (thread CPU of the feeds,
        medians of one measure per round, taken between the proxies' runs):
        {alone:.1f} µs per event; {busy:.1f} µs with the other core busy (as the clients and the upstream
        keep it during the runs above); {cold:.1f} µs with a walk over 10 MB of other objects between two
        feeds (as the proxy's own work between two chunks of a flow). Inside mitmdump / alone: {core / alone:.2f}x;
        / alone with the other core busy: {core / busy:.2f}x; / alone with cold caches: {core / cold:.2f}x.""")
    )
    FINDINGS["core inside"] = (core, alone, busy, cold)


def addon_parts(upstream_port: int, bodies: list[bytes], clients: int, expected, added: float) -> None:
    """The addon's own work per short flow, by part: a run through addon.py with the probe
    ``addons/addon_parts.py`` (thread CPU of each part where mitmdump calls it)."""
    heading("proxy: the addon's own work per short flow, by part")
    process, port = start_mitmdump(
        upstream_port, ADDON, ADDONS / "addon_parts.py", name="mitmdump addon.py + addon_parts"
    )
    try:
        throughput_run(port, bodies, clients, expected)
    finally:
        process.stop()
    rows = [line.split("\t") for line in said_by(process, "addon_parts: ")]
    rows = [row for row in rows if len(row) == 3]
    print(table(["part (thread CPU where mitmdump calls it)", "us a flow", "calls a flow"], rows))
    print(
        f"The whole addon adds {added:.0f} us of proxy CPU a flow (the table above: its CPU per event less "
        "the identity callable's, times the events of a flow). What the parts leave out is mitmproxy's: "
        "running the addon's hooks, the awaited response hook, and the dispatch of each log record to "
        "every addon (its deprecated add_log hook). Each timed call costs ~1 us of clock readings."
    )
    if not rows:
        print("FAILURES: addon_parts printed nothing")


def said_by(process, prefix: str) -> list[str]:
    """The lines a script printed in ``process``'s output under ``prefix``, without it."""
    return [line.removeprefix(prefix) for line in process.lines if line.startswith(prefix)]


# The collector's work per short flow (``addons/collector.py``, loaded after each proxy's own scripts):
# (label, scripts, options).
COLLECTED = (
    ("identity callable", (ADDONS / "identity_stream.py",), ()),
    (DESIGN, (ADDONS / "line_stream.py", ADDONS / "offproc_stream.py"), ()),
    (
        "addon.py, its plumbing alone (a probe)",
        (ADDON, ADDONS / "addon_without.py"),
        (f"addon_without={PLUMBING}",),
    ),
    ("addon.py", (ADDON,), ()),
    (
        "addon.py, its result taken off each flow (a probe)",
        (ADDON, ADDONS / "addon_without.py"),
        ("addon_without=result",),
    ),
)


def collector(upstream_port: int, bodies: list[bytes], clients: int, expected, quick: bool) -> None:
    """The garbage collector's work per short flow, by generation, in mitmdump with the identity callable,
    the design's reference, the addon and two probes of it: one mitmdump at a time, three runs of the
    short flows each, counted after a warm-up (``addons/collector.py``)."""
    heading("proxy: the collector's work per short flow, by generation")
    warm_up = 5 if quick else 100
    rows = []
    notes: list[str] = []
    for label, scripts, options in COLLECTED:
        process, port = start_mitmdump(
            upstream_port,
            *scripts,
            ADDONS / "collector.py",
            name=f"mitmdump {label} + collector",
            options=(*options, f"collector_after={warm_up}"),
        )
        try:
            for _ in range(3):
                throughput_run(port, bodies, clients, expected)
        finally:
            process.stop()
        probe = said_by(process, "addon_without: ")
        if probe:  # what the probe switched off, as it said
            notes.append(f"{label}: {'; '.join(probe)}")
        said = said_by(process, "collector: ")
        parts = said[-1].split("; ") if said else []
        if len(parts) != 3:
            rows.append([label, "-", "-", "-"])
            print(f"FAILURES: the collector probe said {said[-1] if said else 'nothing'} ({label})")
            continue
        spent = [float(x) for x in parts[2].removeprefix("us a flow ").split()]
        rows.append(
            [
                label,
                parts[1].removeprefix("collections a flow "),
                " ".join(f"{x:.1f}" for x in spent),
                f"{sum(spent):.1f}",
            ]
        )
    print(
        table(
            [
                "mitmdump with",
                "collections a flow (young, middle, full)",
                "us a flow (the same)",
                "us a flow",
            ],
            rows,
        )
    )
    print(
        "Thread CPU of each collection (gc.callbacks). A young collection comes each 700 objects the collector "
        "follows made and not yet freed; what is alive then moves to the middle generation, and what is alive "
        "at a middle one to the oldest, whose full collections walk the whole heap. The probe that takes the "
        "result off each flow tells what keeping it there costs (the addon's product: not a configuration)."
    )
    for note in notes:
        print(note)


def bench_proxy(args) -> None:
    quick = args.quick
    rounds = 2 if quick else 5
    long_model = "bench-8x1024" if quick else "bench-8x4096"
    # Each run a second or more (160 short flows were a quarter of a second: spreads of 10-50%).
    long_requests, short_requests, clients = (2, 20, 2) if quick else (48, 1200, 4)
    latency_model, latency_delay = ("bench-4x256", 0.002) if quick else ("bench-8x1024", 0.002)
    long_stream = make_stream(long_model, *map(int, long_model.removeprefix("bench-").split("x")))
    long_len, long_events = len(long_stream.body), len(long_stream.events)

    heading("proxy: mitmdump with addon.py against mitmdump with an identity stream callable")
    with contextlib.ExitStack() as stack:
        provider, provider_port = start_fake_provider(delay=0)
        stack.callback(provider.stop)
        upstream, upstream_port = start_upstream()
        stack.callback(upstream.stop)
        proxies = {}
        for label, script, options in (
            ("addon.py", ADDON, ()),
            ("addon.py, in the proxy", ADDON, ("toolcall_lens_worker=false",)),
            ("identity callable", ADDONS / "identity_stream.py", ()),
            ("floor callable", ADDONS / "floor_stream.py", ()),
            ("identity + a line a flow", ADDONS / "line_stream.py", ()),
            ("core callable", ADDONS / "core_stream.py", ()),
            ("core off-process", ADDONS / "offproc_stream.py", ()),
        ):
            for source, port in (("upstream", upstream_port), ("provider", provider_port)):
                process, listen = start_mitmdump(
                    port, script, name=f"mitmdump {label} -> {source}", options=options
                )
                stack.callback(process.stop)
                proxies[(label, source)] = (process, listen)
        for label, parts in WITHOUT:  # short flows only: what the addon's per-flow parts cost there
            process, listen = start_mitmdump(
                provider_port,
                ADDON,
                ADDONS / "addon_without.py",
                name=f"mitmdump {label} -> provider",
                options=(f"addon_without={parts}",),
            )
            stack.callback(process.stop)
            proxies[(label, "provider")] = (process, listen)
        # The line's script first: the off-process callable, set after, is the one that runs.
        process, listen = start_mitmdump(
            provider_port,
            ADDONS / "line_stream.py",
            ADDONS / "offproc_stream.py",
            name=f"mitmdump {DESIGN} -> provider",
        )
        stack.callback(process.stop)
        proxies[(DESIGN, "provider")] = (process, listen)
        direct = {"upstream": upstream_port, "provider": provider_port}
        print(
            textwrap.dedent(f"""\
            Everything on loopback: the upstreams, mitmdump {version("mitmproxy")} in reverse mode with
            addon.py at its defaults, the same mitmdump with a responseheaders hook setting
            flow.response.stream = lambda chunk: chunk (the comparison), and with a callable doing the floor's
            work (cut lines, orjson.loads each data line: the least any analysis adds; for reference), the
            identity callable with what the addon shows of each flow but no analysis (a comment, the
            metadata, one log line: the least an addon that tells each flow in the log costs; for
            reference), and the clients (raw http.client, threads of this process). Each upstream writes
            one event per write, each drained, as providers flush. The proxies run interleaved, {rounds}
            rounds: the identity callable opens and closes each round, the others rotated between. Medians
            over rounds, spread = (max - min) / median; "of identity thr." = the ratio of the two medians;
            "paired" = each round's rate over the mean of the identity callable's two runs around it, the
            median of the rounds' shares (lowest-highest round), which the targets judge by: what drifts
            over a run falls out of it (the identity callable's own row: each round's end over its start,
            the noise that is left). "proxy CPU" = mitmdump's CPU time per event (all its threads,
            /proc/PID/task/*/schedstat), less noisy than wall time on a shared machine. "direct" (no
            proxy) is for scale only.""")
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
            alone_runs: dict[str, list[float]] = {}
            worker_cpu: dict[str, list[float]] = {}
            failures: list[str] = []
            targets = [
                ("addon.py", proxies[("addon.py", source)]),
                ("addon.py, in the proxy", proxies[("addon.py, in the proxy", source)]),
                ("identity callable", proxies[("identity callable", source)]),
                ("floor callable", proxies[("floor callable", source)]),
                ("identity + a line a flow", proxies[("identity + a line a flow", source)]),
                ("core callable", proxies[("core callable", source)]),
                ("core off-process", proxies[("core off-process", source)]),
                *((label, proxies[(label, source)]) for label, _ in WITHOUT if source == "provider"),
                *([(DESIGN, proxies[(DESIGN, source)])] if source == "provider" else []),
                ("direct", (None, direct[source])),
            ]
            for _label, (_process, port) in targets:  # warm-up
                throughput_run(port, bodies[: clients * 2], clients, expected)
            comparison = next(target for target in targets if target[0] == "identity callable")
            others = [target for target in targets if target is not comparison]
            for round_ in range(rounds):
                # The comparison opens and closes each round, the others rotated between: each share is
                # taken against the mean of the two, so what drifts over a round falls out of it.
                turn = round_ % len(others)
                order = [comparison, *others[turn:], *others[:turn], comparison]
                for label, (process, port) in order:
                    cpu0 = cpu_seconds(process.popen.pid) if process else 0.0
                    worker0 = children_cpu_seconds(process.popen.pid) if process else 0.0
                    seconds, events, failed = throughput_run(port, bodies, clients, expected)
                    cpu = (cpu_seconds(process.popen.pid) - cpu0) if process else float("nan")
                    if process and events:
                        worker = children_cpu_seconds(process.popen.pid) - worker0
                        worker_cpu.setdefault(label, []).append(worker / events * 1e6)
                    failures += failed
                    results.setdefault(label, []).append((seconds, events, cpu))
                if source == "upstream":
                    alone_round(long_stream.events, alone_runs)
            rows = []
            summary = {}
            for label, runs in results.items():
                per_second = [events / seconds for seconds, events, _ in runs]
                cpu = [c / events * 1e6 for _, events, c in runs if events]
                med = statistics.median(per_second)
                if not med:  # a proxy that passed nothing (it exited: a script's error at start-up)
                    failures.append(f"{label}: no events in most runs")
                summary[label] = (med, statistics.median(cpu) if cpu else float("nan"))
                rows.append(
                    [
                        label,
                        rate(med),
                        f"{statistics.median(len(bodies) / seconds for seconds, _, _ in runs):.1f}",
                        f"{(max(per_second) - min(per_second)) / med * 100:.0f}%" if med else "-",
                        "-" if label == "direct" else f"{summary[label][1]:.1f}",
                    ]
                )
            bracket = [events / seconds for seconds, events, _ in results["identity callable"]]
            base_rates = [(first + last) / 2 for first, last in zip(bracket[::2], bracket[1::2], strict=True)]
            shares = {  # each round's rate against the identity callable's around it
                label: paired([events / seconds for seconds, events, _ in runs], base_rates)
                for label, runs in results.items()
                if label not in ("direct", "identity callable")
            }
            # The comparison's own row: each round's end against its start, the noise the pairing leaves.
            shares["identity callable"] = paired(bracket[1::2], bracket[::2])
            for row, (label, (med, cpu)) in zip(rows, summary.items()):
                base, base_cpu = summary["identity callable"]
                row.append("-" if label == "direct" or not base else f"{med / base * 100:.0f}%")
                row.append("-" if label == "direct" else shares[label].text())
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
                        "paired (rounds)",
                        "CPU x identity",
                    ],
                    rows,
                )
            )
            if failures:
                print(f"FAILURES ({len(failures)}): {failures[:3]}")
            for off, what in (
                ("addon.py", "addon.py at its defaults (toolcall_lens_worker=true)"),
                ("core off-process", "the bare core (scripts/bench/addons/offproc_stream.py)"),
            ):
                print(
                    f"{off}: {what}: the proxy's thread holds each chunk and ships it, the analysis runs in a "
                    f"worker process, whose CPU is not in the proxy's column: "
                    f"{statistics.median(worker_cpu.get(off, [float('nan')])):.1f} us per event (median of the runs)."
                )
            print(
                "addon.py, in the proxy: toolcall_lens_worker=false: the analysis in the proxy's thread, "
                "fed 32 chunks at a time."
            )
            if source == "provider":
                print(
                    "addon.py without ...: probes (scripts/bench/addons/addon_without.py), the addon at its "
                    "defaults with those parts switched off: what the rest costs. Not configurations to use."
                )
                FINDINGS["proxy/provider/without"] = {label: shares[label] for label, _ in WITHOUT}
                print(
                    f"{DESIGN}: a reference, both scripts in one mitmdump (line_stream.py, then "
                    "offproc_stream.py): the bare core in a worker, and a comment, the metadata and a log line "
                    "a flow. The least an addon that analyses in a worker and tells each flow costs, before "
                    "any of its features."
                )
                FINDINGS["proxy/provider/design"] = shares[DESIGN]
            FINDINGS[f"proxy/{source}/in-proxy"] = shares["addon.py, in the proxy"]
            if source == "upstream":
                core_inside(summary, alone_runs)
                # Where the addon runs its core at its defaults: the worker's whole CPU per event.
                FINDINGS["core in the worker"] = statistics.median(worker_cpu.get("addon.py", [float("nan")]))
            FINDINGS[f"proxy/{source}"] = (
                shares["addon.py"],
                summary["addon.py"][0] / summary["identity callable"][0],
                bool(failures),
                shares["floor callable"],
                shares["identity + a line a flow"],
            )
            if source == "provider":
                per_flow = results["addon.py"][0][1] / len(bodies)
                added = (summary["addon.py"][1] - summary["identity callable"][1]) * per_flow
                addon_parts(direct[source], bodies, clients, expected, added)
                collector(direct[source], bodies, clients, expected, quick)

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
    # The proxies have stopped: what the garbage collector cost inside the core callable's mitmdump.
    for source in ("upstream", "provider"):
        process = proxies[("core callable", source)][0]
        said = said_by(process, "core_stream gc: ")
        print(
            f"garbage collection inside mitmdump with the core callable ({source}, every run above): "
            + (said[-1] if said else "not reported")
        )
        process = proxies[("core off-process", source)][0]
        said = said_by(process, "offproc_stream: ")
        print(f"core off-process ({source}): " + (said[-1] if said else "its worker's results not reported"))
        process = proxies[("identity + a line a flow", source)][0]
        lines = sum(" toolcall-lens POST " in line for line in process.lines)
        print(f"identity + a line a flow ({source}): {lines} log lines written")
    for label, _ in WITHOUT:  # what each probe switched off, and the log lines its flows still got
        process = proxies[(label, "provider")][0]
        said = said_by(process, "addon_without: ")
        lines = [line for line in process.lines if " toolcall-lens POST " in line]
        constant = sum(line.endswith(": a summary") for line in lines)
        errors = sum("Addon error" in line for line in process.lines)  # a probe that broke the addon
        print(
            f"{label} (provider): "
            + ("; ".join(said) if said else "the probe said nothing")
            + f"; {len(lines)} log lines written, {constant} with the constant summary; {errors} addon errors"
        )
    # Both its scripts ran: the worker's results and the log lines of its flows.
    process = proxies[(DESIGN, "provider")][0]
    said = said_by(process, "offproc_stream: ")
    lines = sum(" toolcall-lens POST " in line for line in process.lines)
    print(
        f"{DESIGN} (provider): "
        + (said[-1] if said else "its worker's results not reported")
        + f"; {lines} log lines written"
    )
    bench_long_requests(args)
