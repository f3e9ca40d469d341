"""A WebSocket connection driven through the addon's hooks as mitmproxy calls them, for the front-door
tests: the flow, a message sent either way, a Responses turn making calls and the client's answer to it,
and mitmproxy's ``inject.websocket`` command as its proxy server carries it out."""

from __future__ import annotations

import json

from mitmproxy import command, websocket
from mitmproxy import flow as mflow
from mitmproxy.test import tflow
from wsproto.frame_protocol import Opcode


def ws_flow(path: str = "/v1/responses", host: str = "api.openai.com", headers: dict | None = None):
    """A WebSocket flow whose upgrade went to ``host`` and ``path``, with no message yet."""
    flow = tflow.twebsocketflow()
    flow.websocket.messages.clear()
    flow.request.host, flow.request.path = host, path
    for name, value in (headers or {}).items():
        flow.request.headers[name] = value
    return flow


def send(lens, flow, from_client: bool, obj, *, binary: bool = False, injected: bool = False):
    """One message (a JSON object, or bytes as they are) through the addon's ``websocket_message``."""
    content = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    message = websocket.WebSocketMessage(Opcode.BINARY if binary else Opcode.TEXT, from_client, content)
    message.injected = injected
    flow.websocket.messages.append(message)
    lens.websocket_message(flow)
    return message


def response_events(rid: str, calls: int, interleaved: bool = False) -> list[dict]:
    """A Responses response making ``calls`` calls, each in two argument fragments."""
    events = [{"type": "response.created", "response": {"id": rid, "model": "m"}}]
    items = [
        {"type": "function_call", "id": f"fc{i}", "call_id": f"{rid}_c{i}", "name": f"tool_{i}"}
        for i in range(calls)
    ]
    events += [
        {"type": "response.output_item.added", "output_index": i, "item": items[i]} for i in range(calls)
    ]
    fragments = [
        {"type": "response.function_call_arguments.delta", "output_index": i, "delta": piece}
        for i in range(calls)
        for piece in ('{"n": ', f"{i}}}")
    ]
    if not interleaved:
        fragments.sort(key=lambda e: e["output_index"])
    events += fragments
    events += [
        {"type": "response.output_item.done", "output_index": i, "item": items[i]} for i in range(calls)
    ]
    events.append({"type": "response.completed", "response": {"id": rid, "status": "completed"}})
    return events


def answer(rid: str, calls: int) -> dict:
    """The client's next ``response.create``, answering every call of ``response_events(rid, calls)``."""
    outputs = [
        {"type": "function_call_output", "call_id": f"{rid}_c{i}", "output": "ok"} for i in range(calls)
    ]
    return {"type": "response.create", "model": "m", "previous_response_id": rid, "input": outputs}


def a_turn(lens, flow, rid: str = "r1", calls: int = 1) -> None:
    """A ``response.create`` and the response to it."""
    send(lens, flow, True, {"type": "response.create", "model": "m"})
    for event in response_events(rid, calls):
        send(lens, flow, False, event)


class InjectWebSocket:
    """mitmproxy's inject.websocket, as its proxy server does it: the message goes to the client, and the
    addons' websocket_message hook sees it, marked injected."""

    def __init__(self, lens) -> None:
        self.lens = lens
        self.flows: list = []

    @command.command("inject.websocket")
    def inject_websocket(
        self, flow: mflow.Flow, to_client: bool, message: bytes, is_text: bool = True
    ) -> None:
        self.flows.append(flow)
        sent = websocket.WebSocketMessage(Opcode.TEXT if is_text else Opcode.BINARY, not to_client, message)
        sent.injected = True
        flow.websocket.messages.append(sent)
        self.lens.websocket_message(flow)
