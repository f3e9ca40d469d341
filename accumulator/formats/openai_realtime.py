"""OpenAI Realtime (``/v1/realtime?model=...``), over a WebSocket only; GA and beta event names.

The server's response events are the Responses API's, nearly: a function call is an output item
(``response.output_item.added`` with a ``function_call`` item naming ``call_id`` and ``name``), its
argument deltas name ``response_id``, ``item_id``, ``output_index`` and ``call_id``, and ``.done`` events
restate the arguments (also when the response was cut short). So the dialect is the Responses dialect
with Realtime's own ends and names: ``response.done`` ends a response, and its ``status`` says whether it
completed (cancelled, failed, incomplete: not complete, whatever ``.done`` events came). Text and audio
transcripts (``response.output_text.delta``, ``response.output_audio_transcript.delta``; beta
``response.text.delta``, ``response.audio_transcript.delta``) are kept as text; audio is counted, not kept.

Several responses may run on one session (out-of-band responses): each event goes to the response its
``response_id`` names. The client answers a call with ``conversation.item.create`` of a
``function_call_output`` item, then ``response.create`` to let the model go on: its evidence is then in.
"""

from __future__ import annotations

from ..ops import Finish, Meta, ProviderError, StreamEnd, TextDelta, Usage
from ..usage import UsageParts, dig
from .base import WebSocketSupport, WireFormat, as_dict, as_str
from .openai_responses import FORMAT as RESPONSES
from .openai_responses import ResponsesDialect

_TEXT = {
    "response.output_text.delta": "text",
    "response.text.delta": "text",  # beta
    "response.output_audio_transcript.delta": "text",
    "response.audio_transcript.delta": "text",  # beta
}
_AUDIO = ("response.output_audio.delta", "response.audio.delta")
# Server events that belong to no response (the session, the conversation, the input buffer).
_SESSION_PREFIXES = (
    "session.",
    "conversation.",
    "input_audio_buffer.",
    "rate_limits.",
    "transcription_session.",
)


class RealtimeDialect(ResponsesDialect):
    def obj_ops(self, obj: dict, kind: str | None, number: int) -> list:
        kind = as_str(obj.get("type")) or kind
        if kind in _TEXT:
            delta = obj.get("delta")
            return [TextDelta(number, 0, "text", delta)] if type(delta) is str and delta else []
        if kind == "response.done":
            return self._done(as_dict(obj.get("response")), number)
        if kind == "response.created":
            response = as_dict(obj.get("response"))
            return [Meta(number, None, response.get("id") or None)] if response.get("id") else []
        return super().obj_ops(obj, kind, number)

    def _done(self, response: dict, number: int) -> list:
        out: list = []
        if response.get("id"):
            out.append(Meta(number, None, response["id"]))
        if type(response.get("usage")) is dict:
            out.append(Usage(number, response["usage"]))
        status = as_str(response.get("status")) or "completed"
        if status == "failed":
            details = as_dict(response.get("status_details"))
            out.append(ProviderError(number, details.get("error") or details or {"status": "failed"}))
        out.append(Finish(number, 0, status))
        out.append(StreamEnd(number))
        return out

    def message_ops(self, body: bytes) -> list:
        return []  # Realtime has no non-streamed response


class RealtimeSession:
    """Routes each server event to the response its ``response_id`` names; reads the client's answers."""

    def __init__(self, connection) -> None:
        self.connection = connection
        self.model: str | None = None
        self.config: dict | None = None  # the client's session.update: tools, tool choice

    def client(self, obj: dict, number: int) -> None:
        kind = obj.get("type")
        connection = self.connection
        if kind == "session.update" and type(obj.get("session")) is dict:
            self.config = {**(self.config or {}), **obj["session"]}
        elif kind == "conversation.item.create":
            item = as_dict(obj.get("item"))
            if item.get("type") == "function_call_output":
                connection.answer([item.get("call_id")])
        elif kind == "response.create":
            connection.settle()  # the client lets the model go on: its answers so far are all it sent

    def server(self, obj: dict, number: int) -> None:
        kind = obj.get("type")
        if type(kind) is not str:
            return
        connection = self.connection
        if kind in ("session.created", "session.updated"):
            self.model = as_str(as_dict(obj.get("session")).get("model")) or self.model
            return
        if kind == "error":
            error = obj.get("error") or obj
            connection.warn(
                "provider-error", f"message {number}: provider error: {error}", ws_message=number, error=error
            )
            return
        if kind.startswith(_SESSION_PREFIXES) or not kind.startswith("response."):
            return
        key = obj.get("response_id")
        if kind in ("response.created", "response.done"):
            key = as_dict(obj.get("response")).get("id")
        response = connection.find(key) if key is not None else connection.latest()
        if response is None:
            if kind == "response.done" and key is not None and connection.named(key) is not None:
                return  # a second end of a response already ended
            response = connection.start(key, request=self.config, model=self.model)
        if kind in _AUDIO:
            delta = obj.get("delta")
            if type(delta) is str:
                connection.count_audio(response, len(delta) * 3 // 4)
            return
        connection.feed(response, obj)
        if kind == "response.done":
            body = as_dict(obj.get("response"))
            status = as_str(body.get("status")) or "completed"
            details = as_dict(body.get("status_details"))
            reason = as_str(details.get("reason")) or as_str(details.get("type"))
            connection.end(response, None if status == "completed" else status, reason)


def _ws_sniff(from_client: bool, obj: dict) -> bool:
    kind = obj.get("type")
    if kind in ("session.created", "session.update", "session.updated"):
        return True
    if kind == "response.create" and from_client:
        return "model" not in obj and "input" not in obj  # Responses WebSocket puts its body at the top
    return not from_client and "event_id" in obj and type(kind) is str and kind.startswith("response.")


def usage_parts(raw: dict) -> UsageParts:
    """``response.done``'s ``response.usage``: ``input_tokens`` includes the cached ones."""
    return {
        "input": (dig(raw, "input_tokens"),),
        "output": (dig(raw, "output_tokens"),),
        "cache_read": (dig(raw, "input_token_details.cached_tokens"),),
        "total": (dig(raw, "total_tokens"),),
    }


FORMAT = WireFormat(
    name="openai-realtime",
    dialect=RealtimeDialect,
    framings=(),
    # session.update's session: flat function declarations and a tool choice, as in Responses.
    tools=RESPONSES.tools,
    forced=RESPONSES.forced,
    usage=usage_parts,
    provider="openai",
    genai_provider="openai",
    # Its call events have the Responses shape (output items, output_index): the same rewriter reads them.
    websocket=WebSocketSupport(
        paths=(r"/realtime$",), session=RealtimeSession, sniff=_ws_sniff, rewrite_as="openai-responses"
    ),
)
