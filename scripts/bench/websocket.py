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

from .report import FINDINGS, heading, rate, table
from .traffic import ADDON, ADDONS, cpu_seconds


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
    contenders = {
        "mitmdump, no script": (),
        "mitmdump + an empty websocket_message hook": (ADDONS / "ws_empty.py",),
        "mitmdump + the core alone (Connection)": (ADDONS / "ws_bare.py",),
        "mitmdump + addon": (ADDON,),
    }
    proxies = {}
    try:
        for name, scripts in contenders.items():
            proxies[name] = start_proxy(proxy_argv(provider_port, scripts=scripts), name)
        direct = [ws_run(provider_port, responses) for _ in range(repeats)]
        runs: dict[str, list[tuple[float, int, float]]] = {name: [] for name in contenders}
        for _ in range(repeats):
            for name, (process, port) in proxies.items():  # interleaved: drift hits both alike
                before = cpu_seconds(process.popen.pid)
                seconds, received = ws_run(port, responses)
                runs[name].append((seconds, received, cpu_seconds(process.popen.pid) - before))
    finally:
        for process, _ in proxies.values():
            process.stop()
        provider.stop()
    rows = []
    direct_rate = statistics.median(n / s for s, n in direct)
    rows.append(["direct (no proxy)", rate(direct_rate), "-", "-", "-"])
    base_rate = None
    for name, measured in runs.items():
        per_second = statistics.median(n / s for s, n, _ in measured)
        cpu_us = statistics.median(c / n * 1e6 for _, n, c in measured)
        base_rate = base_rate or per_second
        rows.append(
            [
                name,
                rate(per_second),
                f"{per_second / base_rate * 100:.0f}%",
                f"{cpu_us:.0f}",
                str(measured[0][1]),
            ]
        )
    print(
        table(
            ["path", "messages/s (median)", "vs no script", "proxy CPU us/message", "messages"],
            rows,
            {1, 2, 3, 4},
        )
    )
    with_addon = statistics.median(n / s for s, n, _ in runs["mitmdump + addon"])
    FINDINGS["websocket"] = with_addon / base_rate
