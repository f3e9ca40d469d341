"""Real LLM gateways for the tests, pinned here (the one place they are pinned), installed into a cache
outside the repository, and run on 127.0.0.1 against a local provider: LiteLLM's proxy (into a virtual
environment of its own: it brings hundreds of packages the project does not want in its own) and Portkey's
AI gateway (npm). `.ci/run` installs them; tests/live/test_gateways.py puts one mitmdump with the addon on
both sides of each and sends its provider's streams every hostile shape of the test bench (docs/test-bench.md,
"Test your gateway").

Each route is a way through a gateway: the API its client speaks, the model it asks for, and the API the
gateway speaks upstream. LiteLLM maps the model by its provider prefix (`hosted_vllm/`: Chat Completions, as
to a local vLLM, Ollama or llama.cpp server; `openai/`: the Responses API for Messages and Responses
clients; `anthropic/`: Anthropic Messages). Portkey takes the provider from the client's request
(`x-portkey-provider`) and the provider's address from it too (`x-portkey-custom-host`). The fake provider
answers the model's name after any prefix (`sequential`: two calls, one after the other).

    python3 scripts/gateways.py install     # idempotent; a failed install says why, and the exit status is 1
    python3 scripts/gateways.py where       # where each is, or why it is missing
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import NamedTuple

from agents import npm_install, run_install

CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "toolcall-lens" / "gateways"
NODE = Path(__file__).resolve().parent / "node"  # the preloads Portkey runs with
# LiteLLM refuses to start without a master key (clients then send it as their API key); Portkey hands the
# client's key on to the provider.
MASTER_KEY = "sk-gateway-test-key-0123456789abcdef"


class Route(NamedTuple):
    client: str  # the API the client speaks to the gateway: chat, messages or responses
    model: str  # the model the client asks for; the fake provider's scenario after any prefix
    upstream: str  # the format the gateway's provider streams (as the addon names it)
    provider: str | None = None  # Portkey: the provider it is told to speak to (x-portkey-provider)
    path: str = ""  # Portkey: what follows the provider's address in x-portkey-custom-host


class Gateway(NamedTuple):
    name: str
    title: str  # as the docs name it, with its version
    package: str  # on PyPI (LiteLLM) or npm (Portkey)
    version: str  # exact
    ready: str  # a line it prints once it listens (a regular expression)
    routes: dict[str, Route]


GATEWAYS: dict[str, Gateway] = {
    "litellm": Gateway(
        "litellm",
        "LiteLLM",
        "litellm[proxy]",
        "1.108.7",
        r"Uvicorn running on",
        {
            "chat-from-chat": Route("chat", "hosted_vllm/sequential", "openai-chat"),
            "messages-from-chat": Route("messages", "hosted_vllm/sequential", "openai-chat"),
            "chat-from-messages": Route("chat", "anthropic/sequential", "anthropic-messages"),
            "responses-from-messages": Route("responses", "anthropic/sequential", "anthropic-messages"),
            "messages-from-responses": Route("messages", "openai/sequential", "openai-responses"),
        },
    ),
    "portkey": Gateway(
        "portkey",
        "Portkey's AI gateway",
        "@portkey-ai/gateway",
        "1.15.2",
        r"Ready for connections",
        {
            "chat-from-chat": Route("chat", "sequential", "openai-chat", "openai", "/v1"),
            "chat-from-messages": Route("chat", "sequential", "anthropic-messages", "anthropic", "/v1"),
            "chat-from-cohere": Route("chat", "sequential", "cohere-v2", "cohere"),
            "messages-from-messages": Route(
                "messages", "sequential", "anthropic-messages", "anthropic", "/v1"
            ),
            "responses-from-responses": Route("responses", "sequential", "openai-responses", "openai", "/v1"),
        },
    ),
}


def prefix(name: str) -> Path:
    gateway = GATEWAYS[name]
    return CACHE / f"{name}-{gateway.version}"


def binary(name: str) -> Path:
    """What runs it: LiteLLM's command, Portkey's server script (run with node)."""
    if name == "portkey":
        return prefix(name) / "node_modules" / "@portkey-ai" / "gateway" / "build" / "start-server.js"
    return prefix(name) / "bin" / "litellm"


def missing(name: str) -> str | None:
    """Why the gateway cannot run here, or None."""
    gateway = GATEWAYS[name]
    if name == "portkey" and shutil.which("node") is None:
        return "node is not on PATH"
    if not binary(name).exists():
        return (
            f"{gateway.title} {gateway.version} is not installed in {prefix(name)} "
            "(`python3 scripts/gateways.py install`)"
        )
    return None


def install(name: str, python: str = sys.executable) -> str | None:
    """The pinned gateway in the cache, unless it is there: LiteLLM in a virtual environment of ``python``
    (3.12 or newer), Portkey with npm. Returns why it failed, or None."""
    gateway = GATEWAYS[name]
    if binary(name).exists():
        return None
    if name == "litellm":
        pip = str(prefix(name) / "bin" / "pip")
        why = run_install([python, "-m", "venv", "--clear", str(prefix(name))]) or run_install(
            [pip, "install", "-q", "--disable-pip-version-check", f"{gateway.package}=={gateway.version}"]
        )
    else:
        why = npm_install(prefix(name), f"{gateway.package}@{gateway.version}")
    if why is None and not binary(name).exists():
        return f"no {binary(name)} after the install"
    return why


def config(upstream: str) -> str:
    """LiteLLM's config (YAML; JSON is YAML): each route's model, by its own name, sent to ``upstream``
    (http://127.0.0.1:PORT, the proxy in front of the provider)."""
    models = []
    for model in sorted({route.model for route in GATEWAYS["litellm"].routes.values()}):
        base = upstream if model.startswith("anthropic/") else f"{upstream}/v1"
        params = {"model": model, "api_base": base, "api_key": "sk-fake-provider-key"}
        models.append({"model_name": model, "litellm_params": params})
    return json.dumps({"model_list": models, "litellm_settings": {"telemetry": False}}, indent=2)


def command(name: str, folder: Path, port: int, upstream: str) -> tuple[list[str], dict[str, str]]:
    """The gateway's command line on 127.0.0.1:``port``, sending its routes to ``upstream``
    (http://127.0.0.1:PORT; Portkey is told it by each request: ``headers``), its files in ``folder``; and
    its environment: no proxy variables (their HTTP clients honour them), nothing fetched from the network."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "LANG": "C.UTF-8",
        "NO_COLOR": "1",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    if name == "portkey":
        # It listens on every interface, and fails every stream it hands on under Node's fetch: the two
        # preloads (scripts/node/) keep it on loopback and copy each response it gets.
        preloads = ["--require", str(NODE / "loopback.cjs"), "--require", str(NODE / "mutable_fetch.cjs")]
        argv = ["node", *preloads, str(binary(name)), f"--port={port}", "--headless"]
        return argv, env
    (folder / "litellm.yaml").write_text(config(upstream))
    env |= {"LITELLM_MASTER_KEY": MASTER_KEY, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    argv = [str(binary(name)), "--config", str(folder / "litellm.yaml"), "--host", "127.0.0.1"]
    return argv + ["--port", str(port), "--telemetry", "False"], env


def headers(route: Route, upstream: str) -> dict[str, str]:
    """What a client of the gateway sends besides its key: Portkey's provider and the provider's address."""
    if route.provider is None:
        return {}
    return {"x-portkey-provider": route.provider, "x-portkey-custom-host": upstream + route.path}


def main(argv: list[str]) -> int:
    verb = argv[0] if argv else "where"
    if verb == "install":
        failed = 0
        for name, gateway in GATEWAYS.items():
            why = install(name)
            if why is not None:
                print(
                    f"gateways: could not install {gateway.package} {gateway.version}: {why}", file=sys.stderr
                )
                failed = 1
            else:
                print(f"gateways: {name} {gateway.version} at {binary(name)}")
        return failed
    if verb == "where":
        print(f"cache: {CACHE}")
        for name in GATEWAYS:
            print(f"{name}: {missing(name) or binary(name)}")
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
