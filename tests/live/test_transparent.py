"""docs/proxy.md's transparent-mode recipe, read from the page and run as written (the namespace's name,
the paths and the agent swapped): a network namespace of its own (loopback only), an iptables
REDIRECT rule that sends every TCP connection but the proxy's own (by owner: uid 0) to mitmdump in
transparent mode, the fake provider in the namespace, a client as another user (nobody): its flow is
rebuilt. Skipped, saying why, where the namespace, iptables or the user switch are not allowed."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from doc_commands import SH_BLOCK
from lab import BIN, ROOT, Process
from mitmproxy import io as mio

NOBODY = 65534
PROXY_PORT = 8080  # the namespace is the test's own: nothing else listens in it
CLIENT = """
import json, sys, urllib.request
body = json.dumps({"model": "interleaved", "stream": True, "messages": [{"role": "user", "content": "hi"}]})
request = urllib.request.Request(f"http://127.0.0.1:{sys.argv[1]}/v1/chat/completions", body.encode(),
                                 {"Content-Type": "application/json"})
print(len(urllib.request.urlopen(request, timeout=30).read()))
"""
# The client runs as nobody, who cannot read root's pyenv: the system's Python (any 3.x has urllib).
SYSTEM_PYTHON = next(
    (p for p in ("/usr/bin/python3", "/usr/local/bin/python3") if os.access(p, os.X_OK)), None
)


def _sh(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, check=False)


# ip and iptables are parts .ci/run installs (the `needs` mark: fails in CI without them); root and what the
# kernel allows are not (a plain skip, with the reason).
MISSING = [tool for tool in ("ip", "iptables", "setpriv") if shutil.which(tool) is None]
AS_ROOT = sys.platform == "linux" and os.geteuid() == 0


def _problem() -> str | None:
    if not AS_ROOT:
        return "needs root on Linux (ip netns, iptables)"
    if MISSING:
        return None  # the needs mark says it
    if SYSTEM_PYTHON is None:
        return "no system python3 the user nobody can run"
    name = f"tl-probe-{os.getpid()}"
    made = _sh("ip", "netns", "add", name)
    if made.returncode != 0:
        return f"cannot create a network namespace: {made.stderr.strip()}"
    try:
        rule = _sh("ip", "netns", "exec", name, "iptables", "-t", "nat", "-L", "OUTPUT")
        if rule.returncode != 0:
            return f"iptables' nat table is not usable in a namespace: {rule.stderr.strip()}"
    finally:
        _sh("ip", "netns", "del", name)
    return None


PROBLEM = _problem()


def recipe() -> list[list[str]]:
    """docs/proxy.md's transparent-mode commands, as a user pastes them, `sudo` aside (the test is root)."""
    text = (ROOT / "docs" / "proxy.md").read_text()
    block = SH_BLOCK.search(text, text.index("## Transparent mode")).group(1)
    out = []
    for line in block.splitlines():
        command: list[str] = []
        for word in [*shlex.split(line), "&&"]:  # `a && b` is two commands
            if word != "&&":
                command.append(word)
            elif command:
                out.append(command[1:] if command[0] == "sudo" else command)
                command = []
    return out


@pytest.fixture
def namespace():
    name = f"tl-test-{os.getpid()}"
    try:
        yield name
    finally:
        for pid in _sh("ip", "netns", "pids", name).stdout.split():
            try:
                os.kill(int(pid), 9)
            except ProcessLookupError:
                pass
        _sh("ip", "netns", "del", name)


def localized(words: list[str], namespace: str, dump: Path, port: int) -> list[str]:
    """A recipe line with the test's namespace, the venv's mitmdump, the repository's addon, a temporary
    dump and, for the agent, a client of the fake provider on ``port``."""
    out = []
    for previous, word in zip([None, *words], words, strict=False):
        if word == "lens":
            word = namespace
        elif word.startswith(".venv/bin/"):
            word = str(BIN / Path(word).name)
        elif word == "addon.py":
            word = str(ROOT / "addon.py")
        elif previous == "-w":
            word = str(dump)
        if word == "your-agent":
            out += [SYSTEM_PYTHON, "-c", CLIENT, str(port)]
        else:
            out.append(word)
    return out


@pytest.mark.skipif(PROBLEM is not None, reason=f"transparent mode cannot run here: {PROBLEM}")
@pytest.mark.needs(not (AS_ROOT and MISSING), f"{', '.join(MISSING)} not installed (.ci/run installs them)")
def test_the_transparent_recipe_rebuilds_a_clients_flow(namespace, tmp_path):
    add, up, rule, mitmdump, agent, delete = recipe()
    assert (add[:3], delete[:3]) == (["ip", "netns", "add"], ["ip", "netns", "del"])
    assert "--listen-host" in mitmdump and mitmdump[mitmdump.index("--listen-host") + 1] == "127.0.0.1"
    assert mitmdump[mitmdump.index("-p") + 1] == rule[rule.index("--to-ports") + 1] == str(PROXY_PORT)
    dump = tmp_path / "transparent.flows"
    for line in (add, up, rule):  # the namespace, its loopback, and the rule: every TCP connection of a
        # user other than root goes to the proxy; the proxy (root) goes out as asked
        done = _sh(*localized(line, namespace, dump, 0))
        assert done.returncode == 0, (line, done.stderr)
    inside = ["ip", "netns", "exec", namespace]
    provider = Process(
        "fake_provider",
        [*inside, sys.executable, str(ROOT / "scripts" / "fake_provider"), "--port", "0", "--delay", "0.002"],
    )
    proxy = Process("mitmdump", localized(mitmdump, namespace, dump, 0))
    with provider, proxy:
        port = int(provider.wait_for(r"listening on http://127\.0\.0\.1:(\d+)").group(1))
        proxy.wait_for(r"listening at 127\.0\.0\.1:8080")
        client = subprocess.run(
            localized(agent, namespace, dump, port),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd="/",
        )
        assert client.returncode == 0, client.stderr
        proxy.wait_for(r"toolcall-lens POST", timeout=30)
        time.sleep(0.2)
    assert _sh(*localized(delete, namespace, dump, 0)).returncode == 0
    with open(dump, "rb") as f:
        [flow] = list(mio.FlowReader(f).stream())
    # mitmproxy saw the connection to the provider's own address: the redirect kept the original one.
    assert flow.request.url == f"http://127.0.0.1:{port}/v1/chat/completions"
    result = flow.metadata["toolcall_lens"]
    names = [call["name"] for call in result["choices"][0]["tool_calls"]]
    assert names == ["search_circulars", "get_user_profile"]
    assert "recency-misroute" in {w["code"] for w in result["warnings"]}
