"""OpenAI Responses in WebSocket mode (Codex's transport): each client `response.create` answered by the
scenario's Responses events, the same JSON objects the SSE stream carries, one text message each. Ids get
the response's number on the connection; `stream_id` lanes run side by side, without one FIFO."""

from __future__ import annotations

from . import agent
from .bodies import FORMAT_SCENARIOS, expected_calls, payloads
from .renderers.base import OVERLOADED
from .scenarios import SCRIPTS
from .websocket import Action, Close, Send, Session, gated, json_object, renamed, with_middle

FORMAT = "openai-responses"
SCENARIOS: tuple[str, ...] = FORMAT_SCENARIOS[FORMAT]
_IDS = frozenset({"id", "item_id", "call_id"})
PREWARM_USAGE = {
    "input_tokens": 50,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 0,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 50,
}


def matches(path: str) -> bool:
    return path.endswith("/responses")


def error(code: str, message: str, *, status: int = 400, param: str | None = None) -> dict:
    """A Responses WebSocket error event (the SDK's ResponseWsError)."""
    kind = "server_error" if status >= 500 else "invalid_request_error"
    return {
        "type": "error",
        "status": status,
        "error": {"type": kind, "code": code, "message": message, "param": param},
    }


def expected(scenario: str, n: int = 1) -> list[dict]:
    """The calls of the connection's n-th response of ``scenario``: call id, item id (a custom tool's
    call's is ctc_...), name, arguments."""
    custom = SCRIPTS[scenario].get("custom", ()) if scenario in SCRIPTS else ()
    keys = [call["id"].removeprefix("call_") for call in expected_calls(scenario, FORMAT)]
    return [
        {
            "id": f"{call['id']}_{n}",
            "item_id": f"{'ctc' if key in custom else 'fc'}_{key}_{n}",
            "name": call["name"],
            "arguments": call["arguments"],
        }
        for key, call in zip(keys, expected_calls(scenario, FORMAT), strict=True)
    ]


class ResponsesSession(Session):
    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.count = 0
        self.ids: set[str] = set()  # the responses this connection created (previous_response_id must be one)

    def received(self, message: str | bytes) -> None:
        create = json_object(message)
        if create is None:
            self.outbox.add(None, [Send(error("invalid_json", "the message is not a JSON object"))])
            return
        lane = create.get("stream_id")
        lane = lane if isinstance(lane, str) else None
        kind = create.get("type")
        if kind in ("response.processed", "response.append"):  # Codex's bookkeeping: nothing to answer
            return
        if kind != "response.create":
            failure = error("invalid_value", f"unsupported event type {kind!r}", param="type")
            self.outbox.add(lane, [Send(self._lane(failure, lane))])
            return
        name, previous = create.get("model"), create.get("previous_response_id")
        name = agent.AGENT if agent.is_agent(name) else name
        if name not in SCENARIOS and name != agent.AGENT:
            known = ", ".join(SCENARIOS)
            failure = error(
                "model_not_found", f"unknown scenario {name!r}; known: {known}", status=404, param="model"
            )
        elif previous is not None and previous not in self.ids:
            failure = error(
                "previous_response_not_found",
                f"Previous response with id {previous!r} not found.",
                status=400,
                param="previous_response_id",
            )
        else:
            self.count += 1
            self.ids.add(f"resp_fake_{name}_{self.count}")
            generate = create.get("generate") is not False
            if name == agent.AGENT:
                made = agent.payloads(FORMAT, create if generate else None)
                if generate:  # the log says what went out: ids as this connection's n-th response has them
                    entry = agent.log[-1]
                    entry["transport"] = "websocket"
                    for call in entry["calls"]:
                        call["id"] = f"{call['id']}_{self.count}"
                actions = self._response(name, self.count, previous, lane, generate, made)
            else:
                actions = self._response(name, self.count, previous, lane, generate)
            self.outbox.add(lane, actions)
            return
        self.outbox.add(lane, [Send(self._lane(failure, lane))])

    @staticmethod
    def _lane(payload: dict, lane: str | None) -> dict:
        return payload if lane is None else {**payload, "stream_id": lane}

    def _shape(self, payload: dict, n: int, previous: str | None, lane: str | None) -> dict:
        """One renderer event as the n-th response on this connection sends it."""
        payload = renamed(payload, n, _IDS)
        if payload["type"] == "error":  # over WebSocket the error comes wrapped (ResponseWsError)
            failure = {"type": "server_error", "code": payload["code"], "message": OVERLOADED, "param": None}
            payload = {"type": "error", "error": failure, "sequence_number": payload["sequence_number"]}
        if "response" in payload:
            payload["response"]["previous_response_id"] = previous
        return self._lane(payload, lane)

    def _response(
        self,
        name: str,
        n: int,
        previous: str | None,
        lane: str | None,
        generate: bool,
        made: tuple[dict, ...] | None = None,
    ) -> list[Action]:
        # made: the `agent` scenario's events, made from the request
        events = made if made is not None else payloads(FORMAT, name, cut=True)
        if not generate:  # a prewarm: the request's state is made, no output
            head = events[0]
            done = {**head["response"], "status": "completed", "usage": PREWARM_USAGE}
            events = (head, {"type": "response.completed", "response": done, "sequence_number": 1})
        shaped = [self._shape(payload, n, previous, lane) for payload in events]
        if not generate:
            return [Send(payload) for payload in shaped]
        actions = with_middle(shaped)
        script = SCRIPTS.get(name, {})
        if gate_after := script.get("gate_after"):
            gated(actions, gate_after, self.outbox.gate())
        if script.get("cut_after") is not None:
            actions.append(Close(1011, "upstream cut mid-response"))
        return actions
