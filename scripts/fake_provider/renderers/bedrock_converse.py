"""Bedrock ConverseStream: messageStart, contentBlockStart / Delta / Stop by contentBlockIndex, messageStop
and metadata, as AWS event-stream messages named by event type; errors as exception messages."""

from __future__ import annotations

from typing import Any, ClassVar

from .base import SIGNATURE, Block, Payloads, Render, WireFormat
from .framing import AWS_EVENTSTREAM, AWS_EXCEPTION, aws_frames

THROTTLED = {"message": "Too many requests, please wait before trying again."}


class BedrockConverse(Render):
    error_event = AWS_EXCEPTION
    USAGE: ClassVar[dict] = {"inputTokens": 50, "outputTokens": 20, "totalTokens": 70}
    METRICS: ClassVar[dict] = {"latencyMs": 1200}

    def event(self, name: str, **fields: Any) -> None:
        self.emit(fields, name)

    def delta(self, block: Block, **delta: Any) -> None:
        self.event("contentBlockDelta", contentBlockIndex=block.position, delta=delta)

    def begin(self) -> None:
        self.event("messageStart", role="assistant")

    def open(self, block: Block) -> None:
        if block.kind == "call":
            start = {"toolUse": {"toolUseId": block.id, "name": block.name}}
            self.event("contentBlockStart", contentBlockIndex=block.position, start=start)

    def add(self, block: Block, fragment: str) -> None:
        if block.kind == "think":
            self.delta(block, reasoningContent={"text": fragment})
        elif block.kind == "text":
            self.delta(block, text=fragment)
        else:
            self.delta(block, toolUse={"input": fragment})

    def close(self, block: Block) -> None:
        if block.kind == "think":
            self.delta(block, reasoningContent={"signature": SIGNATURE})
        self.event("contentBlockStop", contentBlockIndex=block.position)

    def finish(self) -> None:
        self.event("messageStop", stopReason=self.tools_or("tool_use", "end_turn"))
        self.event("metadata", usage=self.USAGE, metrics=self.METRICS)

    def final(self) -> dict:
        content = []
        for block in self.blocks:
            if block.kind == "think":
                content.append(
                    {"reasoningContent": {"reasoningText": {"text": block.text, "signature": SIGNATURE}}}
                )
            elif block.kind == "text":
                content.append({"text": block.text})
            else:
                content.append({"toolUse": {"toolUseId": block.id, "name": block.name, "input": block.whole}})
        return {
            "output": {"message": {"role": "assistant", "content": content}},
            "stopReason": self.tools_or("tool_use", "end_turn"),
            "usage": self.USAGE,
            "metrics": self.METRICS,
        }


def frame(payloads: Payloads) -> list[bytes]:
    return aws_frames(payloads, lambda payload, pad: {**payload, "p": pad})


FORMAT = WireFormat(
    "bedrock-converse",
    BedrockConverse,
    frame,
    AWS_EVENTSTREAM,
    "/model/{model}/{verb}",
    (429, THROTTLED),
    {"messages": [{"role": "user", "content": [{"text": "hi"}]}]},
    "tooluse_{key}",
    ("converse-stream", "converse"),
)
