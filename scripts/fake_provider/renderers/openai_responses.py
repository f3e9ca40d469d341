"""OpenAI Responses: typed `response.*` events as named SSE, each with a sequence_number; every output item
(reasoning, message, function call, a custom tool's call) wrapped in its added / done events. A call whose
key the script lists under `custom` is a custom tool's (a free-form tool, as Codex's apply_patch): a
`custom_tool_call` item, its text streamed as `input`. One it lists under `search` is a client-executed tool
search: a `tool_search_call` item, whole (no delta events), its arguments an object. `builtin` maps a call's
key to a built-in tool the client runs: `shell` (a `shell_call` item, the call's text its one command,
streamed in `response.shell_call_command.*` events) or `apply_patch` (an `apply_patch_call` item, whole, the
call's text the JSON of its `operation`). `namespace` maps a call's key to the namespace its item names."""

from __future__ import annotations

from typing import Any, ClassVar

from .base import CREATED, OVERLOADED, Block, Render, WireFormat
from .framing import SSE, named_events
from .openai_chat import OPENAI_ERROR


class Responses(Render):
    # kind: (part added, delta, done, part done) event types; the item's own events wrap them
    EVENTS: ClassVar[dict] = {
        "think": (
            "response.reasoning_summary_part.added",
            "response.reasoning_summary_text.delta",
            "response.reasoning_summary_text.done",
            "response.reasoning_summary_part.done",
        ),
        "text": (
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
        ),
        "call": (
            None,
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            None,
        ),
    }
    USAGE: ClassVar[dict] = {
        "input_tokens": 50,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 20,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 70,
    }

    def emit(self, payload: dict, event: str | None = None) -> None:
        super().emit({**payload, "sequence_number": len(self.out)}, event)

    def response(self, status: str, **fields: Any) -> dict:
        return {
            "id": f"resp_fake_{self.name}",
            "object": "response",
            "created_at": CREATED,
            "status": status,
            "error": None,
            "incomplete_details": None,
            "model": self.name,
            "output": [],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "usage": None,
            **fields,
        }

    # kind: (delta, done) event types of a custom tool's call, and its item's field for the text
    CUSTOM: ClassVar[tuple] = (
        "response.custom_tool_call_input.delta",
        "response.custom_tool_call_input.done",
    )

    def custom(self, block: Block) -> bool:
        return block.kind == "call" and block.key in self.script.get("custom", ())

    def search(self, block: Block) -> bool:
        return block.kind == "call" and block.key in self.script.get("search", ())

    def builtin(self, block: Block) -> str | None:
        return self.script.get("builtin", {}).get(block.key) if block.kind == "call" else None

    def item_id(self, block: Block) -> str:
        if self.custom(block):
            pattern = "ctc_{}"
        elif self.search(block):
            pattern = "tsc_{}"
        elif builtin := self.builtin(block):
            pattern = {"shell": "sh_{}", "apply_patch": "apc_{}"}[builtin]
        else:
            pattern = {"think": "rs_fake{}", "text": "msg_fake{}", "call": "fc_{}"}[block.kind]
        return pattern.format(block.key or block.position)

    def part(self, block: Block, text: str) -> dict:
        if block.kind == "think":
            return {"type": "summary_text", "text": text}
        return {"type": "output_text", "annotations": [], "logprobs": [], "text": text}

    def item(self, block: Block, done: bool) -> dict:
        status = "completed" if done else "in_progress"
        head = {"id": self.item_id(block)}
        parts = [self.part(block, block.text)] if done else []
        if block.kind == "think":
            return {**head, "type": "reasoning", "summary": parts}
        if block.kind == "text":
            return {**head, "type": "message", "status": status, "content": parts, "role": "assistant"}
        if self.search(block):  # its arguments an object, whole once done
            arguments = (block.whole or {}) if done else {}
            return {**head, "type": "tool_search_call", "status": status, "execution": "client",
                    "call_id": block.id, "arguments": arguments}  # fmt: skip
        builtin = self.builtin(block)
        if builtin == "shell":  # its command as far as it streamed
            action = {"commands": [block.text] if block.text else [], "timeout_ms": None,
                      "max_output_length": None}  # fmt: skip
            return {**head, "type": "shell_call", "status": status, "call_id": block.id, "action": action}
        if builtin == "apply_patch":  # whole from the start
            return {**head, "type": "apply_patch_call", "status": status, "call_id": block.id,
                    "operation": block.whole or {}}  # fmt: skip
        if self.custom(block):
            kind, field = "custom_tool_call", "input"
        else:
            kind, field = "function_call", "arguments"
        item = {
            **head,
            "type": kind,
            "status": status,
            field: block.text,
            "call_id": block.id,
            "name": block.name,
        }
        if namespace := self.script.get("namespace", {}).get(block.key):
            item["namespace"] = namespace
        return item

    def event(self, kind: str, block: Block, **fields: Any) -> None:
        scope = {"item_id": self.item_id(block), "output_index": block.position}
        if block.kind != "call":
            scope["summary_index" if block.kind == "think" else "content_index"] = 0
        self.emit({"type": kind, **scope, **fields})

    def begin(self) -> None:
        for kind in ("response.created", "response.in_progress"):
            self.emit({"type": kind, "response": self.response("in_progress")})

    def open(self, block: Block) -> None:
        item = self.item(block, done=False)
        self.emit({"type": "response.output_item.added", "output_index": block.position, "item": item})
        if added := self.EVENTS[block.kind][0]:
            self.event(added, block, part=self.part(block, ""))
        if self.builtin(block) == "shell":
            self.shell("added", block, command="")

    def shell(self, what: str, block: Block, **fields: Any) -> None:
        event = {"type": f"response.shell_call_command.{what}", "output_index": block.position}
        self.emit({**event, "command_index": 0, **fields})

    def add(self, block: Block, fragment: str) -> None:
        builtin = self.builtin(block)
        if builtin == "shell":
            self.shell("delta", block, delta=fragment)
            return
        if self.search(block) or builtin:
            return  # a tool search or a patch streams no delta: its item says it all once done
        kind = self.CUSTOM[0] if self.custom(block) else self.EVENTS[block.kind][1]
        self.event(kind, block, delta=fragment, **self.logprobs(block))

    def logprobs(self, block: Block) -> dict:
        return {"logprobs": []} if block.kind == "text" else {}

    def close(self, block: Block) -> None:
        _, _, done, part_done = self.EVENTS[block.kind]
        if self.custom(block):
            self.event(self.CUSTOM[1], block, input=block.text)
        elif self.builtin(block) == "shell":
            self.shell("done", block, command=block.text)
        elif self.search(block) or self.builtin(block):
            pass
        elif block.kind == "call":
            self.event(done, block, name=block.name, arguments=block.text)
        else:
            self.event(done, block, text=block.text, **self.logprobs(block))
            self.event(part_done, block, part=self.part(block, block.text))
        item = self.item(block, done=True)
        self.emit({"type": "response.output_item.done", "output_index": block.position, "item": item})

    def finish(self) -> None:
        self.emit({"type": "response.completed", "response": self.final()})

    def error(self) -> None:
        failure = {"code": "server_error", "message": OVERLOADED}
        self.emit({"type": "error", **failure, "param": None})
        output = [self.item(block, done=False) for block in self.blocks]
        self.emit(
            {"type": "response.failed", "response": self.response("failed", error=failure, output=output)}
        )

    def final(self) -> dict:
        output = [self.item(block, done=True) for block in self.blocks]
        return self.response("completed", output=output, usage=self.USAGE)


FORMAT = WireFormat(
    "openai-responses", Responses, named_events, SSE, "/v1/responses", OPENAI_ERROR, {"input": "hi"}
)
