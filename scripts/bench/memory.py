"""The memory of one accumulator against the argument bytes it holds: tracemalloc peaks on the small, medium
and large streams, and the marginal cost per argument byte."""

from __future__ import annotations

from accumulator import DEFAULT_STRATEGIES

from .contenders import core_runner
from .measure import traced_peak
from .report import FINDINGS, heading, kib, table
from .streams import make_stream, stream_sizes


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
