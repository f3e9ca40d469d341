"""A probe of the benchmark, loaded after the proxy's own scripts: the garbage collector's work in mitmdump,
by generation. Each collection's thread CPU is taken from ``gc.callbacks``; after the first
``collector_after`` flows (a warm-up), the collections a flow and their CPU a flow are counted, and printed
at the end as one line::

    collector: FLOWS flows; collections a flow Y M F; us a flow Y M F

(Y, M, F: the youngest generation, the middle one, the full collections.)

    mitmdump -s scripts/bench/addons/identity_stream.py -s scripts/bench/addons/collector.py \
        --mode reverse:http://127.0.0.1:PORT
"""

from __future__ import annotations

import gc
import time

from mitmproxy import ctx


class Collector:
    def __init__(self) -> None:
        self.flows = 0
        self.counted_from: list[int] | None = None  # each generation's collections when counting began
        self.after = 0  # the flows seen when counting began
        self.spent = [0, 0, 0]
        self.started: int | None = None

    def load(self, loader) -> None:
        loader.add_option("collector_after", int, 100, "Flows of warm-up before the collector is counted.")

    def running(self) -> None:
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self.started = time.thread_time_ns()
        elif self.started is not None and self.counted_from is not None:
            self.spent[info["generation"]] += time.thread_time_ns() - self.started

    def response(self, flow) -> None:
        self.flows += 1
        if self.flows == ctx.options.collector_after:
            self.counted_from = [generation["collections"] for generation in gc.get_stats()]
            self.spent = [0, 0, 0]
            self.after = self.flows

    def done(self) -> None:
        if self.counted_from is None:
            print("collector: too few flows to count", flush=True)
            return
        flows = max(self.flows - self.after, 1)
        collections = [s["collections"] - c for s, c in zip(gc.get_stats(), self.counted_from, strict=True)]
        print(
            f"collector: {flows} flows; collections a flow "
            + " ".join(f"{c / flows:.4f}" for c in collections)
            + "; us a flow "
            + " ".join(f"{ns / flows / 1000:.1f}" for ns in self.spent),
            flush=True,
        )


addons = [Collector()]
