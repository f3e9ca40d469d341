"""OpenAI Chat Completions: `chat.completion.chunk` deltas as SSE data lines, then `data: [DONE]`; tool calls
by `index` (bent by the scenarios' chat quirks: every call at index 0, identity repeated on every delta); a
call whose key the script lists under `custom` is a custom tool's, its text its `custom.input`."""

from __future__ import annotations

from typing import Any

from .base import CREATED, OVERLOADED, USAGE, Block, Payloads, Render, WireFormat
from .framing import SSE, data_lines

HI = [{"role": "user", "content": "hi"}]
OPENAI_ERROR = (502, {"error": {"message": OVERLOADED, "type": "server_error", "code": 502}})


class ChatCompletions(Render):
    def chunk(self, delta: dict, finish_reason: str | None = None) -> None:
        self.emit({**self.head(), "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]})

    def head(self, kind: str = "chat.completion.chunk") -> dict:
        return {"id": f"chatcmpl-fake-{self.name}", "object": kind, "created": CREATED, "model": self.name}

    def tool_delta(self, block: Block, fragment: str, first: bool) -> None:
        quirk = self.script.get("chat_quirk")
        index = 0 if quirk == "same-index" else block.number
        if block.key in self.script.get("custom", ()):
            custom = {"name": block.name, "input": fragment} if first else {"input": fragment}
            identity = {"id": block.id, "type": "custom"} if first else {}
            self.chunk({"tool_calls": [{"index": index, **identity, "custom": custom}]})
        elif first or quirk == "repeat-identity":
            function = {"name": block.name, "arguments": fragment}
            self.chunk(
                {"tool_calls": [{"index": index, "id": block.id, "type": "function", "function": function}]}
            )
        else:
            self.chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})

    def begin(self) -> None:
        self.chunk({"role": "assistant", "content": None})

    def start(self, block: Block, fragment: str) -> None:
        if block.kind == "call":
            self.tool_delta(block, fragment, first=True)
        else:
            self.add(block, fragment)

    def add(self, block: Block, fragment: str) -> None:
        if block.kind == "call":
            self.tool_delta(block, fragment, first=False)
        elif block.kind == "text":
            self.chunk({"content": fragment})

    def finish(self) -> None:
        self.chunk({}, self.tools_or("tool_calls", "stop"))
        self.emit({**self.head(), "choices": [], "usage": USAGE})

    def final(self) -> dict:
        message: dict[str, Any] = {"role": "assistant", "content": self.joined("text") or None}
        if self.calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "custom", "custom": {"name": c.name, "input": c.full}}
                if c.key in self.script.get("custom", ())
                else {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.full}}
                for c in self.calls
            ]
        choice = {"index": 0, "message": message, "finish_reason": self.tools_or("tool_calls", "stop")}
        return {**self.head("chat.completion"), "choices": [choice], "usage": USAGE}


def frame(payloads: Payloads) -> list[bytes]:
    return [*data_lines(payloads), b"data: [DONE]\n\n"]


FORMAT = WireFormat(
    "openai-chat", ChatCompletions, frame, SSE, "/v1/chat/completions", OPENAI_ERROR, {"messages": HI}
)
