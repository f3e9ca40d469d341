"""WebSocket messages through a real mitmdump, with the addon and without any script, side by side: the
fake provider's Responses WebSocket mode bursting (X-Fake-Delay 0, every response.create queued at
once), one client connection per run, runs interleaved. mitmproxy holds each message until the
``websocket_message`` hook returns, so what the addon costs per message is what the client waits."""

from __future__ import annotations

import json
import statistics
import time

from lab import proxy_argv, start_fake_provider, start_proxy
from websockets.sync.client import connect

from .measure import paired
from .report import FINDINGS, heading, rate, table
from .traffic import ADDON, ADDONS, children_cpu_seconds, cpu_seconds


def ws_run(port: int, responses: int) -> tuple[float, int]:
    """One connection: ``responses`` response.create messages sent at once, every event read. Returns
    (seconds from the first send to the last event, messages received)."""
    create = json.dumps({"type": "response.create", "model": "interleaved"})
    with connect(
        f"ws://127.0.0.1:{port}/v1/responses",
        additional_headers={"X-Fake-Delay": "0"},
        compression=None,
        max_size=None,
    ) as ws:
        start = time.perf_counter()
        for _ in range(responses):
            ws.send(create)
        received = done = 0
        while done < responses:
            message = ws.recv(timeout=60)
            received += 1
            if '"response.completed"' in message:
                done += 1
        return time.perf_counter() - start, received


def bench_websocket(args) -> None:
    responses = 20 if args.quick else 300
    repeats = args.repeats or (2 if args.quick else 7)
    heading(f"WebSocket: messages per second through mitmdump ({responses} responses a connection)")
    provider, provider_port = start_fake_provider(delay=0)
    contenders = {  # scripts, options
        "mitmdump, no script": ((), ()),
        "mitmdump + an empty websocket_message hook": ((ADDONS / "ws_empty.py",), ()),
        "mitmdump + the core alone (Connection)": ((ADDONS / "ws_bare.py",), ()),
        "mitmdump + addon": ((ADDON,), ()),
        "mitmdump + addon, in the proxy": ((ADDON,), ("toolcall_lens_worker=false",)),
    }
    proxies = {}
    try:
        for name, (scripts, options) in contenders.items():
            proxies[name] = start_proxy(proxy_argv(provider_port, *options, scripts=scripts), name)
        direct = [ws_run(provider_port, responses) for _ in range(repeats)]
        runs: dict[str, list[tuple[float, int, float, float]]] = {name: [] for name in contenders}
        base, *others = list(proxies)
        for round_ in range(repeats):
            # Interleaved: "no script" opens and closes each round (its mean is what each share is taken
            # against, so what drifts over a round falls out), the others rotated between.
            turn = round_ % len(others)
            for name in [base, *others[turn:], *others[:turn], base]:
                process, port = proxies[name]
                before = cpu_seconds(process.popen.pid), children_cpu_seconds(process.popen.pid)
                seconds, received = ws_run(port, responses)
                after = cpu_seconds(process.popen.pid), children_cpu_seconds(process.popen.pid)
                runs[name].append((seconds, received, after[0] - before[0], after[1] - before[1]))
    finally:
        for process, _ in proxies.values():
            process.stop()
        provider.stop()
    rows = []
    direct_rate = statistics.median(n / s for s, n in direct)
    rows.append(["direct (no proxy)", rate(direct_rate), "-", "-", "-", "-", "-"])
    base_rate = None
    shares = {}
    bracket = [n / s for s, n, _, _ in runs[base]]
    base_rates = [(first + last) / 2 for first, last in zip(bracket[::2], bracket[1::2], strict=True)]
    for name, measured in runs.items():
        per_second = statistics.median(n / s for s, n, _, _ in measured)
        cpu_us = statistics.median(c / n * 1e6 for _, n, c, _ in measured)
        worker_us = statistics.median(w / n * 1e6 for _, n, _, w in measured)
        base_rate = base_rate or per_second
        rates = [n / s for s, n, _, _ in measured]
        shares[name] = paired(bracket[1::2], bracket[::2]) if name == base else paired(rates, base_rates)
        rows.append(
            [
                name,
                rate(per_second),
                f"{per_second / base_rate * 100:.0f}%",
                shares[name].text(),
                f"{cpu_us:.0f}",
                f"{worker_us:.0f}" if worker_us else "-",
                str(measured[0][1]),
            ]
        )
    print(
        table(
            [
                "path",
                "messages/s (median)",
                "vs no script",
                "paired (rounds)",
                "proxy CPU us/message",
                "worker CPU",
                "messages",
            ],
            rows,
            {1, 2, 3, 4, 5, 6},
        )
    )
    print(
        '"vs no script": the ratio of the medians; "paired": each round\'s rate over the mean of the two runs of '
        '"no script" that open and close the round, the median of the rounds\' shares (lowest-highest round), '
        "which the targets judge by (no script's own row: each round's end over its start)."
    )
    FINDINGS["websocket"] = shares["mitmdump + addon"]
    FINDINGS["websocket/in-proxy"] = shares["mitmdump + addon, in the proxy"]
