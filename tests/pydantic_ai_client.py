"""A real Pydantic AI agent (`pydantic-ai-slim[openai]`) against a local provider, streamed, one task.

    python tests/pydantic_ai_client.py BASE_URL [--dir WORKDIR] [--api chat|responses]

`--api chat`: its OpenAIChatModel (Chat Completions: how Pydantic AI is used with most providers and local
servers); `--api responses`: its OpenAIResponsesModel. Two tools, `bash` (a command run in WORKDIR) and
`read_file` (a path in it). The model is `agent`, the fake provider's scenario for real agents; the run is
streamed (`run_stream_events`), so Pydantic AI puts each call together from the stream's deltas. Prints, as
JSON, what its tools did and the agent's final answer; a run Pydantic AI refuses ends with its exception
and a non-zero status.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.openai import OpenAIProvider


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("base_url")
    parser.add_argument("--dir", default=".")
    parser.add_argument("--api", choices=("chat", "responses"), default="chat")
    options = parser.parse_args()
    workdir = Path(options.dir)
    done: list[dict] = []

    provider = OpenAIProvider(base_url=options.base_url, api_key="sk-test-pydantic-ai")
    model_class = OpenAIResponsesModel if options.api == "responses" else OpenAIChatModel
    agent = Agent(model_class("agent", provider=provider), instructions="Use the tools.")

    @agent.tool_plain
    def bash(command: str) -> str:
        """Run a shell command in the working folder."""
        ran = subprocess.run(
            command, shell=True, cwd=workdir, capture_output=True, text=True, timeout=30, check=False
        )
        done.append({"tool": "shell", "command": command, "exit": ran.returncode})
        return ran.stdout + ran.stderr

    @agent.tool_plain
    def read_file(path: str) -> str:
        """Read a file."""
        done.append({"tool": "read_file", "path": path})
        return (workdir / path).read_text()

    async def run() -> str:
        final = ""
        async with agent.run_stream_events("Say hi and read notes.txt, both at once.") as events:
            async for event in events:
                if event.event_kind == "agent_run_result":
                    final = str(event.result.output)
        return final

    final = asyncio.run(run())
    print(json.dumps({"done": done, "final": final}))


if __name__ == "__main__":
    main()
