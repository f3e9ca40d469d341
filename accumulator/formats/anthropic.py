"""Anthropic Messages streams (direct ``/v1/messages``, Vertex ``:streamRawPredict``, Bedrock mantle).

A tool call is a ``tool_use`` content block: ``content_block_start`` names it (id, name) at its block
``index``, ``input_json_delta`` fragments name only the index. The start's ``input: {}`` is a placeholder,
never a seed. Events are read by their JSON ``type``, so the same class reads Bedrock InvokeModel's
base64-wrapped events, which carry no SSE names.

Requests: ``tools[]`` (``name``, ``input_schema``), ``tool_choice`` (``type: tool``,
``disable_parallel_tool_use``); echoes are ``tool_use`` / ``tool_result`` blocks of ``messages[].content``.
Rewriting: anthropic-python appends a block on ``content_block_start`` and then indexes
``content[event.index]``: starts must keep their index order, which both reorder policies do since calls
leave in order of first appearance. The run is consecutive tool blocks; pings pass in place.
"""

from __future__ import annotations

from typing import Any

from ..framing import FramedEvent
from ..ops import Finish, Meta, ProviderError, StreamEnd, TextDelta, ToolCallDelta, Usage
from ..rewrite.reorder import ContentBlockKeys
from ..usage import UsageParts, dig
from ..warnings import WarningLog
from .base import (
    JsonDialect,
    RewriteSupport,
    WireFormat,
    as_dict,
    as_int,
    as_list,
    as_str,
    flat_tools,
    forced_by_type,
    message_blocks,
)

_CALL_BLOCKS = ("tool_use", "server_tool_use")
_DELTA_TEXT = {"text_delta": ("text", "text"), "thinking_delta": ("reasoning", "thinking")}


class AnthropicDialect(JsonDialect):
    empty_arguments = "{}"

    def __init__(self, warnings: WarningLog) -> None:
        super().__init__(warnings)
        self._message_id: Any = None  # the message id as the wire sent it
        self._started = False
        self._blocks_seen = False  # anything after message_start: tells a duplicate from a splice
        self._usage: dict = {}
        self._start_input: dict[int | None, dict] = {}  # a non-empty start input, used if no delta comes

    def ops(self, event: FramedEvent, number: int) -> list:
        if event.data == b"[DONE]":
            return []
        obj = self._load(event.data, number)
        return [] if obj is None else self.event_ops(obj, number)

    def event_ops(self, obj: dict, number: int) -> list:
        """The operations of one Anthropic event, however it was framed."""
        kind = as_str(obj.get("type"))
        out: list = []
        if kind == "content_block_delta":
            index = as_int(obj.get("index"))
            delta = as_dict(obj.get("delta"))
            dtype = as_str(delta.get("type"))
            self._blocks_seen = True
            if dtype == "input_json_delta":
                if self._start_input:
                    self._start_input.pop(index, None)
                out.append(ToolCallDelta(number, 0, None, index, None, delta.get("partial_json")))
            elif dtype in _DELTA_TEXT:
                kind_name, field = _DELTA_TEXT[dtype]
                text = delta.get(field)
                if type(text) is str and text:
                    out.append(TextDelta(number, 0, kind_name, text))
        elif kind == "content_block_start":
            self._blocks_seen = True
            block = as_dict(obj.get("content_block"))
            btype = block.get("type")
            if btype in _CALL_BLOCKS:
                # input is {} here: a placeholder the deltas replace, never a seed to append to. Some
                # translating gateways put the whole input there instead: kept, used if no delta comes.
                index = as_int(obj.get("index"))
                if block.get("input") and type(block["input"]) is dict:
                    self._start_input[index] = block["input"]
                out.append(ToolCallDelta(number, 0, block.get("id"), index, block.get("name"), None))
            elif btype == "text" and block.get("text"):
                out.append(TextDelta(number, 0, "text", block["text"]))
            elif btype == "thinking" and block.get("thinking"):
                out.append(TextDelta(number, 0, "reasoning", block["thinking"]))
            elif btype == "redacted_thinking":
                out.append(TextDelta(number, 0, "reasoning", "[redacted thinking]"))
        elif kind == "content_block_stop":
            if self._start_input:
                index = as_int(obj.get("index"))
                if index in self._start_input:
                    out.append(ToolCallDelta(number, 0, None, index, None, self._start_input.pop(index)))
        elif kind == "message_start":
            self._message_start(as_dict(obj.get("message")), number, out)
        elif kind == "message_delta":
            delta = as_dict(obj.get("delta"))
            if type(obj.get("usage")) is dict:
                self._usage = {**self._usage, **obj["usage"]}  # cumulative: the last value wins
                out.append(Usage(number, self._usage))
            if type(delta.get("stop_reason")) is str:
                out.append(Finish(number, 0, delta["stop_reason"]))
        elif kind == "message_stop":
            metrics = obj.get("amazon-bedrock-invocationMetrics")
            if type(metrics) is dict:
                self._usage = {**self._usage, "amazon-bedrock-invocationMetrics": metrics}
                out.append(Usage(number, self._usage))
            out.append(StreamEnd(number))
        elif kind == "error":
            out.append(ProviderError(number, obj.get("error") or obj))
        return out

    def _message_start(self, message: dict, number: int, out: list) -> None:
        message_id = message.get("id")
        if self._started:
            duplicate = message_id == self._message_id and not self._blocks_seen
            self._warn.add(
                "message-restart",
                f"event {number}: "
                + (
                    f"message_start for {message_id} sent twice"
                    if duplicate
                    else f"a second message ({message_id}) started inside message {self._message_id}: "
                    "two generations spliced into one stream"
                ),
                event=number,
                duplicate=duplicate,
                first_id=self._message_id,
                second_id=message_id,
            )
            if duplicate:
                return
        self._started = True
        self._message_id = message_id
        self._blocks_seen = False
        out.append(Meta(number, message.get("model") or None, message_id or None))
        if type(message.get("usage")) is dict:
            self._usage = dict(message["usage"])
            out.append(Usage(number, self._usage))

    def message_ops(self, body: bytes) -> list:
        obj = self._load(body, 1)
        if obj is None:
            return []
        if obj.get("type") == "error":  # a whole message, ended: an error, not a truncated stream
            return [ProviderError(1, obj.get("error") or obj), StreamEnd(1)]
        out: list = [Meta(1, obj.get("model") or None, obj.get("id") or None)]
        for position, block in enumerate(as_list(obj.get("content"))):
            if type(block) is not dict:
                continue
            btype = block.get("type")
            if btype in _CALL_BLOCKS:
                out.append(
                    ToolCallDelta(1, 0, block.get("id"), position, block.get("name"), block.get("input"))
                )
            elif btype == "text" and block.get("text"):
                out.append(TextDelta(1, 0, "text", block["text"]))
            elif btype == "thinking" and block.get("thinking"):
                out.append(TextDelta(1, 0, "reasoning", block["thinking"]))
        if type(obj.get("usage")) is dict:
            out.append(Usage(1, obj["usage"]))
        if type(obj.get("stop_reason")) is str:
            out.append(Finish(1, 0, obj["stop_reason"]))
        out.append(StreamEnd(1))
        return out


# -- rewriting -----------------------------------------------------------------------------------------------


def block_keys(event_of=None) -> ContentBlockKeys:
    """The reorder classifier of Anthropic events; ``event_of(unit)`` finds the event in a unit (Bedrock
    InvokeModel wraps each one in a frame)."""
    return ContentBlockKeys(
        start="content_block_start",
        delta="content_block_delta",
        stop="content_block_stop",
        is_tool=lambda event: as_dict(event.get("content_block")).get("type") in _CALL_BLOCKS,
        index_field="index",
        kind_of=lambda unit, event: event.get("type"),
        event_of=event_of,
        passing=("ping",),
    )


# -- requests ------------------------------------------------------------------------------------------------


def _parallel(request: dict) -> bool | None:
    choice = request.get("tool_choice")
    return False if type(choice) is dict and choice.get("disable_parallel_tool_use") is True else None


def _echoes(request: dict, add_call, add_result) -> None:
    for turn, block in message_blocks(request, "messages", "content"):
        kind = block.get("type")
        if kind == "tool_use":
            add_call(block.get("id"), block.get("name"), block.get("input"), turn)
        elif kind == "tool_result" and type(block.get("tool_use_id")) is str:
            add_result(block["tool_use_id"], block.get("content"), block.get("is_error") is True)


_EVENTS = ("message_start", "content_block_start", "content_block_delta")


def _sniff(event, obj) -> bool:
    return event.type in _EVENTS or (obj is not None and obj.get("type") in _EVENTS)


def _sniff_message(obj: dict) -> bool:
    return (obj.get("object") or obj.get("type")) == "message" and "content" in obj


def usage_parts(raw: dict) -> UsageParts:
    """``message_start``'s usage merged with ``message_delta``'s (cumulative): ``input_tokens`` leaves
    out the cached tokens, which are added to it here."""
    written = dig(raw, "cache_creation_input_tokens")
    read = dig(raw, "cache_read_input_tokens")
    return {
        "input": (dig(raw, "input_tokens"), written, read),
        "output": (dig(raw, "output_tokens"),),
        "cache_read": (read,),
        "cache_write": (written,),
        "reasoning": (dig(raw, "output_tokens_details.thinking_tokens"),),
    }


FORMAT = WireFormat(
    name="anthropic-messages",
    dialect=AnthropicDialect,
    framings=("sse",),
    # Anthropic direct and Bedrock mantle (/anthropic/v1/messages); Vertex publishes it as rawPredict.
    paths=(
        (r"(^|/)v1/messages$", False),
        (r"/publishers/anthropic/models/[^/]+:streamRawPredict$", True),
        (r"/publishers/anthropic/models/[^/]+:rawPredict$", False),
    ),
    sniff=_sniff,
    sniff_message=_sniff_message,
    tools=lambda request: flat_tools(request, "input_schema"),
    parallel=_parallel,
    forced=lambda request: forced_by_type(request, "tool"),
    echoes=_echoes,
    usage=usage_parts,
    tool_finish=frozenset({"tool_use"}),
    provider="anthropic",
    genai_provider="anthropic",
    rewrite=RewriteSupport(
        key="content block index",
        name_whole_in="content_block_start",
        keys=lambda purpose: block_keys(),
    ),
)
