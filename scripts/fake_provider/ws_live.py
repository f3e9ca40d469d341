"""Gemini Live (BidiGenerateContent): `setup` first, then each turn (clientContent with turnComplete, or
realtimeInput) answered by the scenario: reasoning and text as serverContent parts, its calls whole in one
toolCall; a toolResponse gets a short text answer. Every server message is UTF-8 JSON in a binary frame;
client keys are read in camelCase and in the Python SDK's snake_case."""

from __future__ import annotations

import functools

from .renderers import WIRE_FORMATS
from .renderers.gemini import Gemini
from .scenarios import SCENARIOS as HTTP_SCENARIOS
from .scenarios import WS_SCRIPTS, script, served_by
from .websocket import Action, Close, Send, Session, gated, json_object, with_middle

PROTOCOL = "gemini-live"
# The scenarios the Gemini format serves, and the Live-only ones.
SCENARIOS: tuple[str, ...] = (
    *(name for name in HTTP_SCENARIOS if served_by(name, "gemini")),
    *(name for name in WS_SCRIPTS if served_by(name, PROTOCOL)),
)
WIRE = WIRE_FORMATS["gemini"]._replace(call_id="fc_{key}")
USAGE = {"promptTokenCount": 50, "responseTokenCount": 20, "totalTokenCount": 70}
ANSWER = "text"  # the scenario of the turn that follows a toolResponse
_MEDIA_ONLY = {"audio", "video", "mediaChunks", "media_chunks"}  # realtimeInput that does not end a turn


def matches(path: str) -> bool:
    return path.endswith(("BidiGenerateContent", "BidiGenerateContentConstrained"))


@functools.cache
def rendered(name: str) -> Gemini:
    return Gemini(WIRE, name)


def expected(scenario: str, n: int = 1) -> list[dict]:
    """The calls of the connection's n-th turn of ``scenario``: id, name, arguments (JSON text) and args
    (the object sent). Live sends a call only when it is whole: none for `truncated`, `error-midstream`."""
    if script(scenario).get("error") or script(scenario).get("cut_after"):
        return []
    return [
        {"id": f"{block.id}_{n}", "name": block.name, "arguments": block.full, "args": block.whole}
        for block in rendered(scenario).calls
    ]


def _get(message: dict, camel: str, snake: str):
    return message.get(camel, message.get(snake))


def turn(name: str, n: int) -> list[Action]:
    """The connection's n-th turn of the scenario, as Live sends it."""
    render, steps = rendered(name), script(name)
    cut = steps.get("cut_after")
    out = render.out if cut is None else render.out[: render.marks[cut - 1]]
    messages: list[dict] = []
    calls = []
    for _, payload in out:
        if "error" in payload:  # Live ends a failed turn with a close frame saying why
            return [*with_middle(messages), Close(1011, payload["error"]["message"])]
        candidate = payload["candidates"][0]
        if "finishReason" in candidate:
            continue
        [part] = candidate["content"]["parts"]
        if "functionCall" in part:
            call = part["functionCall"]
            calls.append({"id": f"{call['id']}_{n}", "name": call["name"], "args": call["args"]})
        else:
            messages.append({"serverContent": {"modelTurn": {"parts": [part]}}})
    if cut is not None:  # cut before the turn's calls went out (Live sends them together, at the end)
        return [*with_middle(messages), Close(1011, "upstream cut mid-turn")]
    if calls:
        messages.append({"toolCall": {"functionCalls": calls}})
        if steps.get("cancel_first"):
            messages.append({"toolCallCancellation": {"ids": [calls[0]["id"]]}})
    else:
        messages.append({"serverContent": {"turnComplete": True}})
    messages.append({"usageMetadata": USAGE})
    return with_middle(messages)


class LiveSession(Session):
    binary = True

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.name: str | None = None
        self.count = 0

    def received(self, message: str | bytes) -> None:
        data = json_object(message)
        if data is None:
            self.outbox.reply(Close(1007, "Invalid JSON payload received."))
            return
        if self.name is None:
            self._setup(_get(data, "setup", "setup"))
            return
        content = _get(data, "clientContent", "client_content")
        realtime = _get(data, "realtimeInput", "realtime_input")
        response = _get(data, "toolResponse", "tool_response")
        if isinstance(content, dict):
            if _get(content, "turnComplete", "turn_complete"):
                self._turn(self.name)
        elif isinstance(realtime, dict):
            if set(realtime) - _MEDIA_ONLY:  # text, activityEnd, audioStreamEnd: the turn is the model's
                self._turn(self.name)
        elif isinstance(response, dict):
            self._turn(ANSWER)
        else:
            self.outbox.reply(Close(1007, f"Unknown message: {', '.join(data) or 'empty'}"))

    def _setup(self, setup: object) -> None:
        if not isinstance(setup, dict):
            self.outbox.reply(Close(1007, "The first message must be setup."))
            return
        model = setup.get("model")
        name = model.removeprefix("models/") if isinstance(model, str) else ""
        if name not in SCENARIOS:
            reason = f"models/{name} is not found (known: {', '.join(SCENARIOS)})"
            self.outbox.reply(Close(1008, reason[:120]))  # a close reason holds at most 123 bytes
            return
        self.name = name
        self.outbox.reply(Send({"setupComplete": {}}))

    def _turn(self, name: str) -> None:
        self.count += 1
        actions = turn(name, self.count)
        if gate_after := script(name).get("gate_after"):
            gated(actions, gate_after, self.outbox.gate())
        self.outbox.add(None, actions)
