"""`toolcall-lens run -- AGENT`, all real: the command starts mitmdump with the addon, runs a client of the
fake provider through it, reports, keeps the dump and the JSONL, and passes the client's status on; Ctrl-C,
a timeout and bad input stop everything it started. --mode local runs where the kernel allows it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lab import BIN
from mitmproxy import io as mio

from toolcall_lens.run import cgroup2_at_root, local_mode_unavailable

TOOLCALL_LENS = str(BIN / "toolcall-lens")
TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("search_circulars", "get_user_profile")
]
# A plain client: urllib honours HTTP_PROXY (and NO_PROXY, which `run` removes) for http://127.0.0.1 too.
URLLIB_CLIENT = """
import json, sys, urllib.request
port, status = int(sys.argv[1]), int(sys.argv[2])
body = json.dumps({"model": "interleaved", "stream": True, "messages": [{"role": "user", "content": "hi"}],
                   "tools": TOOLS}).encode()
request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", body,
                                 {"Content-Type": "application/json"})
with urllib.request.urlopen(request, timeout=30) as response:
    print("client got", len(response.read()), "bytes")
sys.exit(status)
""".replace("TOOLS", json.dumps(TOOLS))
OPENAI_CLIENT = """
import sys, openai
client = openai.OpenAI(base_url=f"http://127.0.0.1:{sys.argv[1]}/v1", api_key="sk-test-run-0123456789")
stream = client.chat.completions.create(model="interleaved", messages=[{"role": "user", "content": "hi"}],
                                        tools=TOOLS, stream=True)
for chunk in stream:
    pass
print("openai done")
""".replace("TOOLS", json.dumps(TOOLS))
# http.client reads no proxy variable: it goes straight to the provider.
DIRECT_CLIENT = """
import http.client, sys
connection = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=30)
connection.request("GET", "/health")
print("direct", connection.getresponse().status)
"""
SLEEPER = """
import os, signal, sys, time
signal.signal(signal.SIGINT, lambda *_: sys.exit(130))
open(sys.argv[1], "w").write(str(os.getpid()))
time.sleep(600)
"""


def run(
    tmp_path: Path,
    *args: str,
    timeout: float = 120,
    confdir: Path | None = None,
    env: dict | None = None,
    **kw,
):
    env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "localhost", **(env or {})}
    extra = ["--confdir", str(confdir)] if confdir else []
    return subprocess.run(
        [TOOLCALL_LENS, "run", "--dir", str(tmp_path / "run"), *extra, *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        **kw,
    )


def script(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def flows(path: Path) -> list:
    with open(path, "rb") as f:
        return list(mio.FlowReader(f).stream())


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purposes.
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(") ", 1)[1][0] != "Z"


def test_a_client_through_the_proxy_is_reported_its_status_passed_on_the_files_kept(provider, tmp_path):
    client = script(tmp_path, "client.py", URLLIB_CLIENT)
    done = run(tmp_path, "--", sys.executable, client, str(provider), "3")
    assert done.returncode == 3, done.stderr
    assert "client got" in done.stdout  # the agent's own output is its own
    report = done.stderr
    assert "1 LLM response(s) in 1 flow(s)" in report
    assert "search_circulars" in report and "get_user_profile" in report
    assert "WARNING recency-misroute" in report
    # Its tokens, its cost (the fake provider's model has no price: why is said) and its session.
    assert "tokens: " in report and "cost: unknown (" in report and ", turn 1 (new)" in report
    folder = tmp_path / "run"
    assert f"dump: {folder / 'session.flows'}" in report
    assert f"turn by turn: toolcall-lens sessions {folder / 'session.flows'}" in report
    [flow] = flows(folder / "session.flows")
    assert flow.metadata["toolcall_lens"]["format"] == "openai-chat"
    [record] = records(folder / "llm.jsonl")
    names = [call["name"] for call in record["result"]["choices"][0]["tool_calls"]]
    assert names == ["search_circulars", "get_user_profile"]
    assert (
        b"mitmproxy" in (folder / "ca-bundle.pem").read_bytes() or (folder / "ca-bundle.pem").stat().st_size
    )


def test_the_reports_commands_re_analyse_the_dump_with_the_caps_the_proxy_ran_with(provider, tmp_path):
    client = script(tmp_path, "client.py", URLLIB_CLIENT)
    done = run(
        tmp_path, "--set", "toolcall_lens_argument_cap=5", "--", sys.executable, client, str(provider), "0"
    )
    assert done.returncode == 0, done.stderr
    dump = tmp_path / "run" / "session.flows"
    assert f"full report: toolcall-lens {dump} --argument-cap 5\n" in done.stderr
    [record] = records(tmp_path / "run" / "llm.jsonl")
    live = [call["arguments"] for call in record["result"]["choices"][0]["tool_calls"]]
    assert all(len(arguments) == 5 for arguments in live)
    # The command the report gives finds what the proxy found; without the flag, the arguments whole.
    again = subprocess.run(
        [TOOLCALL_LENS, str(dump), "--argument-cap", "5", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    [result] = json.loads(again.stdout)["results"]
    assert [call["arguments"] for call in result["choices"][0]["tool_calls"]] == live
    assert "arguments-cap" in {w["code"] for w in result["warnings"]}
    whole = subprocess.run([TOOLCALL_LENS, str(dump), "--json"], capture_output=True, text=True, check=False)
    [result] = json.loads(whole.stdout)["results"]
    assert all(len(call["arguments"]) > 5 for call in result["choices"][0]["tool_calls"])


def test_the_openai_sdk_through_the_proxy_its_key_redacted(provider, tmp_path):
    client = script(tmp_path, "sdk.py", OPENAI_CLIENT)
    done = run(
        tmp_path,
        "-w",
        str(tmp_path / "sdk.flows"),
        "--jsonl",
        str(tmp_path / "sdk.jsonl"),
        "--",
        sys.executable,
        client,
        str(provider),
    )
    assert done.returncode == 0, done.stderr
    assert "openai done" in done.stdout
    assert "2 calls: search_circulars, get_user_profile" in done.stderr
    [flow] = flows(tmp_path / "sdk.flows")
    assert "sk-test-run-0123456789" not in flow.request.headers["authorization"]
    assert len(records(tmp_path / "sdk.jsonl")) == 1


def test_the_agent_sees_the_proxy_the_bundle_and_no_no_proxy(provider, tmp_path):
    show = script(tmp_path, "env.py", "import json, os; print(json.dumps(dict(os.environ)))")
    done = run(tmp_path, "--", sys.executable, show)
    assert done.returncode == 0, done.stderr
    env = json.loads(done.stdout)
    proxy = env["HTTP_PROXY"]
    assert proxy.startswith("http://127.0.0.1:")
    for name in ("HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        assert env[name] == proxy
    assert "NO_PROXY" not in env and "no_proxy" not in env
    bundle = tmp_path / "run" / "ca-bundle.pem"
    for name in (
        "SSL_CERT_FILE",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
        "CODEX_CA_CERTIFICATE",
        "GIT_SSL_CAINFO",
    ):
        assert env[name] == str(bundle)
    # An agent that makes no request: said so, its status passed on.
    assert "no flow went through the proxy" in done.stderr


def test_a_first_run_waits_for_mitmproxy_to_make_its_ca(provider, tmp_path):
    confdir = tmp_path / "fresh-confdir"
    client = script(tmp_path, "client.py", URLLIB_CLIENT)
    done = run(tmp_path, "--", sys.executable, client, str(provider), "0", confdir=confdir)
    assert done.returncode == 0, done.stderr
    ca = (confdir / "mitmproxy-ca-cert.pem").read_bytes()
    assert (tmp_path / "run" / "ca-bundle.pem").read_bytes().endswith(ca)


def test_an_agent_that_ignores_the_proxy_is_named(provider, tmp_path):
    client = script(tmp_path, "direct.py", DIRECT_CLIENT)
    done = run(tmp_path, "--", sys.executable, client, str(provider))
    assert done.returncode == 0 and "direct 200" in done.stdout
    assert "0 LLM response(s) in 0 flow(s)" in done.stderr
    assert "the agent ignored HTTP_PROXY/HTTPS_PROXY" in done.stderr


def test_an_agent_that_is_not_there_is_one_line_and_status_2(tmp_path):
    done = run(tmp_path, "--", "no-such-agent-toolcall-lens")
    assert done.returncode == 2
    assert (
        done.stderr
        == "toolcall-lens run: no-such-agent-toolcall-lens: command not found (or not executable)\n"
    )
    assert not (tmp_path / "run").exists()


def test_no_agent_is_a_usage_error(tmp_path):
    done = run(tmp_path)
    assert done.returncode == 2 and "no agent to run" in done.stderr and "Traceback" not in done.stderr


def test_an_agent_that_fails_at_once_gives_its_status(tmp_path):
    done = run(tmp_path, "--", "false")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "no flow went through the proxy: the agent ended with status 1 after " in done.stderr
    assert "HTTP_PROXY" not in done.stderr  # it did not ignore the proxy: it failed


def test_a_taken_port_is_one_line_and_status_2(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run(tmp_path, "--port", str(port), "--", "true")
    assert done.returncode == 2
    assert done.stderr == f"toolcall-lens run: port {port} on 127.0.0.1 is already taken (--port)\n"


def test_a_hanging_agent_is_stopped_at_the_timeout_with_everything_else(tmp_path):
    pidfile = tmp_path / "agent.pid"
    sleeper = script(tmp_path, "sleeper.py", SLEEPER)
    done = run(tmp_path, "--timeout", "3", "--", sys.executable, sleeper, str(pidfile))
    assert done.returncode == 124, done.stderr
    assert "still running after --timeout 3 s: stopped" in done.stderr
    assert not alive(int(pidfile.read_text()))
    assert "mitmdump" not in mitmdumps_of(tmp_path)


def mitmdumps_of(tmp_path: Path) -> str:
    """The command lines of the running processes that write into this test's folder."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            words = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if any(str(tmp_path).encode() in word for word in words):
            found.append(" ".join(w.decode(errors="replace") for w in words))
    return "\n".join(found)


def test_ctrl_c_stops_the_agent_and_the_proxy_and_still_reports(tmp_path):
    pidfile = tmp_path / "agent.pid"
    sleeper = script(tmp_path, "sleeper.py", SLEEPER)
    process = subprocess.Popen(
        [TOOLCALL_LENS, "run", "--dir", str(tmp_path / "run"), "--", sys.executable, sleeper, str(pidfile)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not pidfile.exists() or not pidfile.read_text():
            assert time.monotonic() < deadline and process.poll() is None, process.communicate()
            time.sleep(0.1)
        assert "mitmdump" in mitmdumps_of(tmp_path)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 130, err
    assert "SIGINT received: the agent was stopped" in err and "Traceback" not in err
    assert not alive(int(pidfile.read_text()))
    assert "mitmdump" not in mitmdumps_of(tmp_path)
    assert (tmp_path / "run" / "session.flows").exists()


def test_transparent_mode_captures_the_agent_and_its_children_without_proxy_variables(provider, tmp_path):
    from toolcall_lens.run import transparent_mode_unavailable

    if reason := transparent_mode_unavailable():
        pytest.skip(reason)
    client = script(
        tmp_path,
        "client.py",
        URLLIB_CLIENT.replace(
            "urllib.request.urlopen(request",
            "urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request",
        ),
    )
    agent = script(tmp_path, "agent.py", FORKING_AGENT)  # the request leaves from a child process
    done = run(tmp_path, "--mode", "transparent", "--", sys.executable, agent, client, str(provider))
    assert done.returncode == 0, done.stderr
    assert "1 LLM response(s) in 1 flow(s)" in done.stderr
    assert "2 calls: search_circulars, get_user_profile" in done.stderr
    [record] = records(tmp_path / "run" / "llm.jsonl")
    assert record["url"] == f"http://127.0.0.1:{provider}/v1/chat/completions"  # where it was going
    # Nothing is left behind: no iptables rule, no cgroup.
    rules = subprocess.run(
        ["iptables", "-t", "nat", "-S", "OUTPUT"], capture_output=True, text=True, check=True
    )
    rules = rules.stdout
    assert "toolcall-lens-" not in rules
    from toolcall_lens.run import cgroup2_mount

    assert not list(cgroup2_mount().glob("toolcall-lens-*"))


def _local_mode_problem() -> str | None:
    if reason := local_mode_unavailable():
        return reason
    if not cgroup2_at_root():
        probe = subprocess.run(
            ["unshare", "-m", "--propagation", "private", "sh", "-c", "mount -t cgroup2 none /sys/fs/cgroup"],
            capture_output=True,
            text=True,
            check=False,
        )
        if probe.returncode != 0:
            return f"cannot mount cgroup2 in a private mount namespace: {probe.stderr.strip()}"
    return None


LOCAL_PROBLEM = _local_mode_problem()


@pytest.mark.skipif(LOCAL_PROBLEM is not None, reason=f"--mode local cannot run here: {LOCAL_PROBLEM}")
def test_local_mode_captures_the_agent_by_pid_without_proxy_variables(provider, tmp_path):
    client = script(
        tmp_path,
        "client.py",
        URLLIB_CLIENT.replace(
            "urllib.request.urlopen(request",
            "urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request",
        ),
    )
    done = run(tmp_path, "--mode", "local", "--", sys.executable, client, str(provider), "5")
    assert done.returncode == 5, done.stderr
    assert "1 LLM response(s) in 1 flow(s)" in done.stderr
    assert "2 calls: search_circulars, get_user_profile" in done.stderr
    [record] = records(tmp_path / "run" / "llm.jsonl")
    assert record["url"] == f"http://127.0.0.1:{provider}/v1/chat/completions"
    # The host's mounts are untouched: cgroup2 was mounted in mitmdump's own mount namespace only.
    assert cgroup2_at_root() or "cgroup2 on /sys/fs/cgroup type" not in Path("/proc/mounts").read_text()


# A client that connects within milliseconds of starting (no imports but socket and json): mitmproxy says the
# redirector started tens of milliseconds before the redirector applies the agent's PID.
RAW_CLIENT = """
import json, socket, sys
body = json.dumps({"model": "interleaved", "stream": True, "messages": [{"role": "user", "content": "hi"}],
                   "tools": TOOLS}).encode()
connection = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30)
connection.sendall(b"POST /v1/chat/completions HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nConnection: close\\r\\n"
                   b"Content-Type: application/json\\r\\nContent-Length: %d\\r\\n\\r\\n%s" % (len(body), body))
while connection.recv(65536):
    pass
""".replace("TOOLS", json.dumps(TOOLS))


@pytest.mark.skipif(LOCAL_PROBLEM is not None, reason=f"--mode local cannot run here: {LOCAL_PROBLEM}")
def test_local_mode_captures_an_agent_that_connects_as_soon_as_it_starts(provider, tmp_path):
    client = script(tmp_path, "client.py", RAW_CLIENT)
    done = run(tmp_path, "--mode", "local", "--", sys.executable, "-S", client, str(provider))
    assert done.returncode == 0, done.stderr
    assert "1 LLM response(s) in 1 flow(s)" in done.stderr
    assert "2 calls: search_circulars, get_user_profile" in done.stderr


def _as_non_root() -> list[str]:
    """Words that run a command with an effective uid that is not 0: as it is when not root; as root, in a
    user namespace of its own (no uid mapped: it sees itself as nobody, and still reads root's files)."""
    if os.geteuid() != 0:
        return []
    probe = subprocess.run(["unshare", "-U", "id", "-u"], capture_output=True, text=True, check=False)
    if probe.returncode != 0 or probe.stdout.strip() == "0":
        pytest.skip(f"cannot run without root here (unshare -U: {probe.stderr.strip() or probe.stdout})")
    return ["unshare", "-U"]


@pytest.mark.parametrize("mode", ["local", "transparent"])
def test_local_and_transparent_modes_without_root_are_one_line_and_status_2(mode, tmp_path):
    done = subprocess.run(
        [*_as_non_root(), TOOLCALL_LENS, "run", "--dir", str(tmp_path / "run"), "--mode", mode, "--", "true"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"toolcall-lens run: --mode {mode}: needs root (")
    assert done.stderr.count("\n") == 1 and not (tmp_path / "run").exists()  # nothing was started


def test_transparent_mode_without_iptables_says_so(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("without root the root check speaks first")
    done = run(tmp_path, "--mode", "transparent", "--", "/bin/true", env={"PATH": str(tmp_path)})
    assert done.returncode == 2
    assert done.stderr == "toolcall-lens run: --mode transparent: needs iptables (apt-get install iptables)\n"


def test_web_keeps_mitmweb_on_loopback_after_the_agent_until_ctrl_c(tmp_path):
    process = subprocess.Popen(
        [TOOLCALL_LENS, "run", "--web", "--dir", str(tmp_path / "run"), "--", "true"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        line = process.stderr.readline()
        assert line.startswith("toolcall-lens run: mitmweb at http://127.0.0.1:") and "/?token=" in line
        assert "mitmweb stays at" in process.stderr.readline()
        assert "mitmweb" in mitmdumps_of(tmp_path)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 0, err  # the agent's status
    assert "mitmweb" not in mitmdumps_of(tmp_path)


# An agent that drops a call: it asks, gets two interleaved calls, and answers only the first.
DROPPING_CLIENT = """
import json, sys, urllib.request
port = int(sys.argv[1])
def ask(messages):
    body = json.dumps({"model": "interleaved" if len(messages) == 1 else "text", "stream": True,
                       "messages": messages, "tools": TOOLS}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", body,
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.read().decode()
calls = {}
for line in ask([{"role": "user", "content": "hi"}]).splitlines():
    if line.startswith("data: {"):
        for choice in json.loads(line[6:])["choices"]:
            for call in choice["delta"].get("tool_calls") or ():
                entry = calls.setdefault(call["index"], {"id": "", "name": "", "arguments": ""})
                entry["id"] += call.get("id") or ""
                entry["name"] += (call.get("function") or {}).get("name") or ""
                entry["arguments"] += (call.get("function") or {}).get("arguments") or ""
first = calls[0]
ask([{"role": "user", "content": "hi"},
     {"role": "assistant", "tool_calls": [{"id": first["id"], "type": "function",
      "function": {"name": first["name"], "arguments": first["arguments"]}}]},
     {"role": "tool", "tool_call_id": first["id"], "content": "done"}])
""".replace("TOOLS", json.dumps(TOOLS))


def test_the_report_says_what_the_follow_up_evidence_found(provider, tmp_path):
    client = script(tmp_path, "dropping.py", DROPPING_CLIENT)
    done = run(tmp_path, "--", sys.executable, client, str(provider))
    assert done.returncode == 0, done.stderr
    report = done.stderr
    assert "2 LLM response(s) in 2 flow(s)" in report
    assert "WARNING unanswered-call" in report
    assert "evidence: 2 echoed call(s) and result(s) read, 1 echo(es) matched" in report
    assert "UNANSWERED" in report
    # The first request had nothing to check, and its block says so rather than nothing.
    assert "evidence: not checked: the request echoes no tool call" in report


# An agent that starts a child to do its requests, as Codex's npm launcher does: the child names itself.
FORKING_AGENT = """
import subprocess, sys
sys.exit(subprocess.call([sys.executable, sys.argv[1], sys.argv[2], "0"]))
"""
NAMED_CLIENT_HEAD = """
import ctypes
ctypes.CDLL(None).prctl(15, b"tlens-child", 0, 0, 0)  # PR_SET_NAME: the name local mode can capture
"""


@pytest.mark.parametrize("named", [False, True])
def test_local_mode_captures_an_agents_children_as_descendants_or_by_name(provider, tmp_path, named):
    reason = local_mode_unavailable()
    if reason:
        pytest.skip(reason)
    client = script(
        tmp_path,
        "client.py",
        NAMED_CLIENT_HEAD
        + URLLIB_CLIENT.replace(
            "urllib.request.urlopen(request",
            "urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request",
        ),
    )
    agent = script(tmp_path, "agent.py", FORKING_AGENT)
    capture = ["--capture", "tlens-child"] if named else []
    done = run(tmp_path, "--mode", "local", *capture, "--", sys.executable, agent, client, str(provider))
    assert done.returncode == 0, done.stderr
    # By name, or followed as the agent's descendant: the child's request was captured either way.
    assert "1 LLM response(s) in 1 flow(s)" in done.stderr, done.stderr
    assert "2 calls: search_circulars, get_user_profile" in done.stderr


def test_capture_goes_with_local_mode(tmp_path):
    done = run(tmp_path, "--capture", "node", "--", "true")
    assert done.returncode == 2 and "--capture names what local mode captures" in done.stderr


def test_it_runs_from_a_bare_environment(provider, tmp_path):
    """A user's shell, not this test suite's: no PYTHONUNBUFFERED, no locale, only PATH and HOME. (mitmdump's
    output reaches `run` through a pipe, where Python buffers it unless told not to.)"""
    client = script(tmp_path, "client.py", URLLIB_CLIENT)
    home = tmp_path / "home"
    home.mkdir()
    done = subprocess.run(
        [
            TOOLCALL_LENS,
            "run",
            "--dir",
            str(tmp_path / "run"),
            "--timeout",
            "60",
            "--",
            sys.executable,
            client,
            str(provider),
            "0",
        ],
        env={"PATH": os.environ["PATH"], "HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "1 LLM response(s) in 1 flow(s)" in done.stderr
