"""``toolcall-lens run [OPTIONS] -- AGENT ARGS...``: run an agent behind mitmdump with the addon, then report.

It starts mitmdump (mitmweb with ``--web``) on 127.0.0.1 with the repository's ``addon.py``, runs the agent
with the proxy variables and a CA bundle (``--mode regular``), or captured by PID with mitmproxy's local
capture mode (``--mode local``), waits for it, stops everything it started and prints what the LLM flows
carried. The dump and the JSONL stay in a run folder. docs/cli.md#running-an-agent says it all.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import termios
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import cast

import orjson

from accumulator.cli import CAPS

PROG = "toolcall-lens run"
USAGE = 2
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
# Loopback LLM servers (Ollama, vLLM, the fake provider) must go through the proxy too: NO_PROXY is removed.
BYPASS_VARIABLES = ("NO_PROXY", "no_proxy")
# The variables the common runtimes read a CA bundle from: OpenSSL and Python's ssl (SSL_CERT_FILE),
# requests, curl, Node (added to its own roots), Codex, git, the AWS SDKs, Deno, pip, gRPC, Cargo, Nix.
CA_VARIABLES = (
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "CODEX_CA_CERTIFICATE",
    "GIT_SSL_CAINFO",
    "AWS_CA_BUNDLE",
    "DENO_CERT",
    "PIP_CERT",
    "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH",
    "CARGO_HTTP_CAINFO",
    "NIX_SSL_CERT_FILE",
)
SYSTEM_ROOTS = (
    "/etc/ssl/certs/ca-certificates.crt",  # Debian, Ubuntu, Alpine, Arch
    "/etc/pki/tls/certs/ca-bundle.crt",  # Fedora, RHEL
    "/etc/ssl/cert.pem",  # macOS, BSDs
)
GRACE = 5.0  # seconds an agent gets to end after SIGINT or SIGTERM, before SIGKILL
STARTUP = 60.0  # seconds mitmproxy gets to listen (its first start makes the CA)
CAPTURE_WAIT = 10.0  # seconds an agent in local mode waits for the redirector to capture it
# Local capture mode: mitmproxy starts its redirector with `sudo -n --preserve-env`. Run as root, this
# stand-in runs it directly (no sudo needed), and drops the one line it logs as an error when it cannot
# raise RLIMIT_MEMLOCK (kernels since 5.11 charge BPF memory to the cgroup; the limit no longer matters),
# which would otherwise make mitmdump give up at start-up.
SUDO_STAND_IN = """#!/usr/bin/env bash
while [ $# -gt 0 ]; do case "$1" in -*) shift;; *) break;; esac; done
exec "$@" 2> >(grep --line-buffered -v 'remove limit on locked memory' >&2)
"""
# Local capture mode on a host without cgroup2 at /sys/fs/cgroup (cgroup v1 or hybrid): the redirector
# attaches its eBPF program there, so mitmdump runs in a private mount namespace where it is mounted.
CGROUP2_WRAPPER = 'mount -t cgroup2 none /sys/fs/cgroup && exec "$0" "$@"'
# The agent waits on a pipe until it may start, then becomes the agent (same PID) with the environment written
# to the pipe (the CA bundle exists only once mitmproxy has started). In local mode it first waits until its
# own connections are captured: mitmproxy says "Local redirector started" before the redirector has applied
# the PID it was given (tens of milliseconds later, more on a busy machine), so it connects to a port that
# is bound and not listening: refused while the connection goes straight there, accepted once the
# redirector takes it (mitmproxy then logs that it could not reach that port, and records no flow).
TRAMPOLINE = """import json, os, socket, sys, time
data = b""
while chunk := os.read(int(sys.argv[1]), 65536):
    data += chunk
if not data:
    sys.exit(125)
deadline = time.monotonic() + float(sys.argv[3])
while int(sys.argv[2]) and time.monotonic() < deadline:
    probe = socket.socket()
    try:
        probe.connect(("127.0.0.1", int(sys.argv[2])))
        break
    except OSError:
        time.sleep(0.01)
    finally:
        probe.close()
try:
    os.execvpe(sys.argv[4], sys.argv[4:], json.loads(data))
except OSError as exc:
    print(f"toolcall-lens run: {sys.argv[4]}: {exc.strerror}", file=sys.stderr)
    sys.exit(127)
"""


class RunError(Exception):
    """A problem with the command line or the environment: one line on stderr, exit status 2."""


@dataclass
class Paths:
    folder: Path
    dump: Path
    jsonl: Path
    log: Path
    bundle: Path


@dataclass
class Outcome:
    status: int
    note: str = ""  # why the agent ended, when it did not end by itself
    seconds: float = 0.0  # how long the agent ran
    flows: int = 0
    records: list = field(default_factory=list)


def main(argv: list[str]) -> int:
    try:
        options, agent = _parse(argv)
        return _run(options, agent)
    except RunError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return USAGE


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        usage=f"{PROG} [--mode regular|local [--capture NAME]|transparent] [-w FLOWS] [--jsonl FILE] [--web] "
        "[--timeout S] "
        "-- AGENT ARGS...",
        description="Run an agent behind mitmdump with the toolcall-lens addon, then report on its LLM flows.",
    )
    parser.add_argument(
        "--mode",
        default="regular",
        choices=("regular", "local", "transparent"),
        help="regular: proxy variables and a CA bundle (default); local: mitmproxy's local capture of the "
        "agent's PID (root); transparent: every TCP connection of the agent and its children redirected to "
        "the proxy by an iptables rule on a cgroup of its own (root)",
    )
    parser.add_argument(
        "--capture",
        action="append",
        default=[],
        metavar="NAME",
        help="local mode: also capture processes or threads of this name (an agent that starts its own "
        "children: Codex's npm launcher runs a binary whose sockets open on tokio-rt-worker threads)",
    )
    parser.add_argument("-w", dest="dump", metavar="FLOWS", help="the dump (default: in the run folder)")
    parser.add_argument("--jsonl", metavar="FILE", help="the addon's JSON lines (default: in the run folder)")
    parser.add_argument(
        "--dir",
        metavar="DIR",
        help="the run folder (default: $XDG_CACHE_HOME or ~/.cache, then toolcall-lens/runs/TIME-PID)",
    )
    parser.add_argument(
        "--web", action="store_true", help="mitmweb instead of mitmdump; kept open until Ctrl-C"
    )
    parser.add_argument(
        "--port", type=int, default=0, help="the proxy's port on 127.0.0.1 (default: a free one)"
    )
    parser.add_argument("--timeout", type=float, metavar="S", help="stop the agent after S seconds")
    parser.add_argument(
        "--confdir", metavar="DIR", default="~/.mitmproxy", help="mitmproxy's folder, where its CA is made"
    )
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="passed to mitmproxy"
    )
    return parser


def _parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = _parser()
    if "--" in argv:
        at = argv.index("--")
        own, agent = argv[:at], argv[at + 1 :]
    else:
        # Without `--`, the agent starts at the first word that is not an option of ours.
        own, agent = argv, []
        for i, word in enumerate(argv):
            if not word.startswith("-") and (i == 0 or argv[i - 1] not in _VALUED):
                own, agent = argv[:i], argv[i:]
                break
    options = parser.parse_args(own)
    if not agent:
        parser.error("no agent to run: toolcall-lens run [OPTIONS] -- AGENT ARGS...")
    if options.timeout is not None and options.timeout <= 0:
        parser.error("--timeout takes a number of seconds above 0")
    if options.capture and options.mode != "local":
        parser.error("--capture names what local mode captures: it goes with --mode local")
    if any(not name or "," in name or name.startswith("!") for name in options.capture):
        parser.error("--capture takes a process or thread name (no comma, no leading !)")
    return options, agent


_VALUED = {"--mode", "-w", "--jsonl", "--dir", "--port", "--timeout", "--confdir", "--set", "--capture"}


def _run(options: argparse.Namespace, agent: list[str]) -> int:
    if shutil.which(agent[0]) is None:
        raise RunError(f"{agent[0]}: command not found (or not executable)")
    if options.mode == "local" and (reason := local_mode_unavailable()):
        raise RunError(f"--mode local: {reason}")
    if options.mode == "transparent" and (reason := transparent_mode_unavailable()):
        raise RunError(f"--mode transparent: {reason}")
    tool = _tool("mitmweb" if options.web else "mitmdump")
    addon = addon_path()
    paths = _paths(options)
    confdir = Path(options.confdir).expanduser()

    stopping = _Signals()
    with stopping, socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))  # bound, never listening: see TRAMPOLINE
        agent_process = None
        release = None
        redirect: Redirect | None = None
        if options.mode in ("local", "transparent"):
            # The agent first, held before its first instruction: the redirector is told its PID.
            read_end, release = os.pipe()
            probe_port = probe.getsockname()[1] if options.mode == "local" else 0
            trampoline = [sys.executable, "-c", TRAMPOLINE, str(read_end), str(probe_port), str(CAPTURE_WAIT)]
            agent_process = _start_agent([*trampoline, *agent], os.environ, pass_fds=(read_end,))
            os.close(read_end)
        local_pid = agent_process.pid if agent_process and options.mode == "local" else None
        proxy = Mitmproxy(tool, addon, paths, options, confdir, local_pid)
        try:
            proxy.start(stopping)
            if options.mode == "transparent" and agent_process is not None:  # started above, held
                # The agent's cgroup, and every TCP connection it (or a child) opens sent to the proxy.
                redirect = Redirect(agent_process.pid, proxy.port)
            bundle = ca_bundle(confdir, paths.bundle)
            env = agent_env(os.environ, proxy.port if options.mode == "regular" else None, bundle)
            if agent_process is None:
                agent_process = _start_agent(agent, env)
            elif release is not None:  # always: started held, with the pipe that releases it
                with os.fdopen(release, "wb") as pipe:
                    release = None
                    pipe.write(orjson.dumps(env))
            if proxy.web_url:
                print(f"{PROG}: mitmweb at {proxy.web_url}", file=sys.stderr)
            outcome = _wait(agent_process, options.timeout, stopping)
            if options.web and not stopping.signum:
                print(
                    f"{PROG}: the agent ended; mitmweb stays at {proxy.web_url} until Ctrl-C", file=sys.stderr
                )
                stopping.wait()
        finally:
            if release is not None:
                os.close(release)
            if agent_process is not None:
                _stop_group(agent_process)
            if redirect is not None:
                redirect.remove()
            proxy.stop()
    outcome.records = _read_jsonl(paths.jsonl)
    outcome.flows = _count_flows(paths.dump)
    print(report(outcome, paths, options.mode, cli_flags(options.set)), file=sys.stderr)
    return outcome.status


class _Signals:
    """SIGINT and SIGTERM are noted (not raised) while an agent runs, so everything started is stopped."""

    def __init__(self) -> None:
        self.signum = 0
        self._event = threading.Event()
        self._previous: dict = {}

    def __enter__(self):
        for signum in (signal.SIGINT, signal.SIGTERM):
            self._previous[signum] = signal.signal(signum, self._note)
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _note(self, signum, frame) -> None:
        self.signum = self.signum or signum
        self._event.set()

    def wait(self, timeout: float | None = None) -> bool:
        # Short sleeps: a signal handler runs only between bytecodes of the main thread.
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._event.is_set():
            if deadline is not None and time.monotonic() >= deadline:
                return False
            self._event.wait(0.1)
        return True


class Mitmproxy:
    """mitmdump or mitmweb with the addon on 127.0.0.1, in its own session; its output goes to the log."""

    def __init__(
        self, tool: Path, addon: Path, paths: Paths, options, confdir: Path, pid: int | None
    ) -> None:
        self.paths = paths
        self.port = 0
        self.web_url = ""
        self.popen: subprocess.Popen | None = None
        self._ready = threading.Event()
        self._lines: list[str] = []
        argv = [str(tool), "-s", str(addon), "--listen-host", "127.0.0.1", "-p", str(options.port)]
        argv += ["-w", str(paths.dump), "--set", f"toolcall_lens_jsonl={paths.jsonl}"]
        argv += ["--set", f"confdir={confdir}", "--set", "termlog_verbosity=info"]
        if options.web:
            argv += ["--set", "web_host=127.0.0.1", "--set", f"web_port={_free_port()}"]
            argv += ["--set", "web_open_browser=false"]
        for setting in options.set:
            argv += ["--set", setting]
        # Its output is read line by line as it comes (when it listens): never block-buffered in a pipe.
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.local = pid is not None
        if options.mode == "transparent":
            argv += ["--mode", "transparent"]
        if self.local:
            # The agent's own PID, and any process or thread name asked for (its children, when it has them).
            argv += ["--mode", "local:" + ",".join([str(pid), *options.capture])]
            # The redirector matches PIDs, not ancestry: the agent's descendants are added as they appear.
            # Loaded before addon.py, which refuses a toolcall_lens_ option no script declared.
            argv[1:1] = ["-s", str(Path(__file__).with_name("local_tree.py"))]
            argv += ["--set", f"toolcall_lens_local_tree={pid}"]
            shim = paths.folder / "bin"
            shim.mkdir(exist_ok=True)
            (shim / "sudo").write_text(SUDO_STAND_IN)
            (shim / "sudo").chmod(0o700)
            self.env["PATH"] = f"{shim}{os.pathsep}{self.env.get('PATH', '')}"
            if not cgroup2_at_root():
                argv = ["unshare", "-m", "--propagation", "private", "sh", "-c", CGROUP2_WRAPPER, *argv]
        self.argv = argv

    def start(self, stopping: _Signals) -> None:
        # The pump thread owns it from here, and closes it when mitmproxy's output ends.
        log = open(self.paths.log, "w", encoding="utf-8", errors="replace")  # noqa: SIM115
        try:
            self.popen = subprocess.Popen(
                self.argv,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                bufsize=1,
                start_new_session=True,
            )
        except OSError as exc:
            log.close()
            raise RunError(f"could not start {self.argv[0]}: {exc.strerror}") from None
        threading.Thread(target=self._pump, args=(log,), daemon=True).start()
        deadline = time.monotonic() + STARTUP
        while not self._ready.wait(0.1):
            if self.popen.poll() is not None or stopping.signum or time.monotonic() > deadline:
                break
        if not self._ready.is_set():
            if self.popen.poll() is not None:
                time.sleep(0.2)  # the pump reads the last lines
            why = self._why_not_started(stopping)
            self.stop()
            raise RunError(why)

    def _pump(self, log) -> None:
        with log:
            popen = self.popen
            if popen is None or popen.stdout is None:  # never: it starts once mitmproxy runs, piped
                return
            for line in popen.stdout:
                log.write(line)
                log.flush()
                line = line.rstrip("\n")
                if len(self._lines) < 200:
                    self._lines.append(line)
                if not self._ready.is_set():
                    self._check_ready(line)

    def _check_ready(self, line: str) -> None:
        if "Web server listening at " in line:
            self.web_url = line.split("Web server listening at ", 1)[1].strip()
        if self.local and "Local redirector started" in line:
            self._ready.set()
        elif not self.local and "listening at 127.0.0.1:" in line:
            self.port = int(line.rsplit(":", 1)[1].split()[0].rstrip("."))
        if self.port and (self.web_url or "mitmweb" not in Path(self.argv[0]).name):
            self._ready.set()

    def _why_not_started(self, stopping: _Signals) -> str:
        popen = cast("subprocess.Popen[str]", self.popen)  # asked once mitmproxy was started
        text = "\n".join(self._lines)
        name = Path(self.argv[0]).name if self.argv[0] != "unshare" else "mitmdump"
        if stopping.signum:
            return "interrupted while the proxy started"
        if "Address already in use" in text or "address already in use" in text:
            return f"port {self._port_option()} on 127.0.0.1 is already taken (--port)"
        if popen.poll() is None:
            return f"{name} did not start listening within {STARTUP:.0f} s (its log: {self.paths.log})"
        lines = [line for line in self._lines if line.strip() and not line.startswith(" ")]
        last = lines[-1] if lines else f"exit status {popen.returncode}"
        return f"{name} stopped at start-up: {last} (its log: {self.paths.log})"

    def _port_option(self) -> str:
        return self.argv[self.argv.index("-p") + 1]

    def stop(self) -> None:
        if self.popen is None or self.popen.poll() is not None:
            return
        _signal_group(self.popen.pid, signal.SIGTERM)  # mitmdump then closes its dump file
        try:
            self.popen.wait(15)
        except subprocess.TimeoutExpired:
            _signal_group(self.popen.pid, signal.SIGKILL)
            self.popen.wait(5)


def _start_agent(argv: list[str], env, pass_fds=()) -> subprocess.Popen:
    try:
        process = subprocess.Popen(argv, env=env, process_group=0, pass_fds=pass_fds)
    except OSError as exc:
        raise RunError(f"{argv[0]}: {exc.strerror}") from None
    _give_terminal(process.pid)
    return process


def _give_terminal(pgid: int) -> None:
    """An interactive agent reads the terminal and gets its Ctrl-C: its group becomes the foreground one."""
    try:
        if not os.isatty(sys.stdin.fileno()) or os.tcgetpgrp(sys.stdin.fileno()) != os.getpgrp():
            return
        previous = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
        try:
            os.tcsetpgrp(sys.stdin.fileno(), pgid)
        finally:
            signal.signal(signal.SIGTTOU, previous)
    except (OSError, ValueError, termios.error):
        pass


def _take_terminal_back() -> None:
    try:
        if not os.isatty(sys.stdin.fileno()):
            return
        previous = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
        try:
            os.tcsetpgrp(sys.stdin.fileno(), os.getpgrp())
        finally:
            signal.signal(signal.SIGTTOU, previous)
    except (OSError, ValueError, termios.error):
        pass


def _wait(agent: subprocess.Popen, timeout: float | None, stopping: _Signals) -> Outcome:
    started = time.monotonic()
    outcome = _wait_for(agent, timeout, stopping)
    outcome.seconds = time.monotonic() - started
    return outcome


def _wait_for(agent: subprocess.Popen, timeout: float | None, stopping: _Signals) -> Outcome:
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        try:
            status = agent.wait(0.1)
            break
        except subprocess.TimeoutExpired:
            pass
        if stopping.signum:
            _signal_group(agent.pid, stopping.signum)  # as a shell would pass Ctrl-C on
            status = _end(agent)
            name = signal.Signals(stopping.signum).name
            return Outcome(128 + stopping.signum, f"{name} received: the agent was stopped")
        if deadline is not None and time.monotonic() >= deadline:
            _signal_group(agent.pid, signal.SIGTERM)
            _end(agent)
            return Outcome(124, f"the agent was still running after --timeout {timeout:g} s: stopped")
    _take_terminal_back()
    return Outcome(128 - status if status < 0 else status)


def _end(agent: subprocess.Popen) -> int:
    try:
        return agent.wait(GRACE)
    except subprocess.TimeoutExpired:
        _signal_group(agent.pid, signal.SIGKILL)
        return agent.wait(5)
    finally:
        _take_terminal_back()


def _stop_group(agent: subprocess.Popen) -> None:
    """What the agent left running in its process group is stopped too: TERM, then KILL."""
    if agent.poll() is None:
        _signal_group(agent.pid, signal.SIGTERM)
        _end(agent)
    if _signal_group(agent.pid, signal.SIGTERM):
        deadline = time.monotonic() + GRACE
        while time.monotonic() < deadline and _signal_group(agent.pid, 0):
            time.sleep(0.1)
        _signal_group(agent.pid, signal.SIGKILL)


def _signal_group(pgid: int, signum: int) -> bool:
    try:
        os.killpg(pgid, signum)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def agent_env(base, proxy_port: int | None, bundle: Path) -> dict:
    """The agent's environment: the proxy variables (regular mode), no NO_PROXY, the CA bundle everywhere."""
    env = dict(base)
    if proxy_port is not None:
        url = f"http://127.0.0.1:{proxy_port}"
        for name in PROXY_VARIABLES:
            env[name] = url
        for name in BYPASS_VARIABLES:
            env.pop(name, None)
        env["NODE_USE_ENV_PROXY"] = "1"  # Node 24+: its built-in fetch then honours HTTP(S)_PROXY
    for name in CA_VARIABLES:
        env[name] = str(bundle)
    return env


def ca_bundle(confdir: Path, target: Path, wait: float = 10.0) -> Path:
    """The system's roots and mitmproxy's CA in one file (SSL_CERT_FILE replaces the roots, not adds)."""
    ca = confdir / "mitmproxy-ca-cert.pem"
    deadline = time.monotonic() + wait
    while not ca.exists():  # mitmproxy makes it on its first start, before it listens
        if time.monotonic() > deadline:
            raise RunError(f"mitmproxy made no CA certificate at {ca}")
        time.sleep(0.1)
    roots = b""
    for candidate in (ssl.get_default_verify_paths().cafile, *SYSTEM_ROOTS):
        if candidate and os.path.isfile(candidate):
            roots = Path(candidate).read_bytes()
            break
    target.write_bytes(roots.rstrip(b"\n") + b"\n" + ca.read_bytes() if roots else ca.read_bytes())
    return target


def local_mode_unavailable() -> str | None:
    """Why mitmproxy's local capture mode cannot run here, or None."""
    if sys.platform != "linux":
        return "this command drives local capture on Linux only"
    if os.geteuid() != 0:
        return "needs root (mitmproxy loads an eBPF program and mounts cgroup2): run it as root"
    if shutil.which("unshare") is None and not cgroup2_at_root():
        return "needs unshare (util-linux) to mount cgroup2 in a private mount namespace"
    redirector = Path(sys.executable).parent / "mitmproxy-linux-redirector"
    if not redirector.exists() and shutil.which("mitmproxy-linux-redirector") is None:
        return "mitmproxy-linux-redirector is not installed (pip install mitmproxy-linux)"
    # Anything else the kernel refuses (no eBPF, no TUN) stops mitmdump at start-up: its line is shown.
    return None


class Redirect:
    """Transparent mode without a namespace: the agent's process in a cgroup of its own (cgroup v2; its
    children inherit it), and an iptables rule sending every TCP connection opened from that cgroup to the
    proxy's port (REDIRECT maps locally made connections to 127.0.0.1; the proxy reads where each was
    going). Nothing else on the machine is touched; ``remove`` undoes both."""

    def __init__(self, pid: int, port: int) -> None:
        self.root = cgroup2_mount()
        self.name = f"toolcall-lens-{os.getpid()}-{pid}"
        self.rule = ["-t", "nat", "-A", "OUTPUT", "-p", "tcp", "-m", "cgroup", "--path", self.name]
        self.rule += ["-j", "REDIRECT", "--to-ports", str(port)]
        self.folder = self.root / self.name
        self.folder.mkdir()
        try:
            _iptables(self.rule)
        except RunError:
            self.folder.rmdir()
            raise
        self.added = True
        (self.folder / "cgroup.procs").write_text(str(pid))

    def remove(self) -> None:
        if self.added:
            self.added = False
            with contextlib.suppress(RunError):
                _iptables(["-D" if part == "-A" else part for part in self.rule])
        for _ in range(50):  # the agent's processes are gone or going: the folder empties
            try:
                self.folder.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.1)


def _iptables(arguments: list[str]) -> None:
    done = subprocess.run(["iptables", *arguments], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RunError(f"iptables {' '.join(arguments)}: {done.stderr.strip() or done.returncode}")


def cgroup2_mount() -> Path:
    """Where the cgroup v2 hierarchy is mounted (at the root, or beside v1 as "unified")."""
    for line in Path("/proc/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) > 2 and fields[2] == "cgroup2":
            return Path(fields[1])
    raise RunError("no cgroup v2 hierarchy is mounted")


def transparent_mode_unavailable() -> str | None:
    """Why this command cannot drive transparent mode here, or None."""
    if sys.platform != "linux":
        return "this command drives transparent mode on Linux only"
    if os.geteuid() != 0:
        return "needs root (an iptables rule and a cgroup of the agent's own): run it as root"
    if shutil.which("iptables") is None:
        return "needs iptables (apt-get install iptables)"
    try:
        cgroup2_mount()
    except RunError as exc:
        return f"needs the cgroup v2 hierarchy: {exc}"
    return None


def cgroup2_at_root() -> bool:
    return os.path.exists("/sys/fs/cgroup/cgroup.controllers")


def addon_path() -> Path:
    """The repository's addon.py, next to this package (an editable install points into the checkout)."""
    path = Path(__file__).resolve().parents[1] / "addon.py"
    if not path.is_file():
        raise RunError(f"no addon.py at {path}: install the repository itself (pip install -e .)")
    return path


def _tool(name: str) -> Path:
    here = Path(sys.executable).parent / name
    if here.exists():
        return here
    found = shutil.which(name)
    if found is None:
        raise RunError(f"{name} is not installed next to {sys.executable} nor on PATH")
    return Path(found)


def _paths(options) -> Paths:
    if options.dir:
        folder = Path(options.dir).expanduser()
    else:
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        folder = cache / "toolcall-lens" / "runs" / f"{stamp}-{os.getpid()}"
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise RunError(f"cannot make the run folder {folder}: {exc.strerror}") from None
    dump = Path(options.dump).expanduser() if options.dump else folder / "session.flows"
    jsonl = Path(options.jsonl).expanduser() if options.jsonl else folder / "llm.jsonl"
    for path in (dump, jsonl):
        if not path.parent.is_dir():
            raise RunError(f"no folder {path.parent} for {path}")
    return Paths(
        folder, dump.absolute(), jsonl.absolute(), folder / "mitmproxy.log", folder / "ca-bundle.pem"
    )


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _read_jsonl(path: Path) -> list[dict]:
    records: list[dict] = []
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return records
    for line in data.splitlines():
        try:
            records.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            pass
    return records


def _count_flows(path: Path) -> int:
    from mitmproxy import io as mio
    from mitmproxy.exceptions import FlowReadException

    count = 0
    try:
        with open(path, "rb") as f:
            for _ in mio.FlowReader(f).stream():
                count += 1
    except (FileNotFoundError, FlowReadException):
        pass
    return count


# The addon's options the CLI has as flags (toolcall_lens_event_cap is --event-cap): its commands
# re-analyse the dump as the proxy analysed it.
_CLI_FLAGS = {
    "toolcall_lens_" + flag[2:].replace("-", "_"): flag
    for flag in (*(cap[0] for cap in CAPS), "--strategies", "--loop-after", "--prices")
}


def cli_flags(settings: list[str]) -> str:
    """The CLI's flags for the ``--set NAME=VALUE`` given to the proxy: the last value of an option, every
    value of the strategies (mitmproxy collects a list option's ``--set``s), shell-quoted."""
    values: dict[str, list[str]] = {}
    for setting in settings:
        name, _, value = setting.partition("=")
        if name.strip() in _CLI_FLAGS:
            values.setdefault(name.strip(), []).append(value.strip())
    flags = []
    for name, given in values.items():
        if name == "toolcall_lens_strategies":
            value = ",".join(v for v in given if v) or "none"
        else:
            value = given[-1]
        flags += [_CLI_FLAGS[name], shlex.quote(value)]
    return "".join(f" {flag}" for flag in flags)


def report(outcome: Outcome, paths: Paths, mode: str, flags: str = "") -> str:
    """What the LLM flows carried: one block per response, its calls, its warnings; then where it is kept.
    ``flags``: the CLI's flags that give the options the proxy ran with."""
    from accumulator.report import cost_line, evidence_line, session_line, summary_line, tokens_line

    lines = [f"== {PROG}: {len(outcome.records)} LLM response(s) in {outcome.flows} flow(s) =="]
    if outcome.note:
        lines.append(outcome.note)
    for record in outcome.records:
        result = record.get("result") or {}
        where = record.get("url") or "?"
        if record.get("transport") == "websocket":
            where += f" (WebSocket response {record.get('position')})"
        lines.append(
            f"{record.get('method', '')} {where}  {record.get('status') or record.get('error') or ''}"
        )
        if not result:
            continue
        lines.append(f"  {summary_line(result)}")
        if type(result.get("usage")) is dict and "input" in result["usage"]:
            lines.append(f"  {tokens_line(result['usage'])}; {cost_line(result)}")
        if result.get("session"):
            lines.append(f"  {session_line(result['session'])}")
        for choice in result.get("choices", ()):
            for call in choice.get("tool_calls", ()):
                arguments = call.get("arguments") or ""
                if len(arguments) > 200:
                    arguments = arguments[:200] + "…"
                if call.get("custom"):  # a custom tool's input, a patch: on its call's line
                    arguments = "(custom) " + arguments.replace("\n", "\\n")
                where = f"  namespace={call['namespace']}" if call.get("namespace") else ""
                lines.append(
                    f"  [{call.get('index')}] {call.get('name') or '?'}  id={call.get('id')}{where}  {arguments}"
                )
        for warning in result.get("warnings", ()):
            lines.append(f"  {warning['severity'].upper()} {warning['code']}: {warning.get('message', '')}")
        if result.get("evidence"):  # checked and right, or why it could not be checked
            lines.append(f"  {evidence_line(result['evidence'])}")
        if (result.get("websocket") or {}).get("evidence"):
            said = result["websocket"]["evidence"]
            lines.append(
                "  evidence: the client answered "
                + (", ".join(said["answered"]) or "nothing")
                + (f"; UNANSWERED {', '.join(said['unanswered'])}" if said["unanswered"] else "")
            )
    if outcome.flows == 0:
        if mode == "transparent":
            lines.append("no flow was captured: the agent opened no TCP connection")
        elif mode == "local":
            lines.append(
                "no flow was captured: neither the agent nor a process it started opened a TCP connection "
                "the redirector took (a child that connects within milliseconds of starting can be missed: "
                "name it with --capture, or use --mode transparent)"
            )
        elif outcome.status != 0 and not outcome.note:
            lines.append(
                f"no flow went through the proxy: the agent ended with status {outcome.status} after "
                f"{outcome.seconds:.1f} s without a request through it (its own output above says why)"
            )
        else:
            lines.append(
                "no flow went through the proxy: the agent ignored HTTP_PROXY/HTTPS_PROXY (or made no "
                "request); try --mode local, or a reverse mode (docs/proxy.md)"
            )
    elif not outcome.records:
        lines.append("no flow was an LLM exchange the addon recognised (docs/formats.md lists the paths)")
    lines.append(f"dump: {paths.dump}")
    lines.append(f"JSON lines: {paths.jsonl}")
    lines.append(f"full report: toolcall-lens {paths.dump}{flags}")
    lines.append(f"turn by turn: toolcall-lens sessions {paths.dump}{flags}")
    return "\n".join(lines)
