"""The benchmark's side of the wire: mitmdump started with the scripts a part needs, the requests its clients
send, and what a process costs (CPU time of all its threads, resident memory)."""

from __future__ import annotations

import contextlib
import http.client
from pathlib import Path

from lab import children, proxy_argv, start_proxy

ADDONS = Path(__file__).resolve().parent / "addons"
ADDON = Path(__file__).resolve().parents[2] / "addon.py"


def start_mitmdump(
    upstream_port: int | None, *scripts: Path, name: str = "mitmdump", options: tuple[str, ...] = ()
):
    """mitmdump in reverse mode in front of 127.0.0.1:``upstream_port`` (None: a regular proxy), with the
    scripts given and each of ``options`` as a ``--set``."""
    return start_proxy(proxy_argv(upstream_port, *options, scripts=scripts), name)


HEADERS = {
    "Content-Type": "application/json",
    "Authorization": "Bearer sk-bench-not-a-key",
    "X-Fake-Delay": "0",
}


def post(
    conn: http.client.HTTPConnection,
    body: bytes,
    headers: dict | None = None,
    url: str = "/v1/chat/completions",
) -> bytes:
    conn.request("POST", url, body, headers or HEADERS)
    response = conn.getresponse()
    data = response.read()
    if response.status != 200:
        raise RuntimeError(f"status {response.status}: {data[:200]!r}")
    return data


def cpu_seconds(pid: int) -> float:
    """CPU time of every thread of the process, from schedstat (nanoseconds; /proc/PID/stat counts ticks)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that just ended
            total += int((task / "schedstat").read_text().split()[0])
    return total / 1e9


def children_cpu_seconds(pid: int) -> float:
    """CPU time of the process's children (their threads, as ``cpu_seconds``): an addon's worker process."""
    total = 0.0
    for child in children(pid):
        with contextlib.suppress(OSError):  # a child that just ended
            total += cpu_seconds(child)
    return total
