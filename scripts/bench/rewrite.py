"""The stream rewriter's cost per event (toolcall_lens_inject / _repair), fed one event at a time as the addon
feeds it, beside the floor and the core's analysis."""

from __future__ import annotations

from accumulator import DEFAULT_STRATEGIES

from .contenders import core_runner, run_floor
from .measure import time_runs
from .report import heading, rate, table
from .streams import make_stream, stream_sizes


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
