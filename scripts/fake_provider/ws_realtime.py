"""OpenAI Realtime over WebSocket (`/v1/realtime?model=SCENARIO`): session and conversation events, and each
`response.create` answered by the scenario as Realtime events (function-call items with argument deltas,
text or spoken text); `response.cancel` and `realtime-cancel` end a response cancelled. GA event names,
or the beta ones when the client connected with `OpenAI-Beta: realtime=v1`."""

from __future__ import annotations

import base64
import functools
import itertools
from typing import Any, ClassVar

from .renderers.base import OVERLOADED, Block, Render, WireFormat
from .scenarios import SCENARIOS as HTTP_SCENARIOS
from .scenarios import WS_SCRIPTS, script, served_by
from .websocket import Close, Send, Session, gated, json_object, renamed, with_middle

PROTOCOL = "openai-realtime"
_IDS = frozenset({"id", "item_id", "call_id", "response_id"})
USAGE = {
    "total_tokens": 70,
    "input_tokens": 50,
    "output_tokens": 20,
    "input_token_details": {"text_tokens": 50, "audio_tokens": 0, "cached_tokens": 0},
    "output_token_details": {"text_tokens": 20, "audio_tokens": 0},
}
# GA name → beta name, for the events whose names differ (WEBSOCKET.md 1.2); the rest are the same.
BETA_NAMES = {
    "response.output_text.delta": "response.text.delta",
    "response.output_text.done": "response.text.done",
    "response.output_audio.delta": "response.audio.delta",
    "response.output_audio.done": "response.audio.done",
    "response.output_audio_transcript.delta": "response.audio_transcript.delta",
    "response.output_audio_transcript.done": "response.audio_transcript.done",
}
BETA_PARTS = {"output_text": "text", "output_audio": "audio"}
ANSWER = "text"  # the scenario of a response that follows function_call_output items


# Every scenario no one HTTP format keeps to itself, and the Realtime-only ones.
SCENARIOS: tuple[str, ...] = tuple(
    name for name in (*HTTP_SCENARIOS, *WS_SCRIPTS) if "only" not in script(name) or served_by(name, PROTOCOL)
)


def matches(path: str) -> bool:
    return path.endswith("/realtime")


def audio(fragment: str, k: int) -> str:
    """Some fixed 16-bit PCM bytes for a spoken fragment, base64 as Realtime sends them."""
    return base64.b64encode(bytes((i * 7 + k) % 256 for i in range(4 * len(fragment.encode())))).decode()


class RealtimeRender(Render):
    """A scenario as one Realtime response; ids are the scenario's, `_n` is added per response. Reasoning
    has no Realtime events and is not sent."""

    PART: ClassVar[dict] = {False: ("output_text", "text"), True: ("output_audio", "transcript")}

    def __init__(self, wire: WireFormat, name: str) -> None:
        self.id = f"resp_fake_{name}"
        self.index: dict[int, int] = {}  # block position → output_index (reasoning takes none)
        super().__init__(wire, name)

    @property
    def spoken(self) -> bool:
        return bool(self.script.get("audio"))

    def response(self, status: str, **fields: Any) -> dict:
        return {
            "id": self.id,
            "object": "realtime.response",
            "status": status,
            "status_details": None,
            "output": [],
            "usage": None,
            **fields,
        }

    def item_id(self, block: Block) -> str:
        return f"item_{block.key}" if block.kind == "call" else f"item_msg{block.position}"

    def part(self, text: str) -> dict:
        kind, field = self.PART[self.spoken]
        return {"type": kind, field: text}

    def item(self, block: Block, status: str) -> dict:
        head = {"id": self.item_id(block), "object": "realtime.item"}
        if block.kind == "call":
            fields = {"call_id": block.id, "name": block.name, "arguments": block.text}
            return {**head, "type": "function_call", "status": status, **fields}
        content = [self.part(block.text)] if status != "in_progress" else []
        return {**head, "type": "message", "role": "assistant", "status": status, "content": content}

    def scope(self, block: Block) -> dict:
        scope = {
            "response_id": self.id,
            "item_id": self.item_id(block),
            "output_index": self.index[block.position],
        }
        return {**scope, "call_id": block.id} if block.kind == "call" else {**scope, "content_index": 0}

    def begin(self) -> None:
        self.emit({"type": "response.created", "response": self.response("in_progress")})

    def open(self, block: Block) -> None:
        if block.kind == "think":
            return
        self.index[block.position] = len(self.index)
        item = self.item(block, "in_progress")
        scope = {"response_id": self.id, "output_index": self.index[block.position]}
        self.emit({"type": "response.output_item.added", **scope, "item": item})
        if block.kind == "text":
            self.emit({"type": "response.content_part.added", **self.scope(block), "part": self.part("")})

    def add(self, block: Block, fragment: str) -> None:
        if block.kind == "call":
            self.emit(
                {"type": "response.function_call_arguments.delta", **self.scope(block), "delta": fragment}
            )
        elif block.kind == "text" and self.spoken:
            sound = audio(fragment, len(self.out))
            self.emit({"type": "response.output_audio.delta", **self.scope(block), "delta": sound})
            self.emit(
                {"type": "response.output_audio_transcript.delta", **self.scope(block), "delta": fragment}
            )
        elif block.kind == "text":
            self.emit({"type": "response.output_text.delta", **self.scope(block), "delta": fragment})

    def close(self, block: Block) -> None:
        if block.kind == "think":
            return
        scope = self.scope(block)
        if block.kind == "call":
            done = {"name": block.name, "arguments": block.text}
            self.emit({"type": "response.function_call_arguments.done", **scope, **done})
        elif self.spoken:
            self.emit({"type": "response.output_audio.done", **scope})
            self.emit({"type": "response.output_audio_transcript.done", **scope, "transcript": block.text})
            self.emit({"type": "response.content_part.done", **scope, "part": self.part(block.text)})
        else:
            self.emit({"type": "response.output_text.done", **scope, "text": block.text})
            self.emit({"type": "response.content_part.done", **scope, "part": self.part(block.text)})
        position = {"response_id": self.id, "output_index": scope["output_index"]}
        self.emit({"type": "response.output_item.done", **position, "item": self.item(block, "completed")})

    def output(self, status: str) -> list[dict]:
        return [self.item(block, status) for block in self.blocks if block.kind != "think"]

    def finish(self) -> None:
        self.emit({"type": "response.done", "response": self.final()})

    def error(self) -> None:
        failure = {"type": "server_error", "code": "server_error", "message": OVERLOADED, "param": None}
        self.emit({"type": "error", "error": {**failure, "event_id": None}})
        details = {"type": "failed", "error": {"type": "server_error", "code": "server_error"}}
        failed = self.response(
            "failed", status_details=details, output=self.output("incomplete"), usage=USAGE
        )
        self.emit({"type": "response.done", "response": failed})

    def final(self) -> dict:
        return self.response("completed", output=self.output("completed"), usage=USAGE)


WIRE = WireFormat(PROTOCOL, RealtimeRender, list, "", "/v1/realtime", (500, {}), {})


@functools.cache
def rendered(name: str) -> RealtimeRender:
    return RealtimeRender(WIRE, name)


def expected(scenario: str, n: int = 1) -> list[dict]:
    """The calls of the connection's n-th response of ``scenario``: call id, item id, name, arguments."""
    render = rendered(scenario)
    return [
        {
            "id": f"{block.id}_{n}",
            "item_id": f"{render.item_id(block)}_{n}",
            "name": block.name,
            "arguments": block.full,
        }
        for block in render.calls
    ]


class Running:
    """A response on its way: cancelled when the client asks; the items it has sent, as far as they got."""

    def __init__(self, response_id: str) -> None:
        self.id = response_id
        self.cancelled = False
        self.items: dict[str, dict] = {}  # item id → the item as sent so far
        self.done: set[str] = set()

    def saw(self, payload: dict) -> None:
        kind = payload["type"]
        if kind == "response.output_item.added":
            self.items[payload["item"]["id"]] = dict(payload["item"])
        elif kind == "response.function_call_arguments.delta":
            self.items[payload["item_id"]]["arguments"] += payload["delta"]
        elif kind == "response.output_item.done":
            self.items[payload["item"]["id"]] = payload["item"]
            self.done.add(payload["item"]["id"])


class RealtimeSession(Session):
    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.beta = "realtime=v1" in self.request.headers.get("openai-beta", "")
        self.name = (self.request.query.get("model") or [""])[0]
        self.events = itertools.count(1)
        self.count = 0
        self.session = {
            "id": "sess_fake",
            "object": "realtime.session",
            "type": "realtime",
            "model": self.name,
            "output_modalities": ["audio" if self.name == "realtime-audio" else "text"],
            "tools": [],
        }
        self.items: list[str] = []  # the conversation's item ids, in order
        self.answered = False  # function_call_output items arrived since the last response
        self.running: list[Running] = []

    def event(self, payload: dict) -> dict:
        """A server event as this client is sent it: an event_id, and the beta names when it is a beta client."""
        payload = {"event_id": f"event_fake_{next(self.events)}", **payload}
        if self.beta:
            payload["type"] = BETA_NAMES.get(payload["type"], payload["type"])
            if isinstance(part := payload.get("part"), dict):
                payload["part"] = {**part, "type": BETA_PARTS.get(part["type"], part["type"])}
        return payload

    def failure(self, code: str, message: str, kind: str = "invalid_request_error") -> dict:
        return self.event(
            {"type": "error", "error": {"type": kind, "code": code, "message": message, "param": None}}
        )

    def opened(self) -> None:
        if self.name not in SCENARIOS:
            message = f"unknown scenario {self.name!r} (the URL's ?model=); known: {', '.join(SCENARIOS)}"
            self.outbox.reply(Send(self.failure("model_not_found", message)), Close(1008, "model_not_found"))
            return
        self.outbox.reply(Send(self.event({"type": "session.created", "session": self.session})))

    def received(self, message: str | bytes) -> None:
        event = json_object(message)
        kind = event.get("type") if event is not None else None
        if kind == "session.update":
            update = event.get("session")
            self.session.update(update if isinstance(update, dict) else {})
            self.outbox.reply(Send(self.event({"type": "session.updated", "session": self.session})))
        elif kind == "conversation.item.create":
            self._item(event.get("item"))
        elif kind == "response.create":
            self.count += 1
            name = ANSWER if self.answered else self.name
            self.answered = False
            running = Running(f"resp_fake_{name}_{self.count}")
            self.running.append(running)
            self.outbox.add(None, self._response(name, self.count, running))
        elif kind == "response.cancel":
            wanted = event.get("response_id")
            active = [r for r in self.running if not r.cancelled and wanted in (None, r.id)]
            if active:
                active[0].cancelled = True
            else:
                no = "Cancellation failed: no active response found"
                self.outbox.reply(Send(self.failure("response_cancel_not_active", no)))
        else:
            self.outbox.reply(Send(self.failure("invalid_event", f"unsupported client event {kind!r}")))

    def _item(self, item: object) -> None:
        if not isinstance(item, dict):
            self.outbox.reply(Send(self.failure("invalid_value", "conversation.item.create needs an item")))
            return
        item = {
            "id": f"item_fake_client{len(self.items) + 1}",
            **item,
            "object": "realtime.item",
            "status": "completed",
        }
        if item.get("type") == "function_call_output":
            self.answered = True
        created = {
            "type": "conversation.item.created",
            "previous_item_id": self.items[-1] if self.items else None,
        }
        self.items.append(item["id"])
        self.outbox.reply(Send(self.event({**created, "item": item})))

    def _response(self, name: str, n: int, running: Running):
        """The response's actions, made as they are sent, so that a cancel stops it where it has got to."""
        render = rendered(name)
        cut = script(name).get("cut_after") or script(name).get("cancel_after")
        payloads = render.out if cut is None else render.out[: render.marks[cut - 1]]
        actions = with_middle([renamed(payload, n, _IDS) for _, payload in payloads])
        if gate_after := script(name).get("gate_after"):
            gated(actions, gate_after, self.outbox.gate())
        try:
            for action in actions:
                if running.cancelled:
                    break
                if isinstance(action, Send):
                    running.saw(action.payload)
                    action = Send(self.event(action.payload))
                yield action
            if script(name).get("cut_after") is not None and not running.cancelled:
                yield Close(1011, "upstream cut mid-response")
            elif running.cancelled or script(name).get("cancel_after"):
                yield from self._cancelled(running, render)
        finally:
            running.cancelled = True
            self.running.remove(running)

    def _cancelled(self, running: Running, render: RealtimeRender):
        """The end of a cancelled response: each open item done as far as it got, then response.done."""
        output = []
        for item_id, item in running.items.items():
            if item_id not in running.done:
                item = {**item, "status": "incomplete"}
                scope = {"response_id": running.id, "item_id": item_id, "output_index": len(output)}
                if item["type"] == "function_call":
                    done = {"call_id": item["call_id"], "name": item["name"], "arguments": item["arguments"]}
                    yield Send(self.event({"type": "response.function_call_arguments.done", **scope, **done}))
                position = {"response_id": running.id, "output_index": len(output)}
                yield Send(self.event({"type": "response.output_item.done", **position, "item": item}))
            output.append(item)
        details = {"type": "cancelled", "reason": "client_cancelled"}
        response = {
            **render.response("cancelled", status_details=details, output=output, usage=USAGE),
            "id": running.id,
        }
        yield Send(self.event({"type": "response.done", "response": response}))
