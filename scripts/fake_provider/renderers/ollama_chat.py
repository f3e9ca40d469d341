"""Ollama /api/chat: NDJSON lines of whole messages (thinking, content, whole tool calls with their
function.index), the last one `done` with its durations and counts."""

from __future__ import annotations

from typing import Any, ClassVar

from .base import CREATED_AT, OVERLOADED, Block, Render, WireFormat
from .framing import ndjson_lines
from .openai_chat import HI


class OllamaChat(Render):
    whole_calls = True
    FIELDS: ClassVar[dict] = {"think": "thinking", "text": "content"}
    DONE: ClassVar[dict] = {
        "done_reason": "stop",
        "total_duration": 1823456789,
        "load_duration": 21345678,
        "prompt_eval_count": 50,
        "prompt_eval_duration": 101234567,
        "eval_count": 20,
        "eval_duration": 1654321098,
    }

    def line(self, message: dict, done: bool = False, **extra: Any) -> dict:
        return {
            "model": self.name,
            "created_at": CREATED_AT,
            "message": {"role": "assistant", "content": "", **message},
            "done": done,
            **extra,
        }

    def tool_calls(self, calls: list[Block]) -> dict:
        return {
            "tool_calls": [
                {"id": c.id, "function": {"index": c.number, "name": c.name, "arguments": c.whole}}
                for c in calls
            ]
        }

    def open(self, block: Block) -> None:
        if block.kind == "call" and self.sent(block):
            self.emit(self.line(self.tool_calls([block])))

    def add(self, block: Block, fragment: str) -> None:
        if block.kind != "call":
            self.emit(self.line({self.FIELDS[block.kind]: fragment}))

    def finish(self) -> None:
        self.emit(self.line({}, True, **self.DONE))

    def final(self) -> dict:
        message = {field: self.joined(kind) for kind, field in self.FIELDS.items() if self.joined(kind)}
        return self.line(
            {**message, **(self.tool_calls(self.calls) if self.calls else {})}, True, **self.DONE
        )


FORMAT = WireFormat(
    "ollama-chat",
    OllamaChat,
    ndjson_lines,
    "application/x-ndjson",
    "/api/chat",
    (500, {"error": OVERLOADED}),
    {"messages": HI},
)
