"""A real agent of the OpenAI Agents SDK (openai-agents) against a local provider, one streamed turn.

    python tests/openai_agents_client.py BASE_URL [--dir WORKDIR] [--api responses|chat|websocket]
        [--tools builtin|functions]

`--api`: the SDK's Responses model over HTTP (`responses`), over its Responses WebSocket transport
(`websocket`), or its Chat Completions model (`chat`: how the SDK is used with other providers).
`--tools builtin`: OpenAI's built-in client tools, a ShellTool running each command in WORKDIR and an
ApplyPatchTool applying each patch there with the SDK's own `apply_diff`; `--tools functions`: two function
tools, `bash` (a command run in WORKDIR) and `read_file` (a path). The model is `agent`, the fake
provider's scenario for real agents. Prints, as JSON, what its tools did and the agent's final output; a
run the SDK refuses ends with its exception and a non-zero status. A process of its own: the tests'
`scripts/agents.py` would shadow the SDK's `agents` package in the tests' interpreter.
"""

from __future__ import annotations

import asyncio

from agent_tools import Workdir, arguments
from agents import (
    Agent,
    ApplyPatchTool,
    OpenAIProvider,
    RunConfig,
    Runner,
    ShellTool,
    apply_diff,
    function_tool,
    set_tracing_disabled,
)
from agents.editor import ApplyPatchOperation, ApplyPatchResult
from openai import AsyncOpenAI


def main() -> None:
    tools_option = ("--tools", {"choices": ("builtin", "functions"), "default": "builtin"})
    options = arguments(("responses", "chat", "websocket"), tools_option)
    work = Workdir(options.dir)
    workdir, done = work.path, work.done

    def shell(request) -> str:
        return "".join(work.run(command) for command in request.data.action.commands)

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
    client = AsyncOpenAI(base_url=options.base_url, api_key="sk-test-openai-agents", max_retries=0)
    provider = OpenAIProvider(
        openai_client=client,
        use_responses=options.api != "chat",
        use_responses_websocket=options.api == "websocket",
    )
    tools = (
        [ShellTool(executor=shell), ApplyPatchTool(editor=Editor())]
        if options.tools == "builtin"
        else [function_tool(function) for function in work.tools()]
    )
    agent = Agent(name="builder", instructions="Use the tools.", model="agent", tools=tools)

    async def turn() -> str:
        config = RunConfig(model_provider=provider)
        streamed = Runner.run_streamed(agent, "Say hi, then add a file.", run_config=config)
        async for _ in streamed.stream_events():
            pass
        return str(streamed.final_output)

    work.report(asyncio.run(turn()))


if __name__ == "__main__":
    main()
