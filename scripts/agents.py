"""Real agent CLIs for the tests: their pinned npm versions (this table is the one place they are pinned),
where they are installed (a cache outside the repository) and how each is run, non-interactively, against a
local provider with its own HOME and config. `.ci/run` installs them; tests/live/test_agents.py runs them.
Beside them, an agent built on a Python SDK, the OpenAI Agents SDK (`openai-agents`, pinned with the test
extras in pyproject.toml), run by tests/openai_agents_client.py (SDK_RUNS): with two function tools over
Responses and over Chat Completions (how the SDK is used with other providers), and with OpenAI's built-in
shell and patch tools over Responses, by HTTP and by WebSocket. And agents of two Python frameworks
(FRAMEWORKS, pinned there too), each run by a client of its own over Chat Completions and over Responses
(FRAMEWORK_RUNS): LangChain (tests/langchain_client.py) and Pydantic AI (tests/pydantic_ai_client.py); and
a tool loop on LiteLLM's SDK over Chat Completions (tests/litellm_client.py).

    python3 scripts/agents.py install     # idempotent; a failed install says why, and the exit status is 1
    python3 scripts/agents.py where       # the cache folder and each agent's binary, or why it is missing
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import NamedTuple


class Agent(NamedTuple):
    package: str  # on npm
    version: str  # exact: `npm view PACKAGE version` when pinned
    binary: str  # its name in node_modules/.bin


AGENTS: dict[str, Agent] = {
    "claude-code": Agent("@anthropic-ai/claude-code", "2.1.337", "claude"),
    "codex": Agent("@openai/codex", "0.171.0", "codex"),
    "gemini-cli": Agent("@google/gemini-cli", "0.61.0", "gemini"),
    "opencode": Agent("opencode-ai", "1.18.33", "opencode"),
}
# The Python SDK's agent, run by this client in the tests' interpreter: {run name: (the API its model
# speaks, its tools)}. The first two are in the injection table (function tools); the others have OpenAI's
# built-in shell and patch tools, over HTTP and over the SDK's Responses WebSocket transport.
SDK_PACKAGE = "openai-agents"
SDK_RUNS = {
    "openai-agents": ("responses", "functions"),
    "openai-agents-chat": ("chat", "functions"),
    "openai-agents-builtin": ("responses", "builtin"),
    "openai-agents-builtin-ws": ("websocket", "builtin"),
}
SDK_CLIENT = Path(__file__).resolve().parent.parent / "tests" / "openai_agents_client.py"


class Framework(NamedTuple):
    packages: tuple[str, ...]  # on PyPI, pinned with the test extras
    client: Path  # the agent, run in the tests' interpreter: BASE_URL --api chat|responses


# Agent frameworks in Python, each agent streamed with the same two function tools (bash, read_file).
FRAMEWORKS: dict[str, Framework] = {
    # `create_agent` (LangGraph's tool loop) on langchain-openai's ChatOpenAI
    "langchain": Framework(("langchain", "langchain-openai"), SDK_CLIENT.parent / "langchain_client.py"),
    # An Agent on its OpenAIChatModel or OpenAIResponsesModel
    "pydantic-ai": Framework(("pydantic-ai-slim",), SDK_CLIENT.parent / "pydantic_ai_client.py"),
    # A tool loop on LiteLLM's SDK: completion(stream=True), each response put together by stream_chunk_builder
    "litellm": Framework(("litellm",), SDK_CLIENT.parent / "litellm_client.py"),
}
# {run name: (framework, the API its model speaks)}
FRAMEWORK_RUNS = {
    "langchain": ("langchain", "chat"),
    "langchain-responses": ("langchain", "responses"),
    "pydantic-ai": ("pydantic-ai", "chat"),
    "pydantic-ai-responses": ("pydantic-ai", "responses"),
    "litellm-sdk": ("litellm", "chat"),
}
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "toolcall-lens" / "agents"
PROMPT = "Run `echo hi` and read notes.txt, both at once, then say what you found."
# The file the fake provider has each agent read (`--agent-file`), in the agent's working directory.
NOTES = "notes.txt"
NOTES_TEXT = "hello from the agent test\n"
# A model Codex 0.171 knows, and declares its custom (free-form) apply_patch tool to.
PATCH_MODEL = "gpt-5.5"


def prefix(name: str) -> Path:
    agent = AGENTS[name]
    return CACHE / f"{name}-{agent.version}"


def binary(name: str) -> Path:
    return prefix(name) / "node_modules" / ".bin" / AGENTS[name].binary


def missing(name: str) -> str | None:
    """Why the agent cannot run here, or None."""
    if name == SDK_PACKAGE or name in FRAMEWORKS:
        for package in (SDK_PACKAGE,) if name == SDK_PACKAGE else FRAMEWORKS[name].packages:
            try:
                metadata.version(package)
            except metadata.PackageNotFoundError:
                return f"{package} is not installed (the test extras: pip install -e '.[dev]')"
        return None
    if shutil.which("npm") is None or shutil.which("node") is None:
        return "node and npm are not on PATH"
    if not binary(name).exists():
        return f"{name} {AGENTS[name].version} is not installed in {prefix(name)} (`python3 scripts/agents.py install`)"
    return None


def install(name: str) -> str | None:
    """npm-install the pinned version into its own folder of the cache, unless it is there. Returns why it
    failed, or None."""
    agent = AGENTS[name]
    if binary(name).exists():
        return None
    why = npm_install(prefix(name), f"{agent.package}@{agent.version}")
    if why is None and not binary(name).exists():
        return f"no {binary(name)} after the install"
    return why


def npm_install(folder: Path, spec: str) -> str | None:
    """``npm install SPEC`` into ``folder`` (made if missing; the gateways' Portkey too). Returns why it
    failed, or None."""
    if shutil.which("npm") is None:
        return "npm is not on PATH"
    folder.mkdir(parents=True, exist_ok=True)
    return run_install(
        ["npm", "install", "--prefix", str(folder), "--no-fund", "--no-audit", "--loglevel=error", spec]
    )


def run_install(argv: list[str]) -> str | None:
    """One install step, 15 minutes at most. Returns why it failed (its last lines), or None."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)
    except subprocess.TimeoutExpired:
        return f"`{' '.join(argv)}` took more than 15 minutes"
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-10:])
        return f"`{' '.join(argv)}` exited {done.returncode}:\n{tail}"
    return None


class Run(NamedTuple):
    """One agent run: its command line and environment (on top of a clean one), in a working directory."""

    argv: list[str]
    env: dict[str, str]


def isolated_env(home: Path) -> dict[str, str]:
    """An environment with nothing of the user's: its own HOME and XDG folders, no proxy, no keys."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "TMPDIR": str(home / "tmp"),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "CI": "true",  # agents keep to non-interactive output
        "NO_PROXY": "127.0.0.1,localhost",
    }
    for folder in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME", "TMPDIR"):
        Path(env[folder]).mkdir(parents=True, exist_ok=True)
    return env


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def recipe(name: str, home: Path, base: str, mcp: dict[str, list[str]] | None = None) -> Run:
    """How ``name`` runs against the provider at ``base`` (http://127.0.0.1:PORT, the proxy in reverse
    mode), with ``home`` as its HOME. Variants: ``codex`` speaks HTTP SSE through a provider table of its
    own; ``codex-ws`` is Codex's built-in OpenAI provider pointed elsewhere, which speaks Responses over
    WebSocket; ``codex-patch`` and ``codex-ws-patch`` are those with a GPT-5 model's name (PATCH_MODEL: the
    provider must answer it as ``agent``, ``--agent-model``), to which Codex declares its custom apply_patch
    tool, and defers its MCP servers' tools behind a client-executed tool search. ``mcp``: the stdio MCP
    servers the agent is given, {name: argv} (Codex, Claude Code, Gemini CLI, opencode).
    ``openai-agents...``: the OpenAI Agents SDK's agent (SDK_RUNS); ``langchain...``, ``pydantic-ai...``: a
    framework's agent (FRAMEWORK_RUNS)."""
    env = isolated_env(home)
    if name in SDK_RUNS:  # its working folder is the one it runs in
        api, tools = SDK_RUNS[name]
        return Run([sys.executable, str(SDK_CLIENT), f"{base}/v1", "--api", api, "--tools", tools], env)
    if name in FRAMEWORK_RUNS:
        framework, api = FRAMEWORK_RUNS[name]
        return Run([sys.executable, str(FRAMEWORKS[framework].client), f"{base}/v1", "--api", api], env)
    agent = "codex" if name.startswith("codex") else name
    exe = str(binary(agent))
    if name == "claude-code":
        env |= {
            "ANTHROPIC_BASE_URL": base,
            "ANTHROPIC_API_KEY": "sk-ant-fake-key",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        # --allowedTools instead of --dangerously-skip-permissions, which refuses to run as root.
        argv = [exe, "-p", PROMPT, "--model", "agent", "--allowedTools", "Bash", "Read"]
        if mcp:  # each server's tools allowed (mcp__NAME), its command in a config file of its own
            argv += [f"mcp__{server}" for server in mcp]
            servers = {server: {"command": c[0], "args": c[1:]} for server, c in mcp.items()}
            _write(home / "mcp.json", json.dumps({"mcpServers": servers}))
            argv += ["--mcp-config", str(home / "mcp.json")]
        return Run(argv, env)
    if name in ("codex", "codex-ws", "codex-patch", "codex-ws-patch"):
        codex_home = home / ".codex"
        model = PATCH_MODEL if name.endswith("-patch") else "agent"
        config = f'model = "{model}"\ncheck_for_update_on_startup = false\n\n[analytics]\nenabled = false\n'
        if not name.startswith("codex-ws"):
            # Codex ignores OPENAI_BASE_URL; a provider table of its own speaks HTTP SSE.
            config = 'model_provider = "fake"\n' + config
            config += (
                '\n[model_providers.fake]\nname = "fake"\n'
                f'base_url = "{base}/v1"\nwire_api = "responses"\nenv_key = "FAKE_API_KEY"\n'
            )
            env["FAKE_API_KEY"] = "sk-fake-key"
        else:
            config = f'openai_base_url = "{base}/v1"\n' + config
            env["CODEX_API_KEY"] = "sk-fake-key"
        for server, command in (mcp or {}).items():
            config += f"\n[mcp_servers.{server}]\ncommand = {json.dumps(command[0])}\nargs = {json.dumps(command[1:])}\n"
        _write(codex_home / "config.toml", config)
        env["CODEX_HOME"] = str(codex_home)
        argv = [exe, "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", PROMPT]
        return Run(argv, env)
    if name == "gemini-cli":
        settings = {
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
        }
        if mcp:  # each server trusted: its tools run without a confirmation
            settings["mcpServers"] = {
                server: {"command": c[0], "args": c[1:], "trust": True} for server, c in mcp.items()
            }
        _write(home / ".gemini" / "settings.json", json.dumps(settings, indent=2))
        env |= {
            "GEMINI_API_KEY": "fake-gemini-key",
            "GOOGLE_GEMINI_BASE_URL": base,
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
        }
        return Run([exe, "-p", PROMPT, "--yolo", "-m", "agent"], env)
    if name == "opencode":
        config = {
            "$schema": "https://opencode.ai/config.json",
            "provider": {
                "fake": {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "fake",
                    "options": {"baseURL": f"{base}/v1", "apiKey": "sk-fake-key"},
                    "models": {"agent": {"name": "agent"}},
                }
            },
            "model": "fake/agent",
            "autoupdate": False,
            "share": "disabled",
        }
        if mcp:
            config["mcp"] = {
                server: {"type": "local", "command": c, "enabled": True} for server, c in mcp.items()
            }
        _write(home / ".config" / "opencode" / "opencode.json", json.dumps(config, indent=2))
        env["OPENCODE_DISABLE_AUTOUPDATE"] = "1"
        return Run([exe, "run", PROMPT], env)
    raise KeyError(name)


# Each agent run in the tests, by the CLI it uses.
RUNS: dict[str, str] = {
    "claude-code": "claude-code",
    "codex": "codex",
    "codex-ws": "codex",
    "gemini-cli": "gemini-cli",
    "opencode": "opencode",
    "openai-agents": SDK_PACKAGE,
    "openai-agents-chat": SDK_PACKAGE,
    "langchain": "langchain",
    "pydantic-ai": "pydantic-ai",
    "litellm-sdk": "litellm",
}


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "where"
    if command == "install":
        failed = 0
        for name, agent in AGENTS.items():
            why = install(name)
            if why is None:
                print(f"agents: {name} {agent.version} at {binary(name)}")
            else:
                failed += 1
                print(f"agents: could not install {agent.package}@{agent.version}: {why}", file=sys.stderr)
        return 1 if failed else 0
    if command == "where":
        print(f"cache: {CACHE}")
        for name in AGENTS:
            print(f"{name}: {missing(name) or binary(name)}")
        print(f"{SDK_PACKAGE}: {missing(SDK_PACKAGE) or metadata.version(SDK_PACKAGE)} (the test extras)")
        for name, framework in FRAMEWORKS.items():
            why = missing(name)
            versions = why or ", ".join(f"{p} {metadata.version(p)}" for p in framework.packages)
            print(f"{name}: {versions} (the test extras)")
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
