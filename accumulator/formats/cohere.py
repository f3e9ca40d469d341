"""Cohere v2 chat streams (``/v2/chat``).

A tool call is named (id, name) by ``tool-call-start`` at its ``index`` (a counter of its own, apart from
content indices); ``tool-call-delta`` fragments name only the index. ``tool_calls`` is a single object in
these deltas, not a list. ``tool-plan-delta`` (the plan before calling tools) counts as reasoning.
Requests and their echoes have Chat Completions' shape (``tools[].function``, ``messages[].tool_calls``).
Rewriting: the run is consecutive tool calls; any other event ends it.
"""

from __future__ import annotations

from ..framing import FramedEvent
from ..ops import Finish, Meta, ProviderError, StreamEnd, TextDelta, ToolCallDelta, Usage
from ..rewrite.reorder import BOUNDARY, END, FRAGMENT, PASS, START
from ..usage import UsageParts, dig
from . import openai_chat
from .base import JsonDialect, RewriteSupport, WireFormat, as_dict, as_int, as_list, as_str


def _message(obj: dict) -> dict:
    return as_dict(as_dict(obj.get("delta")).get("message"))


class CohereDialect(JsonDialect):
    def ops(self, event: FramedEvent, number: int) -> list:
        if event.data == b"[DONE]":  # the SDK tolerates a trailing one; message-end is the end marker
            return []
        obj = self._load(event.data, number)
        if obj is None:
            return []
        kind = as_str(obj.get("type")) or event.type
        if kind == "tool-call-delta":
            function = as_dict(as_dict(_message(obj).get("tool_calls")).get("function"))
            return [ToolCallDelta(number, 0, None, as_int(obj.get("index")), None, function.get("arguments"))]
        if kind == "content-delta":
            content = as_dict(_message(obj).get("content"))
            for field, text_kind in (("text", "text"), ("thinking", "reasoning")):
                if type(content.get(field)) is str and content[field]:
                    return [TextDelta(number, 0, text_kind, content[field])]
        elif kind == "tool-plan-delta":
            plan = _message(obj).get("tool_plan")
            if type(plan) is str and plan:
                return [TextDelta(number, 0, "reasoning", plan)]
        elif kind == "tool-call-start":
            call = as_dict(_message(obj).get("tool_calls"))
            function = as_dict(call.get("function"))
            index = as_int(obj.get("index"))
            return [
                ToolCallDelta(
                    number, 0, call.get("id"), index, function.get("name"), function.get("arguments")
                )
            ]
        elif kind == "message-start":
            return [Meta(number, None, obj.get("id") or None)]
        elif kind == "message-end":
            delta = as_dict(obj.get("delta"))
            out: list = []
            if type(delta.get("usage")) is dict:
                out.append(Usage(number, delta["usage"]))
            reason = delta.get("finish_reason")
            if reason == "ERROR":
                out.append(ProviderError(number, {"finish_reason": reason, **as_dict(delta.get("error"))}))
            if type(reason) is str:
                out.append(Finish(number, 0, reason))
            out.append(StreamEnd(number))
            return out
        elif kind == "error":
            return [ProviderError(number, obj.get("error") or obj)]
        return []

    def message_ops(self, body: bytes) -> list:
        obj = self._load(body, 1)
        if obj is None:
            return []
        message = as_dict(obj.get("message"))
        out: list = [Meta(1, None, obj.get("id") or None)]
        if type(message.get("tool_plan")) is str and message["tool_plan"]:
            out.append(TextDelta(1, 0, "reasoning", message["tool_plan"]))
        for part in as_list(message.get("content")):
            if type(part) is dict and type(part.get("text")) is str and part["text"]:
                out.append(
                    TextDelta(1, 0, "text" if part.get("type") != "thinking" else "reasoning", part["text"])
                )
        for position, call in enumerate(as_list(message.get("tool_calls"))):
            if type(call) is dict:
                function = as_dict(call.get("function"))
                out.append(
                    ToolCallDelta(
                        1, 0, call.get("id"), position, function.get("name"), function.get("arguments")
                    )
                )
        if type(obj.get("usage")) is dict:
            out.append(Usage(1, obj["usage"]))
        if type(obj.get("finish_reason")) is str:
            out.append(Finish(1, 0, obj["finish_reason"]))
        out.append(StreamEnd(1))
        return out


# -- rewriting -----------------------------------------------------------------------------------------------

_ROLES = {"tool-call-start": START, "tool-call-delta": FRAGMENT, "tool-call-end": END}


def tool_keys(unit) -> tuple[int, object]:
    if unit.quiet:
        return PASS, None
    obj = unit.obj
    if type(obj) is not dict:
        return BOUNDARY, None
    kind = obj.get("type")
    if type(kind) is not str:
        kind = unit.name
    role = _ROLES.get(kind)
    index = obj.get("index")
    if role is None or type(index) is not int:
        return BOUNDARY, None
    return role, index


_EVENTS = ("message-start", "tool-call-start", "content-delta", "tool-plan-delta")


def _sniff(event, obj) -> bool:
    return event.type in _EVENTS or (obj is not None and obj.get("type") in _EVENTS)


def usage_parts(raw: dict) -> UsageParts:
    """``message-end``'s usage: the billed units (what is paid for) where given, else the tokens used."""
    counted = "billed_units" if type(raw.get("billed_units")) is dict else "tokens"
    return {
        "input": (dig(raw, f"{counted}.input_tokens"),),
        "output": (dig(raw, f"{counted}.output_tokens"),),
        "cache_read": (dig(raw, "cached_tokens"),),
    }


FORMAT = WireFormat(
    name="cohere-v2",
    dialect=CohereDialect,
    framings=("sse",),
    paths=((r"/v2/chat$", False),),
    sniff=_sniff,
    sniff_message=lambda obj: "message" in obj and "finish_reason" in obj,
    tools=openai_chat.request_tools,
    parallel=openai_chat.request_parallel,
    forced=openai_chat.request_forced,
    echoes=openai_chat.request_echoes,
    usage=usage_parts,
    tool_finish=frozenset({"TOOL_CALL"}),
    provider="cohere",
    genai_provider="cohere",
    rewrite=RewriteSupport(key="index", name_whole_in="tool-call-start", keys=lambda purpose: tool_keys),
)
