"""A real Pydantic AI agent (`pydantic-ai-slim[openai]`) against a local provider, streamed, one task.

    python tests/pydantic_ai_client.py BASE_URL [--dir WORKDIR] [--api chat|responses]

`--api chat`: its OpenAIChatModel (Chat Completions: how Pydantic AI is used with most providers and local
servers); `--api responses`: its OpenAIResponsesModel. Two tools, `bash` (a command run in WORKDIR) and
`read_file` (a path in it; tests/agent_tools.py). The model is `agent`, the fake provider's scenario for real agents; the run is
streamed (`run_stream_events`), so Pydantic AI puts each call together from the stream's deltas. Prints, as
JSON, what its tools did and the agent's final answer; a run Pydantic AI refuses ends with its exception
and a non-zero status.
"""

from __future__ import annotations

import asyncio

from agent_tools import Workdir, arguments
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.openai import OpenAIProvider


def main() -> None:
    options = arguments(("chat", "responses"))
    workdir = Workdir(options.dir)
    provider = OpenAIProvider(base_url=options.base_url, api_key="sk-test-pydantic-ai")
    model_class = OpenAIResponsesModel if options.api == "responses" else OpenAIChatModel
    agent = Agent(model_class("agent", provider=provider), instructions="Use the tools.")
    for function in workdir.tools():
        agent.tool_plain(function)

    async def run() -> str:
        final = ""
        async with agent.run_stream_events("Say hi and read notes.txt, both at once.") as events:
            async for event in events:
                if event.event_kind == "agent_run_result":
                    final = str(event.result.output)
        return final

    workdir.report(asyncio.run(run()))


if __name__ == "__main__":
    main()
