"""AWS Bedrock ConverseStream (``/model/{id}/converse-stream``; ``/converse`` not streamed): everything
toolcall-lens knows of it.

Framed as the AWS binary event stream, events named by the ``:event-type`` header; a tool call is a
content block, named (``toolUseId``, ``name``) by ``contentBlockStart`` at its ``contentBlockIndex``.
Payloads carry a random ``"p"`` padding field, ignored. Exception frames are provider errors. Requests:
``toolConfig.tools[]`` (``toolSpec``, or ``systemTool`` for a server-side tool such as Nova's),
``toolConfig.toolChoice.tool``; echoes are ``toolUse`` / ``toolResult`` blocks. Rewriting reorders whole
frames, their bytes and CRCs unchanged.
"""

from __future__ import annotations

from ..ops import Finish, StreamEnd, TextDelta, ToolCallDelta, Usage
from ..rewrite.reorder import ContentBlockKeys
from ..usage import UsageParts, dig
from .base import (
    EventStreamDialect,
    RewriteSupport,
    WireFormat,
    as_dict,
    as_int,
    as_list,
    declare,
    message_blocks,
    named,
)


class ConverseStreamDialect(EventStreamDialect):
    def frame_ops(self, event_type: str | None, obj: dict, number: int) -> list:
        if event_type == "contentBlockDelta":
            delta = as_dict(obj.get("delta"))
            index = as_int(obj.get("contentBlockIndex"))
            if "toolUse" in delta:
                return [ToolCallDelta(number, 0, None, index, None, as_dict(delta["toolUse"]).get("input"))]
            if type(delta.get("text")) is str and delta["text"]:
                return [TextDelta(number, 0, "text", delta["text"])]
            reasoning = as_dict(delta.get("reasoningContent"))
            if type(reasoning.get("text")) is str and reasoning["text"]:
                return [TextDelta(number, 0, "reasoning", reasoning["text"])]
        elif event_type == "contentBlockStart":
            tool = as_dict(as_dict(obj.get("start")).get("toolUse"))
            if tool:
                index = as_int(obj.get("contentBlockIndex"))
                return [ToolCallDelta(number, 0, tool.get("toolUseId"), index, tool.get("name"), None)]
        elif event_type == "messageStop":
            out: list = [StreamEnd(number)]
            if type(obj.get("stopReason")) is str:
                out.insert(0, Finish(number, 0, obj["stopReason"]))
            return out
        elif event_type == "metadata" and type(obj.get("usage")) is dict:
            return [Usage(number, obj["usage"])]
        return []

    def message_ops(self, body: bytes) -> list:
        obj = self._load(body, 1)
        if obj is None:
            return []
        out: list = []
        message = as_dict(as_dict(obj.get("output")).get("message"))
        for position, block in enumerate(as_list(message.get("content"))):
            if type(block) is not dict:
                continue
            if type(block.get("toolUse")) is dict:
                tool = block["toolUse"]
                out.append(
                    ToolCallDelta(1, 0, tool.get("toolUseId"), position, tool.get("name"), tool.get("input"))
                )
            elif type(block.get("text")) is str and block["text"]:
                out.append(TextDelta(1, 0, "text", block["text"]))
            elif type(as_dict(block.get("reasoningContent")).get("reasoningText")) is dict:
                text = block["reasoningContent"]["reasoningText"].get("text")
                if type(text) is str and text:
                    out.append(TextDelta(1, 0, "reasoning", text))
        if type(obj.get("usage")) is dict:
            out.append(Usage(1, obj["usage"]))
        if type(obj.get("stopReason")) is str:
            out.append(Finish(1, 0, obj["stopReason"]))
        out.append(StreamEnd(1))
        return out


# -- rewriting -----------------------------------------------------------------------------------------------


def _block_keys() -> ContentBlockKeys:
    return ContentBlockKeys(
        start="contentBlockStart",
        delta="contentBlockDelta",
        stop="contentBlockStop",
        is_tool=lambda event: type(as_dict(event.get("start")).get("toolUse")) is dict,
        index_field="contentBlockIndex",
        kind_of=lambda unit, event: unit.name,  # the frame's :event-type
    )


# -- requests ------------------------------------------------------------------------------------------------


def _tools(request: dict) -> dict | None:
    config = request.get("toolConfig")
    if type(config) is not dict or "tools" not in config:
        return None
    declared: dict = {}
    for tool in config["tools"] if type(config["tools"]) is list else ():
        if type(tool) is not dict:
            continue
        spec = tool.get("toolSpec")
        if type(spec) is dict:
            schema = spec.get("inputSchema")
            declare(declared, spec, schema.get("json") if type(schema) is dict else None)
        system = tool.get("systemTool")  # a server-side tool (Nova): it declares its name, no schema
        if type(system) is dict:
            declare(declared, system, None)
    return declared


def _forced(request: dict) -> str | None:
    config = request.get("toolConfig")
    choice = config.get("toolChoice") if type(config) is dict else None
    return named(choice.get("tool")) if type(choice) is dict else None


def _echoes(request: dict, add_call, add_result) -> None:
    for turn, block in message_blocks(request, "messages", "content"):
        if type(block.get("toolUse")) is dict:
            use = block["toolUse"]
            add_call(use.get("toolUseId"), use.get("name"), use.get("input"), turn)
        elif type(block.get("toolResult")) is dict and type(block["toolResult"].get("toolUseId")) is str:
            outcome = block["toolResult"]
            add_result(outcome["toolUseId"], outcome.get("content"), outcome.get("status") == "error")


def _sniff(event, obj) -> bool:
    return event.kind == "event" and event.type != "chunk"


def _sniff_message(obj: dict) -> bool:
    return type(obj.get("output")) is dict and "message" in obj["output"]


def usage_parts(raw: dict) -> UsageParts:
    """The ``metadata`` event's ``usage``: ``inputTokens`` leaves out the cached tokens, added here. Its
    ``totalTokens`` is not compared: whether it counts them is not documented."""
    read = dig(raw, "cacheReadInputTokens")
    written = dig(raw, "cacheWriteInputTokens")
    return {
        "input": (dig(raw, "inputTokens"), read, written),
        "output": (dig(raw, "outputTokens"),),
        "cache_read": (read,),
        "cache_write": (written,),
    }


FORMAT = WireFormat(
    name="bedrock-converse",
    dialect=ConverseStreamDialect,
    framings=("eventstream",),
    paths=((r"/model/[^/]+/converse-stream$", True), (r"/model/[^/]+/converse$", False)),
    sniff=_sniff,
    sniff_message=_sniff_message,
    tools=_tools,
    forced=_forced,
    echoes=_echoes,
    usage=usage_parts,
    tool_finish=frozenset({"tool_use"}),
    provider="aws",
    genai_provider="aws.bedrock",
    rewrite=RewriteSupport(
        key="contentBlockIndex", name_whole_in="contentBlockStart", keys=lambda purpose: _block_keys()
    ),
)
