"""The core's cost per event as the number of parallel calls grows (8, 32, 128), beside the floor."""

from __future__ import annotations

from accumulator import DEFAULT_STRATEGIES

from .contenders import core_runner, run_floor
from .measure import Measure, time_runs
from .report import FINDINGS, heading, table
from .streams import expected_calls, make_stream


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
