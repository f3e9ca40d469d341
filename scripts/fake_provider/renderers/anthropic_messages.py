"""Anthropic Messages: message_start, content blocks (thinking with its signature, text, tool_use with
input_json_delta) by `index`, message_delta and message_stop, as named SSE after a ping."""

from __future__ import annotations

from typing import Any, ClassVar

from .base import SIGNATURE, Block, Render, WireFormat
from .framing import SSE, named_events
from .openai_chat import HI


class AnthropicMessages(Render):
    bedrock = False
    DELTAS: ClassVar[dict] = {"think": ("thinking_delta", "thinking"), "text": ("text_delta", "text")}
    USAGE: ClassVar[dict] = {
        "input_tokens": 50,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }

    def message(self, content: list, stop_reason: str | None, output_tokens: int) -> dict:
        return {
            "id": f"msg_fake_{self.name}",
            "type": "message",
            "role": "assistant",
            "model": self.name,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {**self.USAGE, "output_tokens": output_tokens},
        }

    def block(self, block: Block, text: str, arguments: dict) -> dict:
        if block.kind == "call":
            return {"type": "tool_use", "id": block.id, "name": block.name, "input": arguments}
        if block.kind == "think":
            return {"type": "thinking", "thinking": text, "signature": SIGNATURE if text else ""}
        return {"type": "text", "text": text}

    def delta(self, block: Block, delta: dict) -> None:
        self.emit({"type": "content_block_delta", "index": block.position, "delta": delta})

    def begin(self) -> None:
        self.emit({"type": "message_start", "message": self.message([], None, 1)})
        if not self.bedrock:
            self.emit({"type": "ping"})

    def open(self, block: Block) -> None:
        content = self.block(block, "", {})
        self.emit({"type": "content_block_start", "index": block.position, "content_block": content})
        if block.kind == "call":
            self.add(block, "")

    def add(self, block: Block, fragment: str) -> None:
        kind, field = self.DELTAS.get(block.kind, ("input_json_delta", "partial_json"))
        self.delta(block, {"type": kind, field: fragment})

    def close(self, block: Block) -> None:
        if block.kind == "think":
            self.delta(block, {"type": "signature_delta", "signature": SIGNATURE})
        self.emit({"type": "content_block_stop", "index": block.position})

    def finish(self) -> None:
        delta = {"stop_reason": self.tools_or("tool_use", "end_turn"), "stop_sequence": None}
        self.emit({"type": "message_delta", "delta": delta, "usage": {**self.USAGE, "output_tokens": 20}})
        stop: dict[str, Any] = {"type": "message_stop"}
        if self.bedrock:
            stop["amazon-bedrock-invocationMetrics"] = {
                "inputTokenCount": 50,
                "outputTokenCount": 20,
                "invocationLatency": 1200,
                "firstByteLatency": 300,
            }
        self.emit(stop)

    def final(self) -> dict:
        content = [self.block(block, block.text, block.whole or {}) for block in self.blocks]
        return self.message(content, self.tools_or("tool_use", "end_turn"), 20)


FORMAT = WireFormat(
    "anthropic-messages",
    AnthropicMessages,
    named_events,
    SSE,
    "/v1/messages",
    (529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    {"max_tokens": 1024, "messages": HI},
    "toolu_{key}",
)
