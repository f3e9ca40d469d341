"""A real LangChain agent (`langchain.agents.create_agent`, LangGraph's tool loop) on `langchain-openai`'s
ChatOpenAI against a local provider, streamed, one task.

    python tests/langchain_client.py BASE_URL [--dir WORKDIR] [--api chat|responses]

`--api chat`: ChatOpenAI over Chat Completions (how LangChain is used with most providers and local
servers); `--api responses`: the same over the Responses API (`use_responses_api=True`). Two tools, `bash`
(a command run in WORKDIR) and `read_file` (a path in it; tests/agent_tools.py). The model is `agent`, the fake provider's
scenario for real agents; the agent's messages are streamed (`stream_mode="messages"`), so ChatOpenAI puts
each call together from the stream's chunks, as an agent that shows its progress does. Prints, as JSON,
what its tools did and the agent's final answer; a run LangChain refuses ends with its exception and a
non-zero status.
"""

from __future__ import annotations

from agent_tools import Workdir, arguments
from langchain.agents import create_agent
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI


def main() -> None:
    options = arguments(("chat", "responses"))
    workdir = Workdir(options.dir)
    model = ChatOpenAI(
        model="agent",
        base_url=options.base_url,
        api_key="sk-test-langchain",
        streaming=True,
        max_retries=0,
        use_responses_api=options.api == "responses",
    )
    tools = [tool(function) for function in workdir.tools()]
    agent = create_agent(model, tools=tools, system_prompt="Use the tools.")
    final = ""
    task = {"messages": [{"role": "user", "content": "Say hi and read notes.txt, both at once."}]}
    for chunk, _ in agent.stream(task, stream_mode="messages"):
        if chunk.type == "AIMessageChunk" and not chunk.tool_call_chunks:
            final += chunk.text
    workdir.report(final)


if __name__ == "__main__":
    main()
