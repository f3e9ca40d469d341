"""A real agent loop on LiteLLM's Python SDK (`litellm.completion(stream=True)`, each response put together
by LiteLLM's own `stream_chunk_builder`, as its docs show for streamed tool calls and as agents built on
it do) against a local provider, one task.

    python tests/litellm_client.py BASE_URL [--dir WORKDIR]

The model is `openai/agent`: LiteLLM's OpenAI-compatible provider (a local vLLM, Ollama or llama.cpp
server, a gateway), the fake provider's scenario for real agents. Two tools, `bash` (a command run in
WORKDIR) and `read_file` (a path in it; tests/agent_tools.py); a call of a tool it does not have, or with
arguments that are not JSON, is answered with the error, as an agent's tool loop does. Prints, as JSON, what
its tools did and the final answer; a run LiteLLM refuses ends with its exception and a non-zero status.
"""

from __future__ import annotations

import json
import os

from agent_tools import Workdir, arguments

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch of the price map at import
import litellm

litellm.suppress_debug_info = True  # else it prints its provider list to stdout for a model it lacks
PROMPT = "Say hi and read notes.txt, both at once."
TURNS = 4


def schema(parameter: str) -> dict:
    return {"type": "object", "properties": {parameter: {"type": "string"}}, "required": [parameter]}


def main() -> None:
    options = arguments(("chat",))
    workdir = Workdir(options.dir)
    functions = {function.__name__: function for function in workdir.tools()}
    tools = [
        {
            "type": "function",
            "function": {"name": name, "description": function.__doc__, "parameters": schema(parameter)},
        }
        for (name, function), parameter in zip(functions.items(), ("command", "path"), strict=True)
    ]
    messages: list[dict] = [{"role": "user", "content": PROMPT}]
    for _ in range(TURNS):
        chunks = list(
            litellm.completion(
                model="openai/agent",
                api_base=options.base_url,
                api_key="sk-test-litellm",
                messages=messages,
                tools=tools,
                stream=True,
            )
        )
        message = litellm.stream_chunk_builder(chunks, messages=messages).choices[0].message
        calls = message.tool_calls or []
        if not calls:
            workdir.report(message.content or "")
            return
        messages.append(
            {
                "role": "assistant",
                "content": message.content,
                "tool_calls": [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.function.name, "arguments": call.function.arguments},
                    }
                    for call in calls
                ],
            }
        )
        for call in calls:
            function = functions.get(call.function.name)
            if function is None:
                output = f"error: no tool named {call.function.name!r}"
            else:
                try:
                    output = function(**json.loads(call.function.arguments or "{}"))
                except (ValueError, TypeError, OSError) as exc:
                    output = f"error: {exc}"
            messages.append({"role": "tool", "tool_call_id": call.id, "content": output})
    raise SystemExit(f"no final answer after {TURNS} turns")


if __name__ == "__main__":
    main()
