"""OpenAI Chat Completions streams (and the many servers that copy them), as normalized operations.

Every quirk of this family that is about the shape of a chunk lives here: the Azure prompt-filter chunk,
the ``choices: []`` usage chunk, Groq's ``x_groq.usage``, ``reasoning`` vs ``reasoning_content``,
Magistral's content arrays, the deprecated ``function_call``, mid-stream ``{"error": ...}``.
"""

from __future__ import annotations

import orjson

from ..framing import SseEvent
from ..ops import Finish, Meta, ProviderError, StreamEnd, TextDelta, ToolCallDelta, Usage
from ..warnings import WarningLog
from ._common import JsonDialect, as_list, snippet

_REASONING_KEYS = ("reasoning_content", "reasoning")
_loads = orjson.loads


class ChatCompletionsDialect(JsonDialect):
    format = "openai-chat"
    framing = "sse"

    def __init__(self, warnings: WarningLog) -> None:
        super().__init__(warnings)
        self._model: str | None = None
        self._response_id: str | None = None

    def ops(self, event: SseEvent, number: int) -> list:
        """The operations of one stream event (a ``chat.completion.chunk``)."""
        data = event.data
        if data == b"[DONE]":
            return [StreamEnd(number)]
        try:
            obj = _loads(data)  # the common case, without the frames of the careful path
        except orjson.JSONDecodeError:
            obj = None
        if type(obj) is not dict:
            obj = self._load(data, number)
        return [] if obj is None else self._chunk_ops(obj, number)

    def message_ops(self, body: bytes) -> list:
        """A non-streamed response (a ``chat.completion``), as the operations of a one-event stream."""
        obj = self._load(body, 1)
        if obj is None:
            return []
        choices = obj.get("choices")
        if type(choices) is list:
            # Same shape as a chunk once "message" is read as the whole "delta" (calls indexed by position).
            as_deltas = []
            for choice in choices:
                if type(choice) is not dict:
                    continue
                message = choice.get("message")
                if type(message) is dict and type(message.get("tool_calls")) is list:
                    message = dict(message)
                    message["tool_calls"] = [
                        {"index": n, **entry} if type(entry) is dict and "index" not in entry else entry
                        for n, entry in enumerate(message["tool_calls"])
                    ]
                as_deltas.append({**choice, "delta": message})
            obj = {**obj, "choices": as_deltas}
        out = self._chunk_ops(obj, 1)
        out.append(StreamEnd(1))
        return out

    def _chunk_ops(self, obj: dict, number: int) -> list:
        out: list = []
        error = obj.get("error")
        if error:
            out.append(ProviderError(number, error))
        model = obj.get("model")
        response_id = obj.get("id")
        # Azure's first chunk has empty id/model/object; every chunk repeats them: emit on change only.
        if (model and model != self._model) or (response_id and response_id != self._response_id):
            if model:
                self._model = model
            if response_id:
                self._response_id = response_id
            out.append(Meta(number, model or None, response_id or None))
        usage = obj.get("usage")
        if usage and type(usage) is dict:
            out.append(Usage(number, usage))
        groq = obj.get("x_groq")
        if groq and type(groq) is dict and type(groq.get("usage")) is dict:
            out.append(Usage(number, groq["usage"]))
        choices = obj.get("choices")
        if choices and type(choices) is list:
            for choice in choices:
                if type(choice) is dict:
                    self._choice(choice, number, out)
        return out

    def _choice(self, choice: dict, number: int, out: list) -> None:
        index = choice.get("index")
        if type(index) is not int:
            index = 0
        delta = choice.get("delta")
        if delta and type(delta) is dict:
            # A delta holds one or two of these keys: walk what is there rather than ask for each.
            reasoning_seen = False
            for key, value in delta.items():
                if not value:
                    continue
                if key == "tool_calls":
                    if type(value) is list:
                        self._tool_calls(value, number, index, out)
                elif key == "content":
                    if type(value) is str:
                        out.append(TextDelta(number, index, "text", value))
                    elif type(value) is list:
                        _content_parts(value, number, index, out)
                elif key in _REASONING_KEYS:
                    # Some servers send both names with the same text: read one.
                    if type(value) is str and not reasoning_seen:
                        reasoning_seen = True
                        out.append(TextDelta(number, index, "reasoning", value))
                elif key == "refusal":
                    if type(value) is str:
                        out.append(TextDelta(number, index, "refusal", value))
                elif key == "function_call" and type(value) is dict:  # deprecated: no id, no index
                    out.append(
                        ToolCallDelta(number, index, None, None, value.get("name"), value.get("arguments"))
                    )
        reason = choice.get("finish_reason")
        if reason and type(reason) is str:
            out.append(Finish(number, index, reason))

    def _tool_calls(self, entries: list, number: int, index: int, out: list) -> None:
        for entry in entries:
            if type(entry) is not dict:
                self._warn.add(
                    "malformed-event",
                    f"event {number} has a tool_calls entry that is not an object",
                    event=number,
                    data=snippet(repr(entry).encode()),
                )
                continue
            function = entry.get("function")
            if type(function) is dict:
                name = function.get("name")
                arguments = function.get("arguments")
            else:
                name = arguments = None
            call_index = entry.get("index")
            if type(call_index) is not int:
                call_index = None
            out.append(ToolCallDelta(number, index, entry.get("id"), call_index, name, arguments))


def _content_parts(parts: list, number: int, index: int, out: list) -> None:
    # Mistral's Magistral streams content as typed parts: text, and thinking holding text parts.
    for part in parts:
        if type(part) is not dict:
            continue
        kind = part.get("type")
        if kind == "text" and type(part.get("text")) is str and part["text"]:
            out.append(TextDelta(number, index, "text", part["text"]))
        elif kind == "thinking":
            for inner in as_list(part.get("thinking")):
                if type(inner) is dict and type(inner.get("text")) is str and inner["text"]:
                    out.append(TextDelta(number, index, "reasoning", inner["text"]))
