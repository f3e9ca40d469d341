"""A real LLM gateway for the tests: LiteLLM's proxy, pinned here (the one place it is pinned), installed into
a virtual environment of its own in a cache outside the repository (it brings hundreds of packages the
project does not want in its own), and run on 127.0.0.1 against a local provider. `.ci/run` installs it;
tests/live/test_gateways.py puts one mitmdump with the addon on both of its sides and sends its provider's
streams every hostile shape of the test bench (docs/test-bench.md, "Test your gateway").

Each ROUTES entry is a way through the gateway: the API its client speaks, and the model the gateway maps
it to, whose provider prefix says which API LiteLLM speaks upstream (`hosted_vllm/`: Chat Completions, as
to a local vLLM, Ollama or llama.cpp server; `openai/`: the Responses API for Messages and Responses
clients; `anthropic/`: Anthropic Messages). The fake provider answers the model's name after the prefix
(`sequential`: two calls, one after the other).

    python3 scripts/gateways.py install     # idempotent; a failed install says why, and the exit status is 1
    python3 scripts/gateways.py where       # where it is, or why it is missing
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

PACKAGE, VERSION = "litellm[proxy]", "1.108.7"
NAME = "litellm"
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "toolcall-lens" / "gateways"
PREFIX = CACHE / f"{NAME}-{VERSION}"
BINARY = PREFIX / "bin" / "litellm"
# LiteLLM refuses to start without a master key (clients then send it as their API key).
MASTER_KEY = "sk-gateway-test-key-0123456789abcdef"


class Route(NamedTuple):
    client: str  # the API the client speaks to the gateway: chat, messages or responses
    model: str  # LiteLLM's model, its prefix naming the upstream API; the fake provider's scenario after it
    upstream: str  # the format the gateway's provider streams (as the addon names it)


ROUTES: dict[str, Route] = {
    "chat-from-chat": Route("chat", "hosted_vllm/sequential", "openai-chat"),
    "messages-from-chat": Route("messages", "hosted_vllm/sequential", "openai-chat"),
    "chat-from-messages": Route("chat", "anthropic/sequential", "anthropic-messages"),
    "responses-from-messages": Route("responses", "anthropic/sequential", "anthropic-messages"),
    "messages-from-responses": Route("messages", "openai/sequential", "openai-responses"),
}


def missing() -> str | None:
    """Why the gateway cannot run here, or None."""
    if not BINARY.exists():
        return f"{NAME} {VERSION} is not installed in {PREFIX} (`python3 scripts/gateways.py install`)"
    return None


def install(python: str = sys.executable) -> str | None:
    """A virtual environment of ``python`` (3.12 or newer) in the cache with the pinned gateway, unless it
    is there. Returns why it failed, or None."""
    if BINARY.exists():
        return None
    steps = (
        [python, "-m", "venv", "--clear", str(PREFIX)],
        [
            str(PREFIX / "bin" / "pip"),
            "install",
            "-q",
            "--disable-pip-version-check",
            f"{PACKAGE}=={VERSION}",
        ],
    )
    for argv in steps:
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)
        except subprocess.TimeoutExpired:
            return f"`{' '.join(argv)}` took more than 15 minutes"
        if done.returncode != 0:
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-10:])
            return f"`{' '.join(argv)}` exited {done.returncode}:\n{tail}"
    return None if BINARY.exists() else f"no {BINARY} after the install"


def config(upstream: str) -> str:
    """LiteLLM's config (YAML; JSON is YAML): each route's model, by its own name, sent to ``upstream``
    (http://127.0.0.1:PORT, the proxy in front of the provider)."""
    models = []
    for model in sorted({route.model for route in ROUTES.values()}):
        base = upstream if model.startswith("anthropic/") else f"{upstream}/v1"
        params = {"model": model, "api_base": base, "api_key": "sk-fake-provider-key"}
        models.append({"model_name": model, "litellm_params": params})
    return json.dumps({"model_list": models, "litellm_settings": {"telemetry": False}}, indent=2)


def command(config_file: Path, port: int) -> tuple[list[str], dict[str, str]]:
    """The gateway's command line on 127.0.0.1:``port``, and its environment: no proxy variables (its own
    HTTP client honours them), no fetch of the model price map from the network."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "LANG": "C.UTF-8",
        "NO_COLOR": "1",
        "LITELLM_MASTER_KEY": MASTER_KEY,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    argv = [str(BINARY), "--config", str(config_file), "--host", "127.0.0.1", "--port", str(port)]
    return argv + ["--telemetry", "False"], env


def main(argv: list[str]) -> int:
    verb = argv[0] if argv else "where"
    if verb == "install":
        why = install()
        if why is not None:
            print(f"gateways: could not install {PACKAGE}=={VERSION}: {why}", file=sys.stderr)
            return 1
        print(f"gateways: {NAME} {VERSION} at {BINARY}")
        return 0
    if verb == "where":
        print(f"cache: {CACHE}")
        print(f"{NAME}: {missing() or BINARY}")
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
