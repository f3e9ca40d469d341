"""AWS Bedrock streams, framed as the AWS binary event stream.

ConverseStream (``/converse-stream``): events named by the ``:event-type`` header; a tool call is a
content block, named (``toolUseId``, ``name``) by ``contentBlockStart`` at its ``contentBlockIndex``.
InvokeModelWithResponseStream (``/invoke-with-response-stream``): every frame is a ``chunk`` whose payload
``{"bytes": base64, "p": padding}`` wraps one Anthropic event, read by the Anthropic dialect. Payloads
carry a random ``"p"`` padding field, ignored. Exception frames are provider errors.
"""

from __future__ import annotations

import base64
import binascii

from ..ops import Finish, ProviderError, StreamEnd, TextDelta, ToolCallDelta, Usage
from ..warnings import WarningLog
from ._common import JsonDialect, as_dict, as_int, as_list
from .anthropic import AnthropicDialect


class BedrockFrames(JsonDialect):
    """What both Bedrock dialects share: frame kinds (exceptions, bad frames) before their payload."""

    framing = "eventstream"
    empty_arguments = "{}"  # tool input is an object (a no-argument call streams input "")

    def ops(self, event, number: int) -> list:
        if event.kind == "event":
            obj = self._load(event.data, number)
            return [] if obj is None else self.frame_ops(event.type, obj, number)
        if event.kind == "malformed":
            self._malformed(number, event.data, "is not a valid frame")
            return []
        # An exception or error frame: the stream ends there.
        obj = self._load(event.data, number) if event.data[:1] == b"{" else None
        return [
            ProviderError(
                number, {"type": event.type, **(obj or {"message": event.data.decode(errors="replace")})}
            )
        ]

    def frame_ops(self, event_type: str | None, obj: dict, number: int) -> list:
        raise NotImplementedError


class ConverseStreamDialect(BedrockFrames):
    format = "bedrock-converse"

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


class InvokeStreamDialect(BedrockFrames):
    format = "bedrock-invoke"

    def __init__(self, warnings: WarningLog) -> None:
        super().__init__(warnings)
        self._anthropic = AnthropicDialect(warnings)

    def frame_ops(self, event_type: str | None, obj: dict, number: int) -> list:
        wrapped = obj.get("bytes")
        if event_type != "chunk" or type(wrapped) is not str:
            return []
        try:
            payload = base64.b64decode(wrapped, validate=True)
        except (binascii.Error, ValueError):
            self._malformed(number, wrapped.encode()[:400], "has a payload that is not base64")
            return []
        inner = self._load(payload, number)
        return [] if inner is None else self._anthropic.event_ops(inner, number)

    def message_ops(self, body: bytes) -> list:
        # InvokeModel (not streamed) answers with the model's own JSON: an Anthropic message here.
        return self._anthropic.message_ops(body)
