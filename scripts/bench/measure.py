"""Measuring one contender: timed runs after a warm-up, the tracemalloc peak of one run, and the
medians, spreads and quantiles the tables print."""

from __future__ import annotations

import dataclasses
import gc
import statistics
import time
import tracemalloc
from collections.abc import Callable


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


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


@dataclasses.dataclass(frozen=True)
class Paired:
    """One contender's rate as a share of the comparison's, round by round: each round runs both within
    seconds of each other, so what drifts over a run (the machine's other load, its clock) moves both
    alike and falls out of the ratio; a ratio of the two medians mixes rounds far apart."""

    shares: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.shares)

    @property
    def low(self) -> float:
        return min(self.shares)

    @property
    def high(self) -> float:
        return max(self.shares)

    def text(self) -> str:
        """'85% (81-88)': the median share and the lowest and highest round's, in percent."""
        return f"{self.median * 100:.0f}% ({self.low * 100:.0f}-{self.high * 100:.0f})"


def paired(rates: list[float], base_rates: list[float]) -> Paired:
    """The shares of ``rates`` in ``base_rates``, round by round (the two lists in the same rounds' order)."""
    if len(rates) != len(base_rates):
        raise ValueError(f"{len(rates)} rounds against {len(base_rates)}: not paired")
    return Paired(tuple(rate / base for rate, base in zip(rates, base_rates, strict=True) if base))
