"""Printing: text tables, headings, units, the machine the figures were taken on, and FINDINGS, which each
part fills for the targets table."""

from __future__ import annotations

import importlib.metadata
import os
import platform
from pathlib import Path


def table(headers: list[str], rows: list[list], right: set[int] | None = None) -> str:
    right = set(range(1, len(headers))) if right is None else right
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row):
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))
        )

    return "\n".join([line(cells[0]), "  ".join("-" * w for w in widths)] + [line(r) for r in cells[1:]])


def heading(text: str) -> None:
    print(f"\n== {text} " + "=" * max(0, 100 - len(text)), flush=True)


def mib(n: float | None) -> str:
    return "-" if n is None else f"{n / 2**20:.2f} MiB"


def kib(n: float | None) -> str:
    if n is None:
        return "-"
    return f"{n / 2**10:.1f} KiB" if n < 10 * 2**20 else mib(n)


def rate(n: float) -> str:
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f}{unit}"
    return f"{n:.0f}"


def version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def machine() -> str:
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next(
        (ln.split(":", 1)[1].strip() for ln in cpuinfo.splitlines() if ln.startswith("model name")), "?"
    )
    mhz = next((ln.split(":", 1)[1].strip() for ln in cpuinfo.splitlines() if ln.startswith("cpu MHz")), "?")
    flags = next((ln.split(":", 1)[1].split() for ln in cpuinfo.splitlines() if ln.startswith("flags")), [])
    meminfo = Path("/proc/meminfo").read_text() if Path("/proc/meminfo").exists() else ""
    total = next((int(ln.split()[1]) * 1024 for ln in meminfo.splitlines() if ln.startswith("MemTotal")), 0)
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    virt = " (virtual machine)" if "hypervisor" in flags else ""
    load = os.getloadavg()
    return "\n".join(
        [
            f"CPU:      {model}, {mhz} MHz{virt}; {os.cpu_count()} logical CPUs, {usable} usable here",
            f"memory:   {total / 2**30:.1f} GiB; load average {' '.join(f'{x:.2f}' for x in load)}",
            f"system:   {platform.system()} {platform.release()} {platform.machine()}",
            f"Python:   {platform.python_implementation()} {platform.python_version()}",
            (
                f"packages: mitmproxy {version('mitmproxy')}, orjson {version('orjson')}, "
                f"openai {version('openai')}, pydantic {version('pydantic')}, "
                f"langchain-core {version('langchain-core')}"
            ),
        ]
    )


def duration(seconds: float) -> str:
    for unit, scale in (("h", 3600), ("min", 60)):
        if seconds >= scale:
            return f"{seconds / scale:.1f} {unit}"
    return f"{seconds:.0f} s"


# Each part records what it measured here, for the targets table.
FINDINGS: dict[str, object] = {}
