"""Cohere v2 chat: message-start, tool-plan deltas (its reasoning), content and tool-call start / delta /
end by `index`, message-end with the finish reason (ERROR for a failure), as named SSE."""

from __future__ import annotations

from typing import Any, ClassVar

from .base import OVERLOADED, Block, Render, WireFormat
from .framing import SSE, named_events
from .openai_chat import HI


class CohereV2(Render):
    USAGE: ClassVar[dict] = {
        "billed_units": {"input_tokens": 50, "output_tokens": 20},
        "tokens": {"input_tokens": 50, "output_tokens": 20},
    }

    def event(self, kind: str, block: Block | None = None, **message: Any) -> None:
        scope = {} if block is None else {"index": block.number}
        self.emit({"type": kind, **scope, **({"delta": {"message": message}} if message else {})})

    def tool_call(self, block: Block, arguments: str) -> dict:
        return {"id": block.id, "type": "function", "function": {"name": block.name, "arguments": arguments}}

    def begin(self) -> None:
        message = {"role": "assistant", "content": [], "tool_plan": "", "tool_calls": [], "citations": []}
        self.emit({"type": "message-start", "id": f"fake-{self.name}", "delta": {"message": message}})

    def open(self, block: Block) -> None:
        if block.kind == "text":
            self.event("content-start", block, content={"type": "text", "text": ""})
        elif block.kind == "call":
            self.event("tool-call-start", block, tool_calls=self.tool_call(block, ""))

    def add(self, block: Block, fragment: str) -> None:
        if block.kind == "think":
            self.event("tool-plan-delta", tool_plan=fragment)
        elif block.kind == "text":
            self.event("content-delta", block, content={"text": fragment})
        else:
            self.event("tool-call-delta", block, tool_calls={"function": {"arguments": fragment}})

    def close(self, block: Block) -> None:
        if block.kind != "think":
            self.event("content-end" if block.kind == "text" else "tool-call-end", block)

    def end(self, finish_reason: str, **fields: Any) -> None:
        delta = {"finish_reason": finish_reason, **fields, "usage": self.USAGE}
        self.emit({"type": "message-end", "delta": delta})

    def finish(self) -> None:
        self.end(self.tools_or("TOOL_CALL", "COMPLETE"))

    def error(self) -> None:
        self.end("ERROR", error=OVERLOADED)

    def final(self) -> dict:
        message: dict[str, Any] = {"role": "assistant"}
        if plan := self.joined("think"):
            message["tool_plan"] = plan
        if self.calls:
            message["tool_calls"] = [self.tool_call(c, c.full) for c in self.calls]
        if text := self.joined("text"):
            message["content"] = [{"type": "text", "text": text}]
        finish_reason = self.tools_or("TOOL_CALL", "COMPLETE")
        return {
            "id": f"fake-{self.name}",
            "finish_reason": finish_reason,
            "message": message,
            "usage": self.USAGE,
        }


FORMAT = WireFormat(
    "cohere-v2",
    CohereV2,
    named_events,
    SSE,
    "/v2/chat",
    (500, {"message": OVERLOADED}),
    {"messages": HI},
    "{name}_{key}",
)
