"""The "in front of a real agent" recipes of README.md and docs/proxy.md, run as written: the mitmdump
command and the agent's environment are read from the page, then only the ports (free ones instead),
the upstream (the fake provider instead of the real one) and the dump's place (a temporary directory) are
swapped. The agent is a real SDK client in its own process, configured by that environment alone."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import fake_provider as fp
import pytest
from doc_commands import Command, commands, is_mitm, mode_listen, values
from lab import BIN, ROOT, Process
from mitmproxy import io as mio
from streams import all_calls

PAGES = [ROOT / "README.md", ROOT / "docs" / "proxy.md"]
SAFETY_TIMEOUT = 60  # only so a hung client fails the test instead of hanging it
LISTENING = r"listening at 127\.0\.0\.1:(\d+)"

ANTHROPIC_AGENT = """
import json, anthropic
client = anthropic.Anthropic(max_retries=0)  # ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY: the environment
with client.messages.stream(
    model="interleaved", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
) as stream:
    message = stream.get_final_message()
print(json.dumps([[b.id, b.name, b.input] for b in message.content if b.type == "tool_use"]))
"""

OPENAI_AGENT = """
import json, openai
client = openai.OpenAI(max_retries=0)  # OPENAI_BASE_URL, OPENAI_API_KEY and the proxy: the environment
calls = {}
for chunk in client.chat.completions.create(
    model="interleaved", messages=[{"role": "user", "content": "hi"}], stream=True
):
    for delta in (chunk.choices[0].delta.tool_calls if chunk.choices else None) or []:
        call = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
        call["id"] += delta.id or ""
        call["name"] += delta.function.name or ""
        call["arguments"] += delta.function.arguments or ""
print(json.dumps([[c["id"], c["name"], json.loads(c["arguments"])] for c in calls.values()]))
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_of(url: str) -> int:
    [port] = re.findall(r"^http://127\.0\.0\.1:(\d+)(?:/|$)", url)
    return int(port)


def recipe(page: Path, proxy_wanted, agent_wanted) -> tuple[Command, Command]:
    """The page's one mitmproxy command and one agent command that match."""
    found = commands(page.read_text())
    [proxy] = [command for command in found if is_mitm(command) and proxy_wanted(command)]
    [agent] = [command for command in found if agent_wanted(command)]
    assert agent.argv == ["your-agent"], agent
    return proxy, agent


def localized(argv: list[str], dump: Path, upstreams: dict[str, str], ports: dict[int, int]) -> list[str]:
    """The command with the venv's tools, the dump in ``dump``, and each reverse mode's upstream and port
    swapped as the maps say."""
    out = []
    for previous, word in zip([None, *argv], argv, strict=False):
        if word.startswith(".venv/bin/"):
            word = str(BIN / Path(word).name)
        elif previous == "-w":
            word = str(dump)
        elif previous == "--mode" and "@" in word:
            spec = word.rpartition("@")[0]
            host, port = mode_listen(word)
            kind, _, url = spec.partition(":")
            listen = f"{host}:{ports[port]}" if host else str(ports[port])
            word = f"{kind}:{upstreams.get(url, url)}@{listen}"
        out.append(word)
    return out


def agent_env(env: dict[str, str], ports: dict[int, int]) -> dict[str, str]:
    """This process's environment without any proxy setting, then the recipe's, its ports swapped."""
    clean = {name: value for name, value in os.environ.items() if not name.lower().endswith("_proxy")}
    for name, value in env.items():
        clean[name] = re.sub(r"127\.0\.0\.1:(\d+)", lambda m: f"127.0.0.1:{ports[int(m[1])]}", value)
    return clean


def run_agent(code: str, env: dict[str, str]) -> list:
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=SAFETY_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def annotated_flows(proxy: Process, dump: Path) -> list:
    proxy.stop()  # mitmdump closes its dump file
    with open(dump, "rb") as f:
        return [flow for flow in mio.FlowReader(f).stream() if "toolcall_lens" in flow.metadata]


def expected(fmt: str) -> list:
    return [[c["id"], c["name"], json.loads(c["arguments"])] for c in fp.expected_calls("interleaved", fmt)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_anthropic_sdk_recipe_gets_its_tool_calls(page, provider, tmp_path):
    proxy_command, agent = recipe(
        page,
        lambda c: any("api.anthropic.com" in mode for mode in values(c.argv, "--mode")),
        lambda c: "ANTHROPIC_BASE_URL" in c.env,
    )
    assert values(proxy_command.argv, "-w"), "the recipe keeps a dump"
    ports = {mode_listen(mode)[1]: free_port() for mode in values(proxy_command.argv, "--mode")}
    upstreams = {"https://api.anthropic.com": f"http://127.0.0.1:{provider}"}
    dump = tmp_path / "session.flows"
    with Process("mitmdump", localized(proxy_command.argv, dump, upstreams, ports)) as proxy:
        for _ in ports:  # every listener is up
            proxy.wait_for(LISTENING)
        env = {**agent_env(agent.env, ports), "ANTHROPIC_API_KEY": "sk-ant-test"}
        assert run_agent(ANTHROPIC_AGENT, env) == expected("anthropic-messages")
        [flow] = annotated_flows(proxy, dump)
    result = flow.metadata["toolcall_lens"]
    assert result["format"] == "anthropic-messages"
    assert [[i, n, json.loads(a)] for i, n, a in all_calls(result)] == expected("anthropic-messages")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_http_proxy_recipe_gets_a_plain_http_local_server_annotated(page, provider, tmp_path):
    proxy_command, agent = recipe(
        page,
        # mitmdump's (the console's line beside it takes the same options, and is no recipe to run).
        lambda c: (
            c.argv[0].endswith("/mitmdump") and not values(c.argv, "--mode") and "--listen-host" in c.argv
        ),
        lambda c: "HTTP_PROXY" in c.env,
    )
    # The recipe's regular mode listens on mitmproxy's default port: here port 0, the one it got read back.
    dump = tmp_path / "local.flows"
    argv = [*localized(proxy_command.argv, dump, {}, {}), "-p", "0", "-w", str(dump)]
    with Process("mitmdump", argv) as proxy:
        proxy_port = int(proxy.wait_for(LISTENING).group(1))
        assert port_of(agent.env["HTTP_PROXY"]) == 8080  # mitmproxy's default, as the recipe runs it
        local_server = port_of(agent.env["OPENAI_BASE_URL"])
        env = agent_env(agent.env, {8080: proxy_port, local_server: provider})
        env["OPENAI_API_KEY"] = "sk-test"
        assert run_agent(OPENAI_AGENT, env) == expected("openai-chat")
        [flow] = annotated_flows(proxy, dump)
    # The flow went through the proxy to the plain-http server, and was annotated on its way.
    assert flow.request.scheme == "http" and flow.request.port == provider
    assert flow.request.path == "/v1/chat/completions"
    result = flow.metadata["toolcall_lens"]
    assert result["format"] == "openai-chat"
    assert [[i, n, json.loads(a)] for i, n, a in all_calls(result)] == expected("openai-chat")
    assert "recency-misroute" in flow.comment


def _openai_reverse_lines() -> list[tuple[str, Command]]:
    found = commands((ROOT / "README.md").read_text())
    return [
        (c.env["OPENAI_BASE_URL"], c)
        for c in found
        if "OPENAI_BASE_URL" in c.env and "HTTP_PROXY" not in c.env
    ]


@pytest.mark.parametrize("line", _openai_reverse_lines(), ids=lambda line: line[0])
def test_each_openai_base_url_line_of_the_reverse_recipe_gets_its_tool_calls(line, provider, tmp_path):
    base_url, agent = line
    assert agent.argv == ["your-agent"], agent
    [proxy_command] = [
        c
        for c in commands((ROOT / "README.md").read_text())
        if is_mitm(c)
        and any("api.openai.com" in mode for mode in values(c.argv, "--mode"))
        and values(c.argv, "-w")
    ]
    modes = values(proxy_command.argv, "--mode")
    ports = {mode_listen(mode)[1]: free_port() for mode in modes}
    # The line's port is one the recipe's mitmdump listens on: every upstream is the fake provider here.
    assert port_of(base_url) in ports
    upstreams = {mode.partition(":")[2].rpartition("@")[0]: f"http://127.0.0.1:{provider}" for mode in modes}
    dump = tmp_path / "session.flows"
    with Process("mitmdump", localized(proxy_command.argv, dump, upstreams, ports)) as proxy:
        for _ in ports:
            proxy.wait_for(LISTENING)
        env = {**agent_env(agent.env, ports), "OPENAI_API_KEY": "sk-test"}
        assert run_agent(OPENAI_AGENT, env) == expected("openai-chat")
        [flow] = annotated_flows(proxy, dump)
    # The SDK's request took the line's path, through the reverse proxy, and was annotated on its way.
    assert flow.request.path == base_url.split(str(port_of(base_url)), 1)[1] + "/chat/completions"
    result = flow.metadata["toolcall_lens"]
    assert [[i, n, json.loads(a)] for i, n, a in all_calls(result)] == expected("openai-chat")
    assert "recency-misroute" in flow.comment
