"""Ollama's native chat streams (``/api/chat``): one JSON object per line (NDJSON).

Every tool call arrives whole, arguments as an object, so each is a call of its own (``function.index``
is shown, not trusted: older servers repeat it). ``done: true`` ends the stream, with the token counts;
its ``done_reason`` stays ``stop`` even when tools were called. Errors come as ``{"error": "..."}`` lines.
Requests and their echoes have Chat Completions' shape, but Ollama's own libraries have no id on a tool
call (``ollama`` for Python drops it; ``ollama-js``'s types have none, so code built on them drops it): a
client echoes the calls without the ids the stream gave them, and answers each with its tool's name
(``tool_name``), no id. Chat's request reader, which Ollama shares, reads such a result (a field Chat has
not), and the echo check matches its calls by position and name too (``echoed_without_ids``).
"""

from __future__ import annotations

from typing import Any

from ..framing import FramedEvent
from ..ops import Finish, Meta, ProviderError, StreamEnd, TextDelta, ToolCallDelta, Usage
from ..usage import UsageParts, dig
from . import openai_chat
from .base import JsonDialect, RewriteSupport, WireFormat, as_dict, as_int, as_list, as_str

_USAGE_FIELDS = (
    "prompt_eval_count",
    "eval_count",
    "total_duration",
    "load_duration",
    "prompt_eval_duration",
    "eval_duration",
)


class OllamaChatDialect(JsonDialect):
    fragments = False
    empty_arguments = "{}"

    def __init__(self, warnings) -> None:
        super().__init__(warnings)
        self._model: Any = None  # the model as the wire sent it

    def ops(self, event: FramedEvent, number: int) -> list:
        obj = self._load(event.data, number)
        return [] if obj is None else self._line_ops(obj, number)

    def _line_ops(self, obj: dict, number: int) -> list:
        out: list = []
        if obj.get("error"):
            out.append(ProviderError(number, obj["error"]))
        model = obj.get("model")
        if model and model != self._model:
            self._model = model
            out.append(Meta(number, model, None))
        message = as_dict(obj.get("message"))
        if type(message.get("thinking")) is str and message["thinking"]:
            out.append(TextDelta(number, 0, "reasoning", message["thinking"]))
        if type(message.get("content")) is str and message["content"]:
            out.append(TextDelta(number, 0, "text", message["content"]))
        for call in as_list(message.get("tool_calls")):
            if type(call) is dict:
                function = as_dict(call.get("function"))
                out.append(
                    ToolCallDelta(
                        number,
                        0,
                        call.get("id"),
                        as_int(function.get("index")),
                        function.get("name"),
                        function.get("arguments"),
                        whole=True,
                    )
                )
        if obj.get("done") is True:
            usage = {k: obj[k] for k in _USAGE_FIELDS if k in obj}
            if usage:
                out.append(Usage(number, usage))
            out.append(Finish(number, 0, as_str(obj.get("done_reason")) or "stop"))
            out.append(StreamEnd(number))
        return out

    def message_ops(self, body: bytes) -> list:
        obj = self._load(body, 1)
        return [] if obj is None else self._line_ops(obj, 1)


def _sniff(event, obj) -> bool:
    return obj is not None and "done" in obj and ("message" in obj or "created_at" in obj)


def usage_parts(raw: dict) -> UsageParts:
    """The final object's counts (no cache counts)."""
    return {"input": (dig(raw, "prompt_eval_count"),), "output": (dig(raw, "eval_count"),)}


FORMAT = WireFormat(
    name="ollama-chat",
    dialect=OllamaChatDialect,
    framings=("ndjson",),
    paths=((r"/api/chat$", False),),
    sniff=_sniff,
    tools=openai_chat.request_tools,
    parallel=openai_chat.request_parallel,
    forced=openai_chat.request_forced,
    echoes=openai_chat.request_echoes,  # which reads its tool results by tool_name too
    echoed_without_ids=True,
    usage=usage_parts,
    genai_provider="ollama",
    rewrite=RewriteSupport(whole="a line"),
)
