"""The command line: which parts to run, how big, how many times; the machine first, the targets table last."""

from __future__ import annotations

import argparse
import time

import bench

from .core import bench_core
from .proxy import bench_proxy
from .report import heading, machine
from .rewrite import bench_rewrite
from .soak import bench_soak
from .targets import print_targets
from .upstream import serve_upstream
from .websocket import bench_websocket


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=bench.__doc__.splitlines()[0])
    parser.add_argument(
        "mode",
        nargs="?",
        default="core",
        choices=("core", "proxy", "rewrite", "soak", "websocket", "all", "_upstream"),
    )
    parser.add_argument(
        "--quick", action="store_true", help="small everything: a smoke run, figures are noise"
    )
    parser.add_argument(
        "--repeats", type=int, default=0, help="timed runs per row (default 7; 2 with --quick)"
    )
    parser.add_argument("--flows", type=int, default=0, help="soak flows (default 10,000; 200 with --quick)")
    args = parser.parse_args(argv)
    if args.mode == "_upstream":
        return serve_upstream()
    heading(
        "toolcall-lens benchmark" + (" (--quick: smoke run, the figures mean little)" if args.quick else "")
    )
    print(machine())
    start = time.perf_counter()
    if args.mode in ("core", "all"):
        bench_core(args)
    if args.mode in ("proxy", "all"):
        bench_proxy(args)
    if args.mode in ("rewrite", "all"):
        bench_rewrite(args)
    if args.mode in ("soak", "all"):
        bench_soak(args)
    if args.mode in ("websocket", "all"):
        bench_websocket(args)
    print_targets()
    print(f"\ntotal time: {time.perf_counter() - start:.0f} s")
    return 0
