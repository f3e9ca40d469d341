"""WebSocket conversations for front-door tests, one per protocol, as (from_client, JSON object) pairs: the
messages a client and a provider would exchange on one connection, and ways to store them (a mitmproxy
WebSocket flow, a capture of JSON lines)."""

from __future__ import annotations

import json

# OpenAI Responses WebSocket mode (Codex): a prewarm, a turn with two interleaved calls of which the client
# answers one (an unanswered call), then a turn of text.
RESPONSES = [
    (True, {"type": "response.create", "model": "gpt-ws", "generate": False}),
    (False, {"type": "response.created", "response": {"id": "r0", "model": "gpt-ws"}}),
    (False, {"type": "response.completed", "response": {"id": "r0", "status": "completed"}}),
    (
        True,
        {
            "type": "response.create",
            "model": "gpt-ws",
            "previous_response_id": "r0",
            "tools": [
                {"type": "function", "name": "shell", "parameters": {}},
                {"type": "function", "name": "apply_patch", "parameters": {}},
            ],
        },
    ),
    (False, {"type": "response.created", "response": {"id": "r1", "model": "gpt-ws"}}),
    (
        False,
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"type": "function_call", "id": "fc0", "call_id": "call_sh", "name": "shell"},
        },
    ),
    (
        False,
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {"type": "function_call", "id": "fc1", "call_id": "call_ap", "name": "apply_patch"},
        },
    ),
    (
        False,
        {
            "type": "response.function_call_arguments.delta",
            "output_index": 0,
            "item_id": "fc0",
            "delta": '{"cmd":',
        },
    ),
    (
        False,
        {
            "type": "response.function_call_arguments.delta",
            "output_index": 1,
            "item_id": "fc1",
            "delta": '{"p":',
        },
    ),
    (
        False,
        {
            "type": "response.function_call_arguments.delta",
            "output_index": 0,
            "item_id": "fc0",
            "delta": '"ls"}',
        },
    ),
    (
        False,
        {
            "type": "response.function_call_arguments.delta",
            "output_index": 1,
            "item_id": "fc1",
            "delta": '"x"}',
        },
    ),
    (False, {"type": "response.completed", "response": {"id": "r1", "status": "completed"}}),
    (
        True,
        {
            "type": "response.create",
            "model": "gpt-ws",
            "previous_response_id": "r1",
            "input": [{"type": "function_call_output", "call_id": "call_sh", "output": "a.txt"}],
        },
    ),
    (False, {"type": "response.created", "response": {"id": "r2", "model": "gpt-ws"}}),
    (False, {"type": "response.output_text.delta", "output_index": 0, "delta": "done"}),
    (False, {"type": "response.completed", "response": {"id": "r2", "status": "completed"}}),
]

# OpenAI Realtime: one response with a call, answered.
REALTIME = [
    (False, {"type": "session.created", "event_id": "e0", "session": {"model": "gpt-realtime"}}),
    (True, {"type": "session.update", "session": {"tools": [{"type": "function", "name": "lookup"}]}}),
    (True, {"type": "response.create"}),
    (
        False,
        {"type": "response.created", "event_id": "e1", "response": {"id": "R1", "status": "in_progress"}},
    ),
    (
        False,
        {
            "type": "response.output_item.added",
            "event_id": "e2",
            "response_id": "R1",
            "output_index": 0,
            "item": {
                "id": "i0",
                "type": "function_call",
                "call_id": "call_rt",
                "name": "lookup",
                "arguments": "",
            },
        },
    ),
    (
        False,
        {
            "type": "response.function_call_arguments.delta",
            "event_id": "e3",
            "response_id": "R1",
            "item_id": "i0",
            "output_index": 0,
            "call_id": "call_rt",
            "delta": '{"q": "rt"}',
        },
    ),
    (False, {"type": "response.done", "event_id": "e4", "response": {"id": "R1", "status": "completed"}}),
    (
        True,
        {"type": "conversation.item.create", "item": {"type": "function_call_output", "call_id": "call_rt"}},
    ),
]

# Gemini Live: binary frames from the server; one turn with a call, answered.
LIVE = [
    (
        True,
        {"setup": {"model": "models/gemini-live", "tools": [{"functionDeclarations": [{"name": "find"}]}]}},
    ),
    (False, {"setupComplete": {}}),
    (True, {"clientContent": {"turns": [], "turnComplete": True}}),
    (False, {"toolCall": {"functionCalls": [{"id": "call_gl", "name": "find", "args": {"q": "live"}}]}}),
    (True, {"toolResponse": {"functionResponses": [{"id": "call_gl", "response": {}}]}}),
    (False, {"serverContent": {"turnComplete": True}}),
]

# name: (messages, upgrade path, calls it carries by name)
CONVERSATIONS = {
    "openai-responses": (RESPONSES, "/v1/responses", ["shell", "apply_patch"]),
    "openai-realtime": (REALTIME, "/v1/realtime?model=gpt-realtime", ["lookup"]),
    "gemini-live": (
        LIVE,
        "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent",
        ["find"],
    ),
}


def binary(format: str, from_client: bool) -> bool:
    """Gemini Live's server sends binary frames (JSON in them)."""
    return format == "gemini-live" and not from_client


def websocket_flow(format: str = "openai-responses", start: float = 946684800.0):
    """A finished mitmproxy WebSocket flow that carried the conversation of this format, one message a
    second from ``start``."""
    from mitmproxy.test import tflow
    from mitmproxy.websocket import WebSocketMessage
    from wsproto.frame_protocol import Opcode

    messages, path, _ = CONVERSATIONS[format]
    flow = tflow.twebsocketflow()
    flow.request.path = path
    flow.websocket.messages = [
        WebSocketMessage(
            Opcode.BINARY if binary(format, from_client) else Opcode.TEXT,
            from_client,
            json.dumps(obj).encode(),
            start + n,
        )
        for n, (from_client, obj) in enumerate(messages)
    ]
    flow.websocket.timestamp_end = start + len(messages)
    return flow


def recorded_flow(
    trimmed: int | None,
    format: str = "openai-responses",
    start: float = 946684800.0,
    keep: slice = slice(None),
):
    """The conversation's flow as the addon leaves it: its record made by a live ``Connection`` from every
    message, saying ``trimmed`` messages were dropped from the stored front; the messages ``keep`` names
    are the ones still stored."""
    from accumulator import Connection, connection_result

    flow = websocket_flow(format, start)
    live = Connection(format, path=CONVERSATIONS[format][1])
    for message in flow.websocket.messages:
        live.message(message.from_client, message.content, message.is_text, now=message.timestamp)
    live.finish()
    record = connection_result(live)
    record["connection"]["trimmed"] = trimmed
    flow.metadata["toolcall_lens"] = record
    flow.websocket.messages = flow.websocket.messages[keep]
    return flow


def capture(format: str, *, header: bool = True, timestamps: bool = True) -> str:
    """The conversation as a capture of JSON lines (docs/cli.md)."""
    import base64

    messages, path, _ = CONVERSATIONS[format]
    lines = [json.dumps({"websocket": f"wss://api.example.com{path}"})] if header else []
    for n, (from_client, obj) in enumerate(messages):
        text = json.dumps(obj)
        line: dict = {"from_client": from_client}
        if binary(format, from_client):
            line["base64"] = base64.b64encode(text.encode()).decode()
        else:
            line["text"] = text
        if timestamps:
            line["timestamp"] = 100.0 + n
        lines.append(json.dumps(line))
    return "\n".join(lines) + "\n"
