"""What a renderer is: a scenario's steps run through one format's hooks into (event name, payload) pairs,
and the `WireFormat` record in which each format module writes down everything else about its wire."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import orjson

from ..scenarios import script

# A fixed timestamp and fixed ids keep every body byte-identical, so X-Body-SHA256 is stable across runs.
CREATED = 1767225600
CREATED_AT = "2026-01-01T00:00:00Z"  # CREATED, as Ollama writes it
USAGE = {"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70}
SIGNATURE = "ZmFrZS10aG91Z2h0LXNpZ25hdHVyZQ=="  # an opaque thinking / thought signature
OVERLOADED = "upstream overloaded"

Payloads = Sequence[tuple[str | None, dict]]
Frame = Callable[[Payloads], list[bytes]]


class WireFormat(NamedTuple):
    """Everything about one wire format; renderers/__init__.py lists them, and nothing else names a format.

    render turns steps into payloads, frame turns payloads into the body's writes (one event each);
    array_frame is the framing when the client did not ask for SSE (Gemini without ?alt=sse, as JSON).
    route is a path suffix (the scenario is then the body's "model") or a template with {model} and {verb},
    verbs its {verb} streaming and not; error is the not-streamed `error-midstream` (status, body), whose
    body is also the streamed error payload; request a minimal request body of the format.
    """

    name: str
    render: type[Render]
    frame: Frame
    content_type: str
    route: str
    error: tuple[int, dict]
    request: dict[str, Any]
    call_id: str = "call_{key}"
    verbs: tuple[str, str] = ("", "")
    array_frame: Frame | None = None


class Block:
    """One output block: a reasoning run, a text run or a tool call.

    position counts all blocks (Anthropic index, Responses output_index, Bedrock contentBlockIndex), number
    the blocks of its kind (chat tool-call index, Cohere index, Ollama function.index).
    """

    def __init__(self, kind: str, position: int, number: int, full: str) -> None:
        self.kind = kind  # think | text | call
        self.position, self.number = position, number
        self.full = full  # its complete text over the whole script
        self.text = ""  # as far as it has been rendered
        self.key = self.name = self.id = ""  # a call's script key, name and id in the format

    @functools.cached_property
    def whole(self) -> dict | None:
        """The complete arguments as an object, or None when they are not a JSON object."""
        try:
            value = orjson.loads(self.full)
        except orjson.JSONDecodeError:
            return None
        return value if isinstance(value, dict) else None


def _block_key(step: tuple) -> tuple:
    return ("call", step[1]) if step[0] in ("call", "args") else (step[0],)


class Render:
    """Runs a script through a format's hooks; `out` collects (event, payload) pairs for the framer."""

    whole_calls = False  # the format sends each call whole, once (Gemini, Ollama)
    error_event: str | None = None

    def __init__(self, wire: WireFormat, name: str, scripted: dict[str, Any] | None = None) -> None:
        # scripted: a script made for one request (the `agent` scenario), in place of the named one
        self.wire, self.name = wire, name
        self.script = scripted if scripted is not None else script(name)
        self.out: list[tuple[str | None, dict]] = []
        self.blocks: list[Block] = []
        self.marks: list[int] = []  # len(out) after each step
        self._run()

    def _run(self) -> None:
        steps = self.script["steps"]
        last = {_block_key(step): i for i, step in enumerate(steps)}
        full: dict[tuple, str] = {}
        for step in steps:
            full[_block_key(step)] = full.get(_block_key(step), "") + step[-1]
        live: dict[tuple, Block] = {}
        self.begin()
        for i, step in enumerate(steps):
            for key in [key for key in live if last[key] < i]:
                self.close(live.pop(key))
            key = _block_key(step)
            if key in live:
                self.add(live[key], step[-1])
            else:
                live[key] = self._new(step, full[key])
                self.start(live[key], step[-1])
            live[key].text += step[-1]
            self.marks.append(len(self.out))
        if self.script.get("error"):
            self.error()  # blocks still open stay open: the stream breaks off
            return
        for block in live.values():
            self.close(block)
        self.finish()

    def _new(self, step: tuple, full: str) -> Block:
        kind = step[0]  # a block opens with a call, think or text step
        number = sum(block.kind == kind for block in self.blocks)
        block = Block(kind, len(self.blocks), number, full)
        if kind == "call":
            block.key, block.name = step[2], step[3]
            block.id = self.wire.call_id.format(key=block.key, name=block.name)
        self.blocks.append(block)
        return block

    def emit(self, payload: dict, event: str | None = None) -> None:
        self.out.append((event, payload))

    def sent(self, block: Block) -> bool:
        return block.kind != "call" or not self.whole_calls or block.whole is not None

    @property
    def calls(self) -> list[Block]:
        return [block for block in self.blocks if block.kind == "call" and self.sent(block)]

    def joined(self, kind: str) -> str:
        return "".join(block.text for block in self.blocks if block.kind == kind)

    def tools_or(self, with_calls: str, without: str) -> str:
        return with_calls if self.calls else without

    # The hooks: every format overrides the ones its wire has events for.
    def begin(self) -> None:
        pass

    def start(self, block: Block, fragment: str) -> None:
        self.open(block)
        if fragment or block.kind != "call":
            self.add(block, fragment)

    def open(self, block: Block) -> None:
        pass

    def add(self, block: Block, fragment: str) -> None:
        pass

    def close(self, block: Block) -> None:
        pass

    def finish(self) -> None:
        pass

    def error(self) -> None:
        self.emit(self.wire.error[1], self.error_event)

    def final(self) -> dict:
        """The non-streamed response of the same script."""
        raise NotImplementedError
