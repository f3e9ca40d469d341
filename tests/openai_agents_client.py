"""A real agent of the OpenAI Agents SDK (openai-agents) with OpenAI's built-in client tools: its ShellTool
runs each command in WORKDIR, its ApplyPatchTool applies each patch there with the SDK's own `apply_diff`.

    python tests/openai_agents_client.py BASE_URL WORKDIR [http|websocket]

Runs one streamed turn of the agent (model `agent`, the fake provider's scenario for real agents) against
the Responses API at BASE_URL, over HTTP or over a WebSocket (the SDK's Responses WebSocket transport), and
prints, as JSON, what its tools did and the agent's final output. A process of its own: the test's `scripts/agents.py` would shadow
the SDK's `agents` package in the tests' interpreter.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from agents import (
    Agent,
    ApplyPatchTool,
    OpenAIProvider,
    RunConfig,
    Runner,
    ShellTool,
    apply_diff,
    set_tracing_disabled,
)
from agents.editor import ApplyPatchOperation, ApplyPatchResult
from openai import AsyncOpenAI


def main() -> None:
    base_url, workdir = sys.argv[1], Path(sys.argv[2])
    transport = sys.argv[3] if len(sys.argv) > 3 else "http"
    done: list[dict] = []

    def shell(request) -> str:
        outputs = []
        for command in request.data.action.commands:
            run = subprocess.run(
                command, shell=True, cwd=workdir, capture_output=True, text=True, timeout=30, check=False
            )
            done.append({"tool": "shell", "command": command, "exit": run.returncode})
            outputs.append(run.stdout + run.stderr)
        return "".join(outputs)

    class Editor:
        def create_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
            (workdir / operation.path).write_text(apply_diff("", operation.diff or "", mode="create"))
            done.append({"tool": "apply_patch", "operation": operation.type, "path": operation.path})
            return ApplyPatchResult(output=f"created {operation.path}")

        def update_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
            path = workdir / operation.path
            path.write_text(apply_diff(path.read_text(), operation.diff or ""))
            done.append({"tool": "apply_patch", "operation": operation.type, "path": operation.path})
            return ApplyPatchResult(output=f"updated {operation.path}")

        def delete_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
            (workdir / operation.path).unlink()
            done.append({"tool": "apply_patch", "operation": operation.type, "path": operation.path})
            return ApplyPatchResult(output=f"deleted {operation.path}")

    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=base_url, api_key="sk-test-openai-agents", max_retries=0)
    provider = OpenAIProvider(
        openai_client=client, use_responses=True, use_responses_websocket=transport == "websocket"
    )
    agent = Agent(
        name="builder",
        instructions="Use the tools.",
        model="agent",
        tools=[ShellTool(executor=shell), ApplyPatchTool(editor=Editor())],
    )

    async def turn() -> str:
        config = RunConfig(model_provider=provider)
        run = Runner.run_streamed(agent, "Say hi, then add a file.", run_config=config)
        async for _ in run.stream_events():
            pass
        return str(run.final_output)

    final = asyncio.run(turn())
    print(json.dumps({"done": done, "final": final}))


if __name__ == "__main__":
    main()
