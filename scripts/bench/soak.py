"""Many flows through one mitmdump with the addon: resident memory sampled as they go, and the live
per-flow state (watches, accumulators, echo index) at the end, read by the bench_state addon."""

from __future__ import annotations

import contextlib
import http.client
import itertools
import json
import textwrap
import threading
import time

from lab import memory, start_fake_provider

from .addons.bench_state import STATE_PATH
from .report import FINDINGS, heading, mib, table
from .streams import chat_body
from .traffic import ADDON, ADDONS, HEADERS, post, start_mitmdump
from .upstream import start_upstream


def bench_soak(args) -> None:
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
        accumulators alive (StreamAccumulator objects in the proxy's heap; at the defaults they live in the
        analysis worker, whose memory is in the RSS), flows alive (HTTPFlow objects in the heap),
        annotated (flows the addon annotated), objects (every object mitmdump's garbage collector follows,
        after a collection: a leak of small objects shows here first). RSS = mitmdump's VmRSS with its
        analysis worker's. Sampled
        every {every} flows while the other clients keep going (so a few flows are in flight), and once
        more when all are done.""")
    )
    with contextlib.ExitStack() as stack:
        provider, provider_port = start_fake_provider(delay=0)
        stack.callback(provider.stop)
        upstream, upstream_port = start_upstream()
        stack.callback(upstream.stop)
        proxy, port = start_mitmdump(None, ADDON, ADDONS / "bench_state.py")
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

        samples = [(0, memory(pid, with_children=True), state(), 0.0)]
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
                        samples.append(
                            (
                                done[0],
                                memory(pid, with_children=True),
                                state(),
                                time.perf_counter() - start,
                            )
                        )
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
        samples.append((done[0], memory(pid, with_children=True), final, elapsed))
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
                s["objects"],
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
                    "objects",
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
        kept = samples[-1][2]["objects"] - half[2]["objects"]
        print(
            f"objects the collector follows, from {half[0]} to {samples[-1][0]} flows: {kept:+d} "
            f"({kept / max(1, samples[-1][0] - half[0]):+.2f} a flow; flows in flight at the first)"
        )
        FINDINGS["soak"] = {
            "final": final,
            "growth": growth,
            "objects": kept,
            "half": half[0],
            "flows": done[0],
            "failures": len(failures),
            "quick": args.quick,
        }
