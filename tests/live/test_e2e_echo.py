"""The client's follow-up request as evidence, end to end: through a real mitmdump with the addon, a
small client of our own that rebuilds streams by the recency rule sends back its (wrong) calls; the
official SDKs, which rebuild correctly, send back the right ones. Chat Completions, Responses, Anthropic.
Then the CLI reads the dump and finds the same."""

from __future__ import annotations

import http.client
import json
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anthropic
import openai
import pytest
from lab import BIN, start_fake_provider, start_mitmdump
from mitmproxy import io as mio

from accumulator.decoding import ContentEncoder

QUESTION = "Find the circulars and my profile."
CHAT_TOOLS = [
    {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
    for n in ("search_circulars", "get_user_profile")
]


def post(port: int, path: str, body: dict, case: str, coding: str | None = None) -> bytes:
    """One request; ``coding``: its body compressed so (Content-Encoding), as Codex sends its own."""
    headers = {"Content-Type": "application/json", "X-Test-Case": case}
    data = json.dumps(body).encode()
    if coding is not None:
        encoder = ContentEncoder(coding)
        data = encoder.encode(data) + encoder.finish()
        headers["Content-Encoding"] = coding
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("POST", path, data, headers)
    data = conn.getresponse().read()
    conn.close()
    return data


def sse_payloads(body: bytes) -> list[dict]:
    return [json.loads(line[6:]) for line in body.split(b"\n") if line.startswith(b"data: {")]


# --- a client that appends every fragment to the latest call, one per format ---------------------------


def recency_chat(body: bytes) -> list[dict]:
    calls: list[dict] = []
    for chunk in sse_payloads(body):
        for choice in chunk.get("choices", []):
            for delta in choice.get("delta", {}).get("tool_calls") or []:
                function = delta.get("function", {})
                if function.get("name"):
                    calls.append({"id": delta.get("id"), "name": function["name"], "arguments": ""})
                calls[-1]["arguments"] += function.get("arguments") or ""
    return calls


def recency_responses(body: bytes) -> list[dict]:
    """Function calls and custom tools' calls alike (``custom``: the item's type)."""
    calls: list[dict] = []
    for event in sse_payloads(body):
        if event["type"] == "response.output_item.added" and event["item"]["type"] in RESPONSES_CALLS:
            item = event["item"]
            calls.append({"id": item["call_id"], "name": item["name"], "arguments": "", "type": item["type"]})
        elif event["type"] in (
            "response.function_call_arguments.delta",
            "response.custom_tool_call_input.delta",
        ):
            calls[-1]["arguments"] += event["delta"]
    return calls


# A call's item in a Responses request, by its type: (its output item, the field of its arguments).
RESPONSES_CALLS = {"function_call": ("function_call_output", "arguments"), "custom_tool_call": ("custom_tool_call_output", "input")}  # fmt: skip


def responses_echo(calls: list[dict]) -> list[dict]:
    """The calls as a client sends them back in its next request's input, then their outputs."""
    items = [
        {
            "type": c["type"],
            "call_id": c["id"],
            "name": c["name"],
            RESPONSES_CALLS[c["type"]][1]: c["arguments"],
        }
        for c in calls
    ]
    return items + [
        {"type": RESPONSES_CALLS[c["type"]][0], "call_id": c["id"], "output": "ok"} for c in calls
    ]


def recency_anthropic(body: bytes) -> list[dict]:
    calls: list[dict] = []
    for event in sse_payloads(body):
        if event["type"] == "content_block_start" and event["content_block"]["type"] == "tool_use":
            block = event["content_block"]
            calls.append({"id": block["id"], "name": block["name"], "arguments": ""})
        elif event["type"] == "content_block_delta" and event["delta"]["type"] == "input_json_delta":
            calls[-1]["arguments"] += event["delta"]["partial_json"]
    return calls


def assistant_turn(calls: list[dict], rename: str = "") -> dict:
    """A Chat assistant message echoing these calls (their names with ``rename`` appended)."""
    return {
        "role": "assistant",
        "tool_calls": [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"] + rename, "arguments": c["arguments"]},
            }
            for c in calls
        ],
    }


def parsed(arguments: str) -> dict:
    try:
        return json.loads(arguments or "{}")
    except ValueError:
        return {}  # what a naive client sends when its own arguments do not parse


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    dump = tmp_path_factory.mktemp("e2e-echo") / "flows.mitm"
    provider, provider_port = start_fake_provider(delay=0.002)
    try:
        proxy, port = start_mitmdump(provider_port, dump)
        try:
            converse(port)
        finally:
            proxy.stop()
    finally:
        provider.stop()
    with open(dump, "rb") as f:
        flows = {flow.request.headers.get("X-Test-Case"): flow for flow in mio.FlowReader(f).stream()}
    return flows, dump


def converse(port: int) -> None:
    # Chat Completions, by a recency client.
    body = post(
        port,
        "/v1/chat/completions",
        {
            "model": "interleaved",
            "stream": True,
            "messages": [{"role": "user", "content": QUESTION}],
            "tools": CHAT_TOOLS,
        },
        "chat/recency/1",
    )
    calls = recency_chat(body)
    messages = [
        {"role": "user", "content": QUESTION},
        assistant_turn(calls),
    ] + [{"role": "tool", "tool_call_id": c["id"], "content": "ok"} for c in calls]
    post(
        port,
        "/v1/chat/completions",
        {"model": "text", "stream": True, "messages": messages, "tools": CHAT_TOOLS},
        "chat/recency/2",
    )

    # Chat Completions, by the official openai SDK.
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="test", max_retries=0)
    first = [{"role": "user", "content": QUESTION}]
    with client.chat.completions.stream(
        model="interleaved", messages=first, tools=CHAT_TOOLS, extra_headers={"X-Test-Case": "chat/sdk/1"}
    ) as stream:
        message = stream.get_final_completion().choices[0].message
    follow = first + [message.model_dump(exclude_none=True, include={"role", "content", "tool_calls"})]
    follow += [{"role": "tool", "tool_call_id": c.id, "content": "ok"} for c in message.tool_calls]
    for _ in client.chat.completions.create(
        model="text",
        messages=follow,
        tools=CHAT_TOOLS,
        stream=True,
        extra_headers={"X-Test-Case": "chat/sdk/2"},
    ):
        pass

    # Responses API, by a recency client (its requests plain, then zstd-compressed as Codex sends its
    # own to OpenAI's backend), then by the SDK.
    tools = [
        {"type": "function", "name": n, "parameters": {"type": "object"}}
        for n in ("search_circulars", "get_user_profile")
    ]
    for api, coding in (("responses", None), ("responses-zstd", "zstd")):
        body = post(
            port,
            "/v1/responses",
            {"model": "interleaved", "stream": True, "input": QUESTION, "tools": tools},
            f"{api}/recency/1",
            coding,
        )
        calls = recency_responses(body)
        items = [{"role": "user", "content": QUESTION}, *responses_echo(calls)]
        post(
            port,
            "/v1/responses",
            {"model": "text", "stream": True, "input": items, "tools": tools},
            f"{api}/recency/2",
            coding,
        )
    with client.responses.stream(
        model="interleaved", input=QUESTION, tools=tools, extra_headers={"X-Test-Case": "responses/sdk/1"}
    ) as stream:
        output = [o for o in stream.get_final_response().output if o.type == "function_call"]
    calls = [{"id": o.call_id, "name": o.name, "type": o.type, "arguments": o.arguments} for o in output]
    items = [{"role": "user", "content": QUESTION}, *responses_echo(calls)]
    for _ in client.responses.create(
        model="text", input=items, tools=tools, stream=True, extra_headers={"X-Test-Case": "responses/sdk/2"}
    ):
        pass

    # A custom tool's call (Codex's apply_patch: its input a patch, not JSON) beside a function's, in Responses:
    # by a recency client, then by the SDK.
    tools = [
        {"type": "custom", "name": "apply_patch", "description": "Edit files with a patch."},
        {"type": "function", "name": "read_file", "parameters": {"type": "object"}},
    ]
    body = post(
        port,
        "/v1/responses",
        {"model": "custom-interleaved", "stream": True, "input": QUESTION, "tools": tools},
        "custom/recency/1",
    )
    items = [{"role": "user", "content": QUESTION}, *responses_echo(recency_responses(body))]
    post(
        port,
        "/v1/responses",
        {"model": "text", "stream": True, "input": items, "tools": tools},
        "custom/recency/2",
    )
    with client.responses.stream(
        model="custom-interleaved", input=QUESTION, tools=tools, extra_headers={"X-Test-Case": "custom/sdk/1"}
    ) as stream:
        output = stream.get_final_response().output
    calls = [
        {"id": o.call_id, "name": o.name, "type": o.type, "arguments": o.input if o.type == "custom_tool_call" else o.arguments}
        for o in output
    ]  # fmt: skip
    SDK_CALLS["custom"] = calls
    items = [{"role": "user", "content": QUESTION}, *responses_echo(calls)]
    for _ in client.responses.create(
        model="text", input=items, tools=tools, stream=True, extra_headers={"X-Test-Case": "custom/sdk/2"}
    ):
        pass

    # Anthropic Messages, by a recency client, then by the SDK.
    tools = [
        {"name": n, "input_schema": {"type": "object"}} for n in ("search_circulars", "get_user_profile")
    ]
    first = [{"role": "user", "content": QUESTION}]
    body = post(
        port,
        "/v1/messages",
        {"model": "interleaved", "max_tokens": 100, "stream": True, "messages": first, "tools": tools},
        "anthropic/recency/1",
    )
    calls = recency_anthropic(body)
    follow = first + [
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": c["id"], "name": c["name"], "input": parsed(c["arguments"])}
                for c in calls
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": c["id"], "content": "ok"} for c in calls],
        },
    ]
    post(
        port,
        "/v1/messages",
        {"model": "text", "max_tokens": 100, "stream": True, "messages": follow, "tools": tools},
        "anthropic/recency/2",
    )
    claude = anthropic.Anthropic(base_url=f"http://127.0.0.1:{port}", api_key="test", max_retries=0)
    with claude.messages.stream(
        model="interleaved",
        max_tokens=100,
        messages=first,
        tools=tools,
        extra_headers={"X-Test-Case": "anthropic/sdk/1"},
    ) as stream:
        final = stream.get_final_message()
    uses = [b for b in final.content if b.type == "tool_use"]
    follow = first + [
        {"role": "assistant", "content": [b.model_dump() for b in final.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": b.id, "content": "ok"} for b in uses],
        },
    ]
    with claude.messages.stream(
        model="text",
        max_tokens=100,
        messages=follow,
        tools=tools,
        extra_headers={"X-Test-Case": "anthropic/sdk/2"},
    ) as stream:
        stream.get_final_message()

    # A conversation whose history comes from elsewhere: ids no response through this proxy carried.
    foreign = [
        {"role": "user", "content": QUESTION},
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "call_from_yesterday",
                    "type": "function",
                    "function": {"name": "search_circulars", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_from_yesterday", "content": "ok"},
    ]
    post(port, "/v1/chat/completions", {"model": "text", "stream": True, "messages": foreign}, "foreign/1")


# What the SDK rebuilt itself, by case.
SDK_CALLS: dict[str, list[dict]] = {}


def test_a_custom_tools_call_is_rebuilt_as_the_sdk_rebuilds_it_said_custom_and_its_echo_checked(session):
    flows, _ = session
    result = flows["custom/sdk/1"].metadata["toolcall_lens"]
    rebuilt = [
        {"id": c["id"], "name": c["name"], "type": "custom_tool_call" if c.get("custom") else "function_call",
         "arguments": c["arguments"]}
        for c in result["choices"][0]["tool_calls"]
    ]  # fmt: skip
    assert rebuilt == SDK_CALLS["custom"]
    assert [c["name"] for c in rebuilt] == ["apply_patch", "read_file"]
    assert (
        rebuilt[0]["arguments"].startswith("*** Begin Patch\n") and rebuilt[0]["type"] == "custom_tool_call"
    )
    assert "invalid-arguments" not in [w["code"] for w in result["warnings"]]
    assert "recency-misroute" in [w["code"] for w in result["warnings"]]
    # The SDK's follow-up echoes the patch and answers both calls: read, checked, and right.
    evidence = flows["custom/sdk/2"].metadata["toolcall_lens"]["evidence"]
    assert (evidence["checked"], evidence["matched"], evidence["unanswered"]) == (4, 2, [])


def echo_warnings(flow) -> list[dict]:
    return [
        w
        for w in flow.metadata["toolcall_lens"]["warnings"]
        if w["code"] in ("client-misassembled", "unknown-tool-call-id")
    ]


@pytest.mark.parametrize("api", ["chat", "responses", "responses-zstd", "custom", "anthropic"])
def test_a_recency_client_is_caught_by_its_own_follow_up(session, api):
    # responses-zstd: the requests compressed, as Codex sends its own: read in the addon's worker.
    flows, _ = session
    first, follow_up = flows[f"{api}/recency/1"], flows[f"{api}/recency/2"]
    if api == "responses-zstd":
        assert follow_up.request.headers["content-encoding"] == "zstd"
        assert follow_up.metadata["toolcall_lens"]["evidence"]["checked"] == 4  # two calls, two results
    found = echo_warnings(follow_up)
    assert [w["code"] for w in found] == ["client-misassembled", "client-misassembled"]
    assert {w["earlier_flow"] for w in found} == {first.id}
    observed = {c["id"]: c for c in first.metadata["toolcall_lens"]["choices"][0]["tool_calls"]}
    for w in found:
        assert w["observed"]["arguments"] == observed[w["id"]]["arguments"]  # the truth, from the stream
        assert w["echoed"]["arguments"] != w["observed"]["arguments"]
    if api != "anthropic":  # Anthropic's client sent {} for arguments that did not parse: no splice to see
        spliced = [w for w in found if "arguments_splice" in w]
        assert len(spliced) == 1 and sorted(spliced[0]["arguments_splice"]) == sorted(observed)
    assert follow_up.marked and "client-misassembled" in follow_up.comment


@pytest.mark.parametrize("api", ["chat", "responses", "custom", "anthropic"])
def test_an_sdk_that_rebuilds_correctly_raises_nothing(session, api):
    flows, _ = session
    assert echo_warnings(flows[f"{api}/sdk/2"]) == []
    assert "recency-misroute" in [
        w["code"] for w in flows[f"{api}/sdk/1"].metadata["toolcall_lens"]["warnings"]
    ]


def test_history_from_elsewhere_gives_no_false_alarm(session):
    flows, _ = session
    assert echo_warnings(flows["foreign/1"]) == []


def test_the_cli_finds_the_same_in_the_dump(session):
    flows, dump = session
    done = subprocess.run(
        [str(BIN / "toolcall-lens"), str(dump), "--json"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    by_flow = {r["source"]["flow_id"]: r for r in json.loads(done.stdout)["results"]}
    for case, flow in flows.items():
        live = echo_warnings(flow)
        cli = [
            w
            for w in by_flow[flow.id]["warnings"]
            if w["code"] in ("client-misassembled", "unknown-tool-call-id")
        ]
        assert cli == live, case


# The sequential scenario's two calls: '{"city": "Paris"}' and '{"tz": "Europe/Paris"}', 39 characters.
@pytest.mark.parametrize("bound", ["toolcall_lens_index_size=2", "toolcall_lens_index_bytes=39"])
def test_the_index_is_bounded_live(tmp_path, bound):
    # With room for 2 calls (or for the last response's 39 characters of arguments), the first
    # conversation's calls are gone by the time its follow-up comes: in the worker, which reads the
    # streams' requests, as in the proxy.
    provider, provider_port = start_fake_provider(delay=0.001)
    dump = tmp_path / "bounded.mitm"
    try:
        proxy, port = start_mitmdump(provider_port, dump, bound)
        try:
            bodies = [
                post(
                    port,
                    "/v1/chat/completions",
                    {"model": "interleaved", "stream": True, "messages": []},
                    f"stream/{n}",
                )
                for n in range(2)
            ]
            for body in bodies:  # the same scenario twice: the same ids, the newest flow wins them
                calls = recency_chat(body)
            sequential = post(
                port,
                "/v1/chat/completions",
                {"model": "sequential", "stream": True, "messages": []},
                "stream/2",
            )
            old = [assistant_turn(calls)]
            post(
                port, "/v1/chat/completions", {"model": "text", "stream": True, "messages": old}, "follow/old"
            )
            new_calls = recency_chat(sequential)
            new = [assistant_turn(new_calls, rename="x")]
            post(
                port, "/v1/chat/completions", {"model": "text", "stream": True, "messages": new}, "follow/new"
            )
        finally:
            proxy.stop()
    finally:
        provider.stop()
    with open(dump, "rb") as f:
        flows = {flow.request.headers.get("X-Test-Case"): flow for flow in mio.FlowReader(f).stream()}
    assert echo_warnings(flows["follow/old"]) == []  # evicted: nothing known, nothing said
    assert [w["code"] for w in echo_warnings(flows["follow/new"])] == ["client-misassembled"] * 2


class PerTurnIds(BaseHTTPRequestHandler):
    """An upstream that numbers each response's calls from zero, as kimi-k3 on Fireworks names them
    (``list_dir:0``, fw-ai/fireconnect#16): turns 1 and 2 each call ``list_dir`` as ``list_dir:0``, with
    other arguments; the third gets a text."""

    PATHS = ('{"path": "."}', '{"path": "/"}')

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        turn = sum(1 for m in request["messages"] if m.get("role") == "assistant")
        head = {"id": f"c{turn}", "object": "chat.completion.chunk", "created": 1, "model": "m"}
        if turn < len(self.PATHS):
            opening = {"index": 0, "id": "list_dir:0", "type": "function"}
            opening["function"] = {"name": "list_dir", "arguments": ""}
            arguments = self.PATHS[turn]
            deltas = [
                {"role": "assistant", "tool_calls": [opening]},
                {"tool_calls": [{"index": 0, "function": {"arguments": arguments[:9]}}]},
                {"tool_calls": [{"index": 0, "function": {"arguments": arguments[9:]}}]},
            ]
            finish = "tool_calls"
        else:
            deltas, finish = [{"role": "assistant", "content": "Listed."}], "stop"
        chunks = [{**head, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
        chunks.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        data = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


def test_a_provider_that_numbers_calls_per_turn_gives_a_faithful_client_no_false_alarm(tmp_path):
    # The official SDK carries the conversation on: its third request echoes both turns' list_dir:0, each
    # as streamed. Each echo is checked against its own turn's call (checked against the newest alone,
    # the first turn's was "client-misassembled").
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), PerTurnIds)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    dump = tmp_path / "per-turn.mitm"
    try:
        proxy, port = start_mitmdump(upstream.server_address[1], dump)
        try:
            client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="test", max_retries=0)
            tools = [{"type": "function", "function": {"name": "list_dir", "parameters": {"type": "object"}}}]
            messages: list = [{"role": "user", "content": "List the repository."}]
            for turn in range(3):
                with client.chat.completions.stream(
                    model="m", messages=messages, tools=tools, extra_headers={"X-Test-Case": f"turn/{turn}"}
                ) as stream:
                    message = stream.get_final_completion().choices[0].message
                if not message.tool_calls:
                    break
                messages.append(
                    message.model_dump(exclude_none=True, include={"role", "content", "tool_calls"})
                )
                messages += [
                    {"role": "tool", "tool_call_id": c.id, "content": "ok"} for c in message.tool_calls
                ]
        finally:
            proxy.stop()
    finally:
        upstream.shutdown()
        upstream.server_close()
    with open(dump, "rb") as f:
        flows = {flow.request.headers.get("X-Test-Case"): flow for flow in mio.FlowReader(f).stream()}
    assert (
        turn == 2 and [m.get("tool_calls", [{}])[0].get("id") for m in messages[1::2]] == ["list_dir:0"] * 2
    )
    last = flows["turn/2"].metadata["toolcall_lens"]
    assert echo_warnings(flows["turn/2"]) == [] and last["warnings"] == []
    evidence = last["evidence"]
    assert evidence["matched"] == 2 and evidence["unanswered"] == [] and evidence["unknown"] == []
    assert evidence["earlier_flows"] == [flows["turn/0"].id, flows["turn/1"].id]
