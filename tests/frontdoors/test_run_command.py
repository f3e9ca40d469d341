"""`toolcall-lens run`'s command line without starting a process: the dispatch (a subcommand only as the
first word; a file named `run` is `./run`), the agent's words, the environment the agent gets, the bundle."""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import time

import fake_provider
import pytest
from streams import DATA

from accumulator import analyze
from accumulator.cli import main
from toolcall_lens import run as run_command


def test_run_as_the_first_word_is_the_subcommand_and_a_file_named_run_is_read_as_dot_slash_run(tmp_path):
    (tmp_path / "run").write_bytes((DATA / "production_interleaved.sse").read_bytes())
    script = [sys.executable, "-c", "from accumulator.cli import run; run()"]
    as_file = subprocess.run([*script, "./run"], cwd=tmp_path, capture_output=True, text=True, check=False)
    assert as_file.returncode == 1 and "recency-misroute" in as_file.stdout
    as_command = subprocess.run([*script, "run"], cwd=tmp_path, capture_output=True, text=True, check=False)
    assert as_command.returncode == 2 and "no agent to run" in as_command.stderr


@pytest.mark.parametrize(
    "argv, agent",
    [
        (["--", "agent", "--mode", "x"], ["agent", "--mode", "x"]),
        (["--timeout", "5", "agent", "-w", "x"], ["agent", "-w", "x"]),
        (["--mode", "local", "--", "codex", "--", "y"], ["codex", "--", "y"]),
    ],
)
def test_the_agents_words_are_its_own(argv, agent):
    _, words = run_command._parse(argv)
    assert words == agent


def test_the_agent_gets_the_proxy_everywhere_no_no_proxy_and_the_bundle_in_every_ca_variable(tmp_path):
    bundle = tmp_path / "bundle.pem"
    env = run_command.agent_env({"NO_PROXY": "127.0.0.1", "no_proxy": "localhost", "KEEP": "1"}, 8123, bundle)
    assert {env[name] for name in run_command.PROXY_VARIABLES} == {"http://127.0.0.1:8123"}
    assert "NO_PROXY" not in env and "no_proxy" not in env and env["KEEP"] == "1"
    assert {env[name] for name in run_command.CA_VARIABLES} == {str(bundle)}
    local = run_command.agent_env({"NO_PROXY": "x"}, None, bundle)  # local mode: no proxy variable added
    assert "HTTP_PROXY" not in local and local["NO_PROXY"] == "x" and local["SSL_CERT_FILE"] == str(bundle)


def test_the_bundle_is_the_system_roots_then_mitmproxys_ca(tmp_path):
    (tmp_path / "mitmproxy-ca-cert.pem").write_bytes(
        b"-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n"
    )
    bundle = run_command.ca_bundle(tmp_path, tmp_path / "bundle.pem", wait=0)
    data = bundle.read_bytes()
    assert data.endswith(b"CA\n-----END CERTIFICATE-----\n") and data.count(b"BEGIN CERTIFICATE") > 1


def test_a_missing_ca_is_said(tmp_path):
    with pytest.raises(run_command.RunError, match="made no CA certificate"):
        run_command.ca_bundle(tmp_path, tmp_path / "bundle.pem", wait=0)


def test_the_addon_is_found_next_to_the_package():
    assert (
        run_command.addon_path().name == "addon.py"
        and (run_command.addon_path().parent / "toolcall_lens").is_dir()
    )


def _trampoline(probe_port: int, wait: float) -> tuple[subprocess.Popen, int]:
    read_end, write_end = os.pipe()
    agent = [sys.executable, "-c", "import time; print(time.monotonic())"]
    words = [sys.executable, "-c", run_command.TRAMPOLINE, str(read_end), str(probe_port), str(wait), *agent]
    process = subprocess.Popen(words, stdout=subprocess.PIPE, text=True, pass_fds=(read_end,))
    os.close(read_end)
    with os.fdopen(write_end, "wb") as pipe:
        pipe.write(json.dumps(dict(os.environ)).encode())
    return process, write_end


def test_in_local_mode_the_agent_starts_only_once_its_connections_are_taken():
    # The redirector taking the agent's connections is seen from inside as a refused port that accepts.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        process, _ = _trampoline(probe.getsockname()[1], 30)
        time.sleep(0.5)
        assert process.poll() is None  # still waiting: the probe is refused
        taken = time.monotonic()
        probe.listen()
        out, _ = process.communicate(timeout=30)
    assert process.returncode == 0 and float(out) >= taken


def test_an_agent_never_captured_still_starts_after_the_wait():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        started = time.monotonic()
        process, _ = _trampoline(probe.getsockname()[1], 0.3)
        out, _ = process.communicate(timeout=30)
    assert process.returncode == 0 and float(out) >= started + 0.3


def test_local_mode_follows_every_descendant_of_the_agent():
    from toolcall_lens import local_tree

    tree = """
import subprocess, sys, time
if sys.argv[1] == "0":
    time.sleep(30)
else:
    child = subprocess.Popen([sys.executable, "-c", sys.argv[2], str(int(sys.argv[1]) - 1), sys.argv[2]])
    print(child.pid, flush=True)
    child.wait()
"""
    root = subprocess.Popen([sys.executable, "-c", tree, "2", tree], stdout=subprocess.PIPE, text=True)
    try:
        child = int(root.stdout.readline())
        deadline = time.monotonic() + 10
        while len(local_tree.descendants(root.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        found = local_tree.descendants(root.pid)
        assert child in found and len(found) == 2 and root.pid not in found  # a child and a grandchild
    finally:
        for pid in local_tree.descendants(root.pid):
            os.kill(pid, 9)
        root.kill()
        root.wait()
    assert local_tree.descendants(root.pid) == set()  # gone: nothing to follow
    assert local_tree.spec("123,tlens", {7, 5}) == f"123,tlens,5,7,!{os.getpid()}"


def test_the_reports_commands_carry_the_options_the_proxy_ran_with_that_the_cli_has(capsys):
    flags = run_command.cli_flags(
        [
            "toolcall_lens_argument_cap=5",
            "toolcall_lens_strategies=recency",
            "toolcall_lens_max_calls=3",
            "toolcall_lens_strategies=last-wins",
            "toolcall_lens_max_calls=1",  # the last one given counts, as in mitmproxy
            "toolcall_lens_body_cap=0",  # no flag of the CLI's
            "toolcall_lens_prices=my prices.json",
            "termlog_verbosity=debug",
        ]
    )
    assert flags == (
        " --argument-cap 5 --strategies recency,last-wins --max-calls 1 --prices 'my prices.json'"
    )
    assert run_command.cli_flags(["toolcall_lens_strategies="]) == " --strategies none"
    assert run_command.cli_flags([]) == ""
    # The CLI takes them: the calls of a stream held as the proxy held them.
    argv = shlex.split(f"{DATA / 'openai_chat_parallel.sse'}{flags.split(' --prices')[0]} --json")
    assert main(argv) == 1
    result = json.loads(capsys.readouterr().out)["results"][0]
    assert {w["code"] for w in result["warnings"]} == {"calls-cap", "arguments-cap"}
    assert result["choices"][0]["tool_calls"][0]["arguments"] == '{"cit'


def test_the_report_shows_a_custom_calls_input_on_its_calls_line(tmp_path):
    result = analyze(fake_provider.body("openai-responses", "custom-interleaved"), "openai-responses")
    outcome = run_command.Outcome(
        status=0, flows=1, records=[{"method": "POST", "url": "u", "result": result}]
    )
    paths = run_command.Paths(*(tmp_path / n for n in ("run", "d.flows", "l.jsonl", "m.log", "ca.pem")))
    lines = run_command.report(outcome, paths, "regular").splitlines()
    [patch] = [line for line in lines if "apply_patch" in line and "id=" in line]
    assert patch.endswith(
        "(custom) *** Begin Patch\\n*** Update File: a.py\\n@@\\n-x = 1\\n+x = 2\\n*** End Patch"
    )
    [read] = [line for line in lines if "read_file" in line and "id=" in line]
    assert read.endswith('{"path": "a.py"}')
