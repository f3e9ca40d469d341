"""The official SDKs of the formats the other end-to-end tests drive with raw HTTP: boto3 (Bedrock's
ConverseStream and InvokeModelWithResponseStream, whose binary event stream it parses, checksums and all),
the anthropic SDK's Bedrock client (InvokeModelWithResponseStream, its own decoder), cohere (v2 chat),
ollama (its native /api/chat) and google-genai (generateContent streamed), each through a real mitmdump
with the addon in front of the fake provider.

Each SDK runs two turns of an agent's loop: a streamed turn with two tool calls, the calls put together
from the SDK's own events (by the identity each event carries, as a correct client does), then the next
request, built by the SDK from those calls with a result for each. The SDK gets every call as the provider
sent it; the addon rebuilt the same calls, and checked the next request against them: every echo
matched. The same, with the proxy rewriting each stream (toolcall_lens_inject, toolcall_lens_repair): the
SDK takes the rewritten bytes as it takes the provider's; and with whole (non-streamed) answers, which the
addon reads in the proxy (its own echo index) rather than in its worker."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import anthropic
import boto3
import cohere
import fake_provider as fp
import ollama
import pytest
from botocore.config import Config
from google import genai
from google.genai import types
from lab import BIN, start_fake_provider, start_mitmdump
from mitmproxy import io as mio

NAMES = ("search_circulars", "get_user_profile", "get_weather", "get_time")  # the scenarios' functions
QUESTION = "Find the circulars and my profile."
Calls = list[tuple[str | None, str, dict]]  # (id, name, arguments) as the SDK gave them


def bedrock_client(base: str):
    return boto3.client(
        "bedrock-runtime",
        endpoint_url=base,
        region_name="us-east-1",
        aws_access_key_id="AKIAFAKEFAKEFAKE",
        aws_secret_access_key="fake-secret",
        config=Config(retries={"max_attempts": 0}),
    )


def converse(base: str, model: str, stream: bool) -> tuple[Calls, Callable[[], None]]:
    client = bedrock_client(base)
    tools = {"tools": [{"toolSpec": {"name": n, "inputSchema": {"json": {"type": "object"}}}} for n in NAMES]}
    messages: list[dict] = [{"role": "user", "content": [{"text": QUESTION}]}]

    def ask() -> list[dict]:
        """The tool uses of the answer, streamed (put together by contentBlockIndex) or whole."""
        if not stream:
            answer = client.converse(modelId=model, messages=messages, toolConfig=tools)["output"]["message"]
            return [block["toolUse"] for block in answer["content"] if "toolUse" in block]
        blocks: dict[int, dict] = {}
        for event in client.converse_stream(modelId=model, messages=messages, toolConfig=tools)["stream"]:
            if "contentBlockStart" in event and "toolUse" in event["contentBlockStart"]["start"]:
                use = event["contentBlockStart"]["start"]["toolUse"]
                blocks[event["contentBlockStart"]["contentBlockIndex"]] = {**use, "input": ""}
            elif "contentBlockDelta" in event and "toolUse" in event["contentBlockDelta"]["delta"]:
                delta = event["contentBlockDelta"]
                blocks[delta["contentBlockIndex"]]["input"] += delta["delta"]["toolUse"]["input"]
        return [{**block, "input": json.loads(block["input"])} for _, block in sorted(blocks.items())]

    uses = ask()

    def follow_up() -> None:
        results = [{"toolResult": {"toolUseId": u["toolUseId"], "content": [{"text": "ok"}]}} for u in uses]
        messages.append({"role": "assistant", "content": [{"toolUse": use} for use in uses]})
        messages.append({"role": "user", "content": results})
        ask()

    return [(u["toolUseId"], u["name"], u["input"]) for u in uses], follow_up


def invoke(base: str, model: str, stream: bool) -> tuple[Calls, Callable[[], None]]:
    # Claude on Bedrock: Anthropic's Messages events, each in a frame of Bedrock's event stream.
    client = bedrock_client(base)
    tools = [{"name": n, "input_schema": {"type": "object"}} for n in NAMES]
    body = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 1024, "tools": tools}
    messages: list[dict] = [{"role": "user", "content": QUESTION}]

    def ask() -> list[dict]:
        """The tool_use blocks of the answer, streamed (put together by block index) or whole."""
        request = json.dumps(body | {"messages": messages})
        if not stream:
            answer = json.loads(client.invoke_model(modelId=model, body=request)["body"].read())
            return [block for block in answer["content"] if block["type"] == "tool_use"]
        blocks: dict[int, dict] = {}
        for frame in client.invoke_model_with_response_stream(modelId=model, body=request)["body"]:
            event = json.loads(frame["chunk"]["bytes"])
            if event["type"] == "content_block_start" and event["content_block"]["type"] == "tool_use":
                blocks[event["index"]] = {**event["content_block"], "input": ""}
            elif event["type"] == "content_block_delta" and event["delta"]["type"] == "input_json_delta":
                blocks[event["index"]]["input"] += event["delta"]["partial_json"]
        return [{**block, "input": json.loads(block["input"])} for _, block in sorted(blocks.items())]

    uses = ask()

    def follow_up() -> None:
        results = [{"type": "tool_result", "tool_use_id": u["id"], "content": "ok"} for u in uses]
        messages.extend([{"role": "assistant", "content": uses}, {"role": "user", "content": results}])
        ask()

    return [(u["id"], u["name"], u["input"]) for u in uses], follow_up


def anthropic_bedrock(base: str, model: str, stream: bool) -> tuple[Calls, Callable[[], None]]:
    # The anthropic SDK's own Bedrock client: its own event-stream decoder, its own accumulator.
    client = anthropic.AnthropicBedrock(
        aws_region="us-east-1",
        aws_access_key="AKIAFAKEFAKEFAKE",
        aws_secret_key="fake-secret",
        base_url=base,
        max_retries=0,
    )
    tools = [{"name": n, "input_schema": {"type": "object"}} for n in NAMES]
    messages: list = [{"role": "user", "content": QUESTION}]

    def ask():
        request = {"model": model, "max_tokens": 1024, "messages": messages, "tools": tools}
        if not stream:
            return client.messages.create(**request)
        with client.messages.stream(**request) as answer:
            return answer.get_final_message()

    message = ask()
    uses = [block for block in message.content if block.type == "tool_use"]

    def follow_up() -> None:
        results = [{"type": "tool_result", "tool_use_id": u.id, "content": "ok"} for u in uses]
        messages.extend(
            [{"role": "assistant", "content": message.content}, {"role": "user", "content": results}]
        )
        ask()

    return [(u.id, u.name, u.input) for u in uses], follow_up


def cohere_v2(base: str, model: str, stream: bool) -> tuple[Calls, Callable[[], None]]:
    client = cohere.ClientV2(api_key="fake-key", base_url=base)
    tools = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in NAMES]
    messages: list[dict] = [{"role": "user", "content": QUESTION}]

    def ask() -> list[dict]:
        """The answer's tool calls as the next request carries them, streamed (by event index) or whole."""
        if not stream:
            answer = client.chat(model=model, messages=messages, tools=tools).message
            return [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.function.name, "arguments": c.function.arguments},
                }
                for c in answer.tool_calls or ()
            ]
        calls: dict[int, dict] = {}
        for event in client.chat_stream(model=model, messages=messages, tools=tools):
            if event.type == "tool-call-start":
                call = event.delta.message.tool_calls
                function = {"name": call.function.name, "arguments": call.function.arguments or ""}
                calls[event.index] = {"id": call.id, "type": "function", "function": function}
            elif event.type == "tool-call-delta":
                calls[event.index]["function"]["arguments"] += (
                    event.delta.message.tool_calls.function.arguments or ""
                )
        return [call for _, call in sorted(calls.items())]

    made = ask()

    def follow_up() -> None:
        messages.append({"role": "assistant", "tool_calls": made, "tool_plan": "I will look both up."})
        messages.extend({"role": "tool", "tool_call_id": c["id"], "content": "ok"} for c in made)
        ask()

    return [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in made], follow_up


def ollama_chat(base: str, model: str, stream: bool) -> tuple[Calls, Callable[[], None]]:
    # The library keeps no id on a tool call: it echoes the calls without the ids Ollama streams, and
    # answers each by its tool's name.
    client = ollama.Client(host=base)
    tools = [{"type": "function", "function": {"name": n, "parameters": {"type": "object", "properties": {}}}} for n in NAMES]  # fmt: skip
    messages: list = [{"role": "user", "content": QUESTION}]

    def ask() -> list:
        if not stream:
            return (
                client.chat(model=model, messages=messages, tools=tools, stream=False).message.tool_calls
                or []
            )
        return [c for part in client.chat(model=model, messages=messages, tools=tools, stream=True) for c in part.message.tool_calls or ()]  # fmt: skip

    made = ask()

    def follow_up() -> None:
        messages.append({"role": "assistant", "content": "", "tool_calls": made})
        messages.extend({"role": "tool", "content": "ok", "tool_name": c.function.name} for c in made)
        ask()

    return [(None, c.function.name, dict(c.function.arguments)) for c in made], follow_up


def gemini(base: str, model: str, stream: bool) -> tuple[Calls, Callable[[], None]]:
    client = genai.Client(api_key="fake-key", http_options=types.HttpOptions(base_url=base))
    declarations = [types.FunctionDeclaration(name=n, parameters={"type": "object"}) for n in NAMES]
    config = types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=declarations)],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )
    contents = [types.Content(role="user", parts=[types.Part(text=QUESTION)])]

    def ask() -> list:
        """The parts of the model's turn, streamed (chunk by chunk) or whole."""
        if not stream:
            return client.models.generate_content(model=model, contents=contents, config=config).candidates[0].content.parts  # fmt: skip
        chunks = client.models.generate_content_stream(model=model, contents=contents, config=config)
        return [part for chunk in chunks for part in chunk.candidates[0].content.parts or ()]

    parts = ask()
    made = [part.function_call for part in parts if part.function_call]

    def follow_up() -> None:
        answers = [
            types.Part(
                function_response=types.FunctionResponse(id=c.id, name=c.name, response={"output": "ok"})
            )
            for c in made
        ]
        contents.extend([types.Content(role="model", parts=parts), types.Content(role="user", parts=answers)])
        ask()

    return [(c.id, c.name, dict(c.args)) for c in made], follow_up


SDKS: dict[str, tuple[str, Callable]] = {  # run: (its format, the SDK's two turns)
    "boto3-converse": ("bedrock-converse", converse),
    "boto3-invoke": ("bedrock-invoke", invoke),
    "anthropic-bedrock": ("bedrock-invoke", anthropic_bedrock),
    "cohere": ("cohere-v2", cohere_v2),
    "ollama": ("ollama-chat", ollama_chat),
    "google-genai": ("gemini", gemini),
}
WHOLE = ("gemini", "ollama-chat")  # every call arrives whole: nothing to misroute, nothing to interleave
# How the proxy runs: its options, the scenario the SDKs ask for, the rewrite the result then names. In
# "whole" the SDKs ask for a whole (non-streamed) answer, which the addon reads as the proxy's own.
MODES = {
    "plain": ((), "interleaved", None),
    "whole": ((), "interleaved", None),
    "interleave": (("toolcall_lens_inject=interleave",), "sequential", ("inject", "interleave")),
    "rechunk": (("toolcall_lens_inject=rechunk",), "interleaved", ("inject", "rechunk")),
    "serialize": (("toolcall_lens_repair=serialize",), "interleaved", ("repair", "serialize")),
}


@pytest.fixture(scope="module", params=list(MODES))
def session(request, tmp_path_factory):
    """Every SDK's two turns through one mitmdump in this mode: {run: (the SDK's calls, [its two flows])}."""
    options, scenario, _ = MODES[request.param]
    dump = tmp_path_factory.mktemp(f"sdks-{request.param}") / "flows.mitm"
    provider, provider_port = start_fake_provider(0.002)
    made: dict[str, Calls] = {}
    try:
        proxy, port = start_mitmdump(provider_port, dump, *options)
        try:
            for run, (_, turns) in SDKS.items():
                made[run], follow_up = turns(f"http://127.0.0.1:{port}", scenario, request.param != "whole")
                follow_up()
        finally:
            proxy.stop()
    finally:
        provider.stop()
    with Path(dump).open("rb") as file:
        flows = list(mio.FlowReader(file).stream())
    assert len(flows) == 2 * len(SDKS), [f.request.path for f in flows]
    runs = {run: (made[run], flows[2 * n : 2 * n + 2]) for n, run in enumerate(SDKS)}
    return request.param, runs, dump


def calls_of(flow) -> list[tuple[str | None, str, dict]]:
    result = flow.metadata["toolcall_lens"]
    return [
        (c["id"], c["name"], json.loads(c["arguments"])) for ch in result["choices"] for c in ch["tool_calls"]
    ]


@pytest.mark.parametrize("run", list(SDKS))
def test_the_sdk_gets_the_calls_sent_the_addon_rebuilt_them_and_matched_their_echoes(session, run):
    mode, runs, _ = session
    _, scenario, rewrite = MODES[mode]
    format = SDKS[run][0]
    made, (first, second) = runs[run]
    sent = [(c["id"], c["name"], json.loads(c["arguments"])) for c in fp.expected_calls(scenario, format)]
    # The SDK took every byte the proxy passed (rewritten or not): its calls are the ones sent (Ollama's
    # library keeps no id).
    assert made == [(None if format == "ollama-chat" else i, n, a) for i, n, a in sent]
    result = first.metadata["toolcall_lens"]
    assert result["format"] == format and calls_of(first) == sent
    said = [w["code"] for w in result["warnings"] if w["severity"] == "warning"]
    if mode == "plain":  # the provider's interleaving is the one true warning
        assert said == ([] if format in WHOLE else ["recency-misroute"]), result["warnings"]
    elif mode == "whole":  # whole calls: nothing to misroute
        assert said == [] and result["streamed"] is False, result["warnings"]
    else:  # the rewrite was made, or said why not (calls that come whole have nothing to interleave)
        kind, name = rewrite
        done = (result.get("rewrite") or {}).get(kind) or []
        assert (name in done) == (name == "rechunk" or format not in WHOLE), result.get("rewrite")
    # The SDK's next request echoed both calls and answered both: the addon matched every echo.
    follow_up = second.metadata["toolcall_lens"]
    evidence = follow_up["evidence"]
    assert (evidence["matched"], evidence["unanswered"], evidence["unknown"]) == (2, [], []), evidence
    assert evidence["earlier_flows"] == [first.id]
    # The two turns are one session, told by the conversation the next request carried, each call answered.
    assert follow_up["session"]["id"] == result["session"]["id"] and follow_up["session"]["turn"] == 2
    assert follow_up["session"]["by"] == f"the conversation of flow {first.id}"
    answered = [r.get("name") if r["id"] is None else r["id"] for r in follow_up["session"]["tool_results"]]
    assert answered == [i or n for i, n, _ in made], follow_up["session"]
    codes = {w["code"] for w in follow_up["warnings"]}
    assert not codes & {"client-misassembled", "unanswered-call", "unknown-tool-call-id"}, follow_up[
        "warnings"
    ]


def test_the_cli_reads_each_sdks_two_turns_as_one_session_with_every_call_answered(session):
    mode, runs, dump = session
    done = subprocess.run(
        [str(BIN / "toolcall-lens"), "sessions", "--json", str(dump)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    sessions = json.loads(done.stdout)["sessions"]
    found = {tuple(turn["flow_id"] for turn in record["turns"]): record for record in sessions}
    assert set(found) == {(first.id, second.id) for _, (first, second) in runs.values()}, mode
    for record in sessions:
        first_turn = record["turns"][0]
        assert [call["answered"] for call in first_turn["calls"]] == [True, True], record
        assert record["unanswered"] == [], record
