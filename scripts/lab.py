"""Start and stop the local pieces of a toolcall-lens setup: the fake provider, and mitmdump with the addon.

Used by the demo and the end-to-end tests. Every process binds port 0 and reports the port it got, runs
in its own session, and is stopped (then killed, if it must be) by ``stop()`` or on leaving a ``with``.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Self

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


class Process:
    """A child process whose output lines are collected in the background (so its pipe never fills)."""

    def __init__(self, name: str, argv: list[str], env: dict | None = None) -> None:
        self.name = name
        self.argv = argv
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self.popen = subprocess.Popen(
            argv,
            cwd=ROOT,
            # Its lines are read as they come (a tool says where it listens): Python must not hold them
            # in a pipe's block buffer, whatever the caller's shell says.
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            start_new_session=True,
        )
        self._pump_thread = threading.Thread(target=self._pump, daemon=True)
        self._pump_thread.start()

    def _pump(self) -> None:
        for line in self.popen.stdout:
            line = line.rstrip("\n")
            self.lines.append(line)
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, pattern: str, timeout: float = 30.0) -> re.Match:
        """The first output line matching ``pattern``; raises with the output so far if none comes."""
        regex = re.compile(pattern)
        for line in self.lines:
            if match := regex.search(line):
                return match
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self._queue.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                break
            if match := regex.search(line):
                return match
        raise RuntimeError(f"{self.name}: no line matching {pattern!r}; output:\n" + "\n".join(self.lines))

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM (mitmdump then closes its dump file), SIGKILL after ``timeout``. Returns the exit code."""
        if self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(5)
        # Its last lines are in ``lines`` once stop returns: the pump reads up to the end of the pipe.
        self._pump_thread.join(5)
        return self.popen.returncode

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def children(pid: int) -> list[int]:
    """The pids of a process's children (an addon's worker process, say), from /proc; [] once it is gone."""
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir() if Path(f"/proc/{pid}").exists() else ():
        try:
            out += [int(child) for child in (task / "children").read_text().split()]
        except OSError:  # a thread that just ended
            pass
    return out


def memory(pid: int, field: str = "VmRSS", with_children: bool = False) -> int:
    """A process's memory in bytes, from /proc (``VmRSS`` now, ``VmHWM`` its peak), with its children's
    (an addon's worker process) when asked; a child that just ended counts nothing."""
    total = 0
    for one in [pid, *(children(pid) if with_children else ())]:
        try:
            status = Path(f"/proc/{one}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith(f"{field}:"):
                total += int(line.split()[1]) * 1024
    return total


def settle(condition, timeout: float = 30.0, what: object = "timed out waiting"):
    """Poll ``condition`` until it gives something truthy, and return that; fail with ``what`` (or what it
    returns, if callable) after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, what() if callable(what) else what
        time.sleep(0.05)
    return value


def start_listening(name: str, argv: list[str], pattern: str) -> tuple[Process, int]:
    """Start it and read the port it got from the first output line matching ``pattern`` (group 1)."""
    process = Process(name, argv)
    try:
        port = int(process.wait_for(pattern).group(1))
    except BaseException:
        process.stop()
        raise
    return process, port


def start_fake_provider(delay: float = 0.02, *extra: str) -> tuple[Process, int]:
    """scripts/fake_provider on 127.0.0.1, a free port, ``delay`` seconds between events; ``extra``: more of
    its options (``--agent-file PATH``)."""
    argv = [sys.executable, str(ROOT / "scripts" / "fake_provider"), "--port", "0", "--delay", str(delay)]
    argv += extra
    return start_listening("fake_provider", argv, r"listening on http://127\.0\.0\.1:(\d+)")


def proxy_argv(
    upstream_port: int | None,
    *options: str,
    tool: str = "mitmdump",
    scripts: tuple = (ROOT / "addon.py",),
    dump: Path | None = None,
) -> list[str]:
    """The command line of a mitmproxy tool on 127.0.0.1, port 0, loading ``scripts``: a reverse proxy in
    front of http://127.0.0.1:``upstream_port`` (a regular proxy when None), each option a ``--set``."""
    argv = [str(BIN / tool)]
    for script in scripts:
        argv += ["-s", str(script)]
    if upstream_port is not None:
        argv += ["--mode", f"reverse:http://127.0.0.1:{upstream_port}"]
    argv += ["--listen-host", "127.0.0.1", "-p", "0", "--set", "termlog_verbosity=info"]
    if dump is not None:
        argv += ["-w", str(dump)]
    for option in options:
        argv += ["--set", option]
    return argv


def start_proxy(argv: list[str], name: str = "mitmdump") -> tuple[Process, int]:
    """Start it and read the port it got from its log."""
    return start_listening(name, argv, r"listening at 127\.0\.0\.1:(\d+)")


def start_mitmdump(upstream_port: int, dump: Path | None = None, *options: str) -> tuple[Process, int]:
    """mitmdump with the addon, as a reverse proxy in front of http://127.0.0.1:``upstream_port``."""
    return start_proxy(proxy_argv(upstream_port, *options, dump=dump))
