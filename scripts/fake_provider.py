"""A local LLM provider in every wire format: scripted tool-call streams over real HTTP/1.1.

Formats, by path (POST): OpenAI Chat Completions `…/chat/completions`, OpenAI Responses `…/responses`,
Anthropic Messages `…/messages`, Cohere v2 `/v2/chat`, Ollama `/api/chat` (scenario = the body's "model");
Gemini `…/models/{scenario}:streamGenerateContent[?alt=sse]` and `:generateContent`; Bedrock
`/model/{scenario}/converse-stream`, `/converse`, `/invoke-with-response-stream`, `/invoke`.
Request headers: X-Fake-Delay (seconds between events), X-Fake-Encoding (gzip, deflate, br or zstd),
X-Fake-Framing: length (a Content-Length body instead of chunks), X-Fake-Chunking: hostile (each event also cut at hostile points, `accumulator.boundaries`, one write per
piece), X-Fake-Fault (see FAULTS) with X-Fake-Size and X-Fake-Drip-Bytes.

.venv/bin/python scripts/fake_provider.py [--host 127.0.0.1] [--port 0] [--delay 0.02]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import functools
import hashlib
import itertools
import math
import re
import signal
import string
import struct
import sys
import zlib
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, NamedTuple
from urllib.parse import parse_qs, quote, unquote

import orjson

from accumulator import boundaries
from accumulator.decoding import ContentEncoder

# A fixed timestamp and fixed ids keep every body byte-identical, so X-Body-SHA256 is stable across runs.
CREATED = 1767225600
CREATED_AT = "2026-01-01T00:00:00Z"  # CREATED, as Ollama writes it
USAGE = {"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70}
SIGNATURE = "ZmFrZS10aG91Z2h0LXNpZ25hdHVyZQ=="  # an opaque thinking / thought signature
GATE_TIMEOUT = 30.0
MAX_HEAD_BYTES = 64 * 1024
MAX_BODY_BYTES = 8 * 1024 * 1024

FORMATS: tuple[str, ...] = (
    "openai-chat",
    "openai-responses",
    "anthropic-messages",
    "gemini",
    "bedrock-converse",
    "bedrock-invoke",
    "cohere-v2",
    "ollama-chat",
)
ENCODINGS: tuple[str, ...] = ("gzip", "deflate", "br", "zstd")


# -- the scenarios, as format-neutral steps ------------------------------------------------------------------
#
# Every format renders each step as its own events:
#   ("call", slot, key, name, arguments)  a tool call opens (its ids come from key: call_<key>, toolu_<key>, …)
#   ("args", slot, fragment)               more argument text for the call opened as slot
#   ("think", fragment)                    reasoning (formats without it send nothing)
#   ("text", fragment)                     answer text
# Formats that only send whole calls (Gemini, Ollama) send a call once, complete, where it opens, and never
# send one whose complete arguments are not a JSON object (the error arrives first).


def _call(slot: int, key: str, name: str, arguments: str = "") -> tuple:
    return ("call", slot, key, name, arguments)


def _args(slot: int, fragment: str) -> tuple:
    return ("args", slot, fragment)


def _each(kind: str, *fragments: str) -> tuple:
    return tuple((kind, fragment) for fragment in fragments)


_INTERLEAVED = (
    _call(0, "abc", "search_circulars"),
    _call(1, "xyz", "get_user_profile"),
    _args(0, '{"query": "RBI'),
    _args(1, '{"user_id": "u'),
    _args(0, ' circulars"}'),
    _args(1, '123"}'),
)

_SEQUENTIAL = (
    *_each("think", "Weather first, ", "then the local time."),
    _call(0, "w1", "get_weather"),
    _args(0, '{"ci'),
    _args(0, 'ty": "Pa'),
    _args(0, 'ris"}'),
    _call(1, "t1", "get_time"),
    _args(1, '{"tz": '),
    _args(1, '"Europe/'),
    _args(1, 'Paris"}'),
)

# One script per scenario; the request's "model" (or the path's model) picks it. Keys:
#   steps       the steps above                  only       the one format that serves it (default: all)
#   chat_quirk  how Chat Completions bends it    error      the format's own error comes after the steps
#   cut_after   steps sent before the TCP connection is dropped (no terminating zero-length chunk)
#   gate_after  events sent before waiting for GET /release
_SCRIPTS: dict[str, dict[str, Any]] = {
    "interleaved": {"steps": _INTERLEAVED},
    "sequential": {"steps": _SEQUENTIAL},
    # Groq / Ollama: every call is whole in one delta and all of them claim index 0.
    "index-collision": {
        "steps": (
            _call(0, "c1", "weather", '{"location": "San Francisco"}'),
            _call(1, "c2", "weather", '{"location": "Tokyo"}'),
            _call(2, "c3", "weather", '{"location": "Paris"}'),
        ),
        "chat_quirk": "same-index",
        "only": "openai-chat",
    },
    # Fireworks / LiteLLM proxy: every delta repeats id, type and name, which must not start a new call.
    "name-repeated": {
        "steps": (
            _call(0, "r1", "get_current_weather", '{"city": '),
            *(_args(0, fragment) for fragment in ('"Oslo", ', '"unit": ', '"c"}')),
        ),
        "chat_quirk": "repeat-identity",
        "only": "openai-chat",
    },
    "truncated": {"steps": _INTERLEAVED, "cut_after": 3},  # in the middle of the first call's arguments
    # Some reasoning first (Chat Completions has none), so the error comes mid-stream in every format.
    "error-midstream": {
        "steps": (("think", "Looking it up."), _call(0, "e1", "lookup", '{"q": ')),
        "error": True,
    },
    "text": {"steps": _each("text", "Hello", " from the", " fake provider", ".")},
    # Multi-byte characters in text, names' arguments and reasoning: cuts inside a character are possible.
    "unicode": {
        "steps": (
            *_each("think", "Zürich zuerst, ", "dann 東京."),
            *_each("text", "Grüße ", "aus Zürich — ", "東京 ✓"),
            _call(0, "u1", "get_weather"),
            _args(0, '{"city": "Zü'),
            _args(0, 'rich", "note": "東'),
            _args(0, '京 ✓"}'),
            _call(1, "u2", "translate"),
            _args(1, '{"text": "Grüße", '),
            _args(1, '"to": "日本語"}'),
        )
    },
    "gated": {"steps": _SEQUENTIAL, "gate_after": 1},
}

SCENARIOS: tuple[str, ...] = tuple(_SCRIPTS)
FORMAT_SCENARIOS: dict[str, tuple[str, ...]] = {
    fmt: tuple(name for name, script in _SCRIPTS.items() if script.get("only", fmt) == fmt) for fmt in FORMATS
}

# X-Fake-Fault: what goes wrong on the way (the scenario still picks the events that come first).
#   drop-mid-event     half the events and half of the next one, then the connection drops
#   drip               the first X-Fake-Drip-Bytes bytes (default: all) one byte per write, X-Fake-Delay apart
#   huge-event         half the events, then one event of X-Fake-Size bytes (default 100 MB) with no line end
#   bomb               with X-Fake-Encoding: half the events, then a line of X-Fake-Size spaces (default 256 MiB
#                      decoded), compressed to a small body
#   endless-calls      (Chat Completions) whole new tool calls, one per event, until the client goes away
#   endless-arguments  (Chat Completions) one call whose argument fragments never stop
#   html-502 / json-429  an error page (502, text/html) / a rate-limit error (429, JSON) instead of a stream
FAULTS: tuple[str, ...] = (
    "drop-mid-event",
    "drip",
    "huge-event",
    "bomb",
    "endless-calls",
    "endless-arguments",
    "html-502",
    "json-429",
)
HTML_502 = (
    b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1>"
    b"</center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
)
RATE_LIMITED = {
    "error": {
        "message": "Rate limit reached for requests. Please try again in 20s.",
        "type": "rate_limit_error",
        "code": "rate_limit_exceeded",
    }
}
_OVERLOADED = "upstream overloaded"
_THROTTLED = {"message": "Too many requests, please wait before trying again."}
_EXCEPTION = "throttlingException"  # the AWS exception frame that replaces an event


# -- rendering: steps to one format's payloads ---------------------------------------------------------------


class _Block:
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


class _Render:
    """Runs a script through a format's hooks; `out` collects (event, payload) pairs for the framer."""

    whole_calls = False  # the format sends each call whole, once (Gemini, Ollama)
    error_event: str | None = None

    def __init__(self, fmt: str, name: str) -> None:
        self.fmt, self.name, self.script = fmt, name, _SCRIPTS[name]
        self.out: list[tuple[str | None, dict]] = []
        self.blocks: list[_Block] = []
        self.marks: list[int] = []  # len(out) after each step
        self._run()

    def _run(self) -> None:
        steps = self.script["steps"]
        last = {_block_key(step): i for i, step in enumerate(steps)}
        full: dict[tuple, str] = {}
        for step in steps:
            full[_block_key(step)] = full.get(_block_key(step), "") + step[-1]
        live: dict[tuple, _Block] = {}
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

    def _new(self, step: tuple, full: str) -> _Block:
        kind = step[0]  # a block opens with a call, think or text step
        number = sum(block.kind == kind for block in self.blocks)
        block = _Block(kind, len(self.blocks), number, full)
        if kind == "call":
            block.key, block.name = step[2], step[3]
            block.id = _SPECS[self.fmt].call_id.format(key=block.key, name=block.name)
        self.blocks.append(block)
        return block

    def emit(self, payload: dict, event: str | None = None) -> None:
        self.out.append((event, payload))

    def sent(self, block: _Block) -> bool:
        return block.kind != "call" or not self.whole_calls or block.whole is not None

    @property
    def calls(self) -> list[_Block]:
        return [block for block in self.blocks if block.kind == "call" and self.sent(block)]

    def joined(self, kind: str) -> str:
        return "".join(block.text for block in self.blocks if block.kind == kind)

    def tools_or(self, with_calls: str, without: str) -> str:
        return with_calls if self.calls else without

    # The hooks: every format overrides the ones its wire has events for.
    def begin(self) -> None:
        pass

    def start(self, block: _Block, fragment: str) -> None:
        self.open(block)
        if fragment or block.kind != "call":
            self.add(block, fragment)

    def open(self, block: _Block) -> None:
        pass

    def add(self, block: _Block, fragment: str) -> None:
        pass

    def close(self, block: _Block) -> None:
        pass

    def finish(self) -> None:
        pass

    def error(self) -> None:
        self.emit(_SPECS[self.fmt].error[1], self.error_event)

    def final(self) -> dict:
        """The non-streamed response of the same script."""
        raise NotImplementedError


class _Chat(_Render):
    def chunk(self, delta: dict, finish_reason: str | None = None) -> None:
        self.emit({**self.head(), "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]})

    def head(self, kind: str = "chat.completion.chunk") -> dict:
        return {"id": f"chatcmpl-fake-{self.name}", "object": kind, "created": CREATED, "model": self.name}

    def tool_delta(self, block: _Block, fragment: str, first: bool) -> None:
        quirk = self.script.get("chat_quirk")
        index = 0 if quirk == "same-index" else block.number
        if first or quirk == "repeat-identity":
            function = {"name": block.name, "arguments": fragment}
            self.chunk(
                {"tool_calls": [{"index": index, "id": block.id, "type": "function", "function": function}]}
            )
        else:
            self.chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})

    def begin(self) -> None:
        self.chunk({"role": "assistant", "content": None})

    def start(self, block: _Block, fragment: str) -> None:
        if block.kind == "call":
            self.tool_delta(block, fragment, first=True)
        else:
            self.add(block, fragment)

    def add(self, block: _Block, fragment: str) -> None:
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
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.full}}
                for c in self.calls
            ]
        choice = {"index": 0, "message": message, "finish_reason": self.tools_or("tool_calls", "stop")}
        return {**self.head("chat.completion"), "choices": [choice], "usage": USAGE}


class _Responses(_Render):
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

    def item_id(self, block: _Block) -> str:
        return {"think": "rs_fake{}", "text": "msg_fake{}", "call": "fc_{}"}[block.kind].format(
            block.key or block.position
        )

    def part(self, block: _Block, text: str) -> dict:
        if block.kind == "think":
            return {"type": "summary_text", "text": text}
        return {"type": "output_text", "annotations": [], "logprobs": [], "text": text}

    def item(self, block: _Block, done: bool) -> dict:
        status = "completed" if done else "in_progress"
        head = {"id": self.item_id(block)}
        parts = [self.part(block, block.text)] if done else []
        if block.kind == "think":
            return {**head, "type": "reasoning", "summary": parts}
        if block.kind == "text":
            return {**head, "type": "message", "status": status, "content": parts, "role": "assistant"}
        return {
            **head,
            "type": "function_call",
            "status": status,
            "arguments": block.text,
            "call_id": block.id,
            "name": block.name,
        }

    def event(self, kind: str, block: _Block, **fields: Any) -> None:
        scope = {"item_id": self.item_id(block), "output_index": block.position}
        if block.kind != "call":
            scope["summary_index" if block.kind == "think" else "content_index"] = 0
        self.emit({"type": kind, **scope, **fields})

    def begin(self) -> None:
        for kind in ("response.created", "response.in_progress"):
            self.emit({"type": kind, "response": self.response("in_progress")})

    def open(self, block: _Block) -> None:
        item = self.item(block, done=False)
        self.emit({"type": "response.output_item.added", "output_index": block.position, "item": item})
        if added := self.EVENTS[block.kind][0]:
            self.event(added, block, part=self.part(block, ""))

    def add(self, block: _Block, fragment: str) -> None:
        self.event(self.EVENTS[block.kind][1], block, delta=fragment, **self.logprobs(block))

    def logprobs(self, block: _Block) -> dict:
        return {"logprobs": []} if block.kind == "text" else {}

    def close(self, block: _Block) -> None:
        _, _, done, part_done = self.EVENTS[block.kind]
        if block.kind == "call":
            self.event(done, block, name=block.name, arguments=block.text)
        else:
            self.event(done, block, text=block.text, **self.logprobs(block))
            self.event(part_done, block, part=self.part(block, block.text))
        item = self.item(block, done=True)
        self.emit({"type": "response.output_item.done", "output_index": block.position, "item": item})

    def finish(self) -> None:
        self.emit({"type": "response.completed", "response": self.final()})

    def error(self) -> None:
        failure = {"code": "server_error", "message": _OVERLOADED}
        self.emit({"type": "error", **failure, "param": None})
        output = [self.item(block, done=False) for block in self.blocks]
        self.emit(
            {"type": "response.failed", "response": self.response("failed", error=failure, output=output)}
        )

    def final(self) -> dict:
        output = [self.item(block, done=True) for block in self.blocks]
        return self.response("completed", output=output, usage=self.USAGE)


class _Anthropic(_Render):
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

    def block(self, block: _Block, text: str, arguments: dict) -> dict:
        if block.kind == "call":
            return {"type": "tool_use", "id": block.id, "name": block.name, "input": arguments}
        if block.kind == "think":
            return {"type": "thinking", "thinking": text, "signature": SIGNATURE if text else ""}
        return {"type": "text", "text": text}

    def delta(self, block: _Block, delta: dict) -> None:
        self.emit({"type": "content_block_delta", "index": block.position, "delta": delta})

    def begin(self) -> None:
        self.emit({"type": "message_start", "message": self.message([], None, 1)})
        if not self.bedrock:
            self.emit({"type": "ping"})

    def open(self, block: _Block) -> None:
        content = self.block(block, "", {})
        self.emit({"type": "content_block_start", "index": block.position, "content_block": content})
        if block.kind == "call":
            self.add(block, "")

    def add(self, block: _Block, fragment: str) -> None:
        kind, field = self.DELTAS.get(block.kind, ("input_json_delta", "partial_json"))
        self.delta(block, {"type": kind, field: fragment})

    def close(self, block: _Block) -> None:
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


class _Invoke(_Anthropic):
    bedrock = True
    error_event = _EXCEPTION


class _Converse(_Render):
    error_event = _EXCEPTION
    USAGE: ClassVar[dict] = {"inputTokens": 50, "outputTokens": 20, "totalTokens": 70}
    METRICS: ClassVar[dict] = {"latencyMs": 1200}

    def event(self, name: str, **fields: Any) -> None:
        self.emit(fields, name)

    def delta(self, block: _Block, **delta: Any) -> None:
        self.event("contentBlockDelta", contentBlockIndex=block.position, delta=delta)

    def begin(self) -> None:
        self.event("messageStart", role="assistant")

    def open(self, block: _Block) -> None:
        if block.kind == "call":
            start = {"toolUse": {"toolUseId": block.id, "name": block.name}}
            self.event("contentBlockStart", contentBlockIndex=block.position, start=start)

    def add(self, block: _Block, fragment: str) -> None:
        if block.kind == "think":
            self.delta(block, reasoningContent={"text": fragment})
        elif block.kind == "text":
            self.delta(block, text=fragment)
        else:
            self.delta(block, toolUse={"input": fragment})

    def close(self, block: _Block) -> None:
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


class _Gemini(_Render):
    whole_calls = True

    def response(self, parts: list, usage: dict, **candidate: Any) -> dict:
        return {
            "candidates": [{"content": {"parts": parts, "role": "model"}, "index": 0, **candidate}],
            "usageMetadata": usage,
            "modelVersion": self.name,
            "responseId": f"fake-{self.name}",
        }

    def part(self, block: _Block, text: str) -> dict:
        if block.kind == "think":
            return {"text": text, "thought": True}
        if block.kind == "text":
            return {"text": text}
        part: dict[str, Any] = {"functionCall": {"id": block.id, "name": block.name, "args": block.whole}}
        if block.number == 0:  # only the first call of a step carries the signature
            part["thoughtSignature"] = SIGNATURE
        return part

    def open(self, block: _Block) -> None:
        if block.kind == "call" and self.sent(block):
            self.emit(self.response([self.part(block, "")], {"promptTokenCount": 50, "totalTokenCount": 50}))

    def add(self, block: _Block, fragment: str) -> None:
        if block.kind != "call":
            self.emit(
                self.response([self.part(block, fragment)], {"promptTokenCount": 50, "totalTokenCount": 50})
            )

    def usage(self) -> dict:
        return {"promptTokenCount": 50, "candidatesTokenCount": 20, "totalTokenCount": 70}

    def finish(self) -> None:
        self.emit(self.response([{"text": ""}], self.usage(), finishReason="STOP"))

    def final(self) -> dict:
        parts = [self.part(block, block.text) for block in self.blocks if self.sent(block)]
        return self.response(parts, self.usage(), finishReason="STOP")


class _Ollama(_Render):
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

    def tool_calls(self, calls: list[_Block]) -> dict:
        return {
            "tool_calls": [
                {"id": c.id, "function": {"index": c.number, "name": c.name, "arguments": c.whole}}
                for c in calls
            ]
        }

    def open(self, block: _Block) -> None:
        if block.kind == "call" and self.sent(block):
            self.emit(self.line(self.tool_calls([block])))

    def add(self, block: _Block, fragment: str) -> None:
        if block.kind != "call":
            self.emit(self.line({self.FIELDS[block.kind]: fragment}))

    def finish(self) -> None:
        self.emit(self.line({}, True, **self.DONE))

    def final(self) -> dict:
        message = {field: self.joined(kind) for kind, field in self.FIELDS.items() if self.joined(kind)}
        return self.line(
            {**message, **(self.tool_calls(self.calls) if self.calls else {})}, True, **self.DONE
        )


class _Cohere(_Render):
    USAGE: ClassVar[dict] = {
        "billed_units": {"input_tokens": 50, "output_tokens": 20},
        "tokens": {"input_tokens": 50, "output_tokens": 20},
    }

    def event(self, kind: str, block: _Block | None = None, **message: Any) -> None:
        scope = {} if block is None else {"index": block.number}
        self.emit({"type": kind, **scope, **({"delta": {"message": message}} if message else {})})

    def tool_call(self, block: _Block, arguments: str) -> dict:
        return {"id": block.id, "type": "function", "function": {"name": block.name, "arguments": arguments}}

    def begin(self) -> None:
        message = {"role": "assistant", "content": [], "tool_plan": "", "tool_calls": [], "citations": []}
        self.emit({"type": "message-start", "id": f"fake-{self.name}", "delta": {"message": message}})

    def open(self, block: _Block) -> None:
        if block.kind == "text":
            self.event("content-start", block, content={"type": "text", "text": ""})
        elif block.kind == "call":
            self.event("tool-call-start", block, tool_calls=self.tool_call(block, ""))

    def add(self, block: _Block, fragment: str) -> None:
        if block.kind == "think":
            self.event("tool-plan-delta", tool_plan=fragment)
        elif block.kind == "text":
            self.event("content-delta", block, content={"text": fragment})
        else:
            self.event("tool-call-delta", block, tool_calls={"function": {"arguments": fragment}})

    def close(self, block: _Block) -> None:
        if block.kind != "think":
            self.event("content-end" if block.kind == "text" else "tool-call-end", block)

    def end(self, finish_reason: str, **fields: Any) -> None:
        delta = {"finish_reason": finish_reason, **fields, "usage": self.USAGE}
        self.emit({"type": "message-end", "delta": delta})

    def finish(self) -> None:
        self.end(self.tools_or("TOOL_CALL", "COMPLETE"))

    def error(self) -> None:
        self.end("ERROR", error=_OVERLOADED)

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


# -- framing: payloads to the bytes of one write each --------------------------------------------------------

_Payloads = Sequence[tuple[str | None, dict]]
_PAD = string.ascii_letters


def _data_lines(payloads: _Payloads, end: bytes = b"\n\n") -> list[bytes]:
    return [b"data: " + orjson.dumps(payload) + end for _, payload in payloads]


def _frame_chat(payloads: _Payloads) -> list[bytes]:
    return [*_data_lines(payloads), b"data: [DONE]\n\n"]


def _frame_named(payloads: _Payloads) -> list[bytes]:
    """SSE with an `event:` line named after the payload's type (Responses, Anthropic, Cohere)."""
    return [
        b"event: " + p["type"].encode() + b"\n" + line
        for (_, p), line in zip(payloads, _data_lines(payloads))
    ]


def _frame_gemini_sse(payloads: _Payloads) -> list[bytes]:
    return _data_lines(payloads, b"\r\n\r\n")


def _frame_gemini_json(payloads: _Payloads) -> list[bytes]:
    """One JSON array, written an element at a time: `[` first, `,` between, `]` after the last."""
    last = len(payloads) - 1
    return [
        (b"[" if i == 0 else b"\r\n,\r\n")
        + orjson.dumps(payload, option=orjson.OPT_INDENT_2)
        + (b"\r\n]" if i == last else b"")
        for i, (_, payload) in enumerate(payloads)
    ]


def _frame_ndjson(payloads: _Payloads) -> list[bytes]:
    return [orjson.dumps(payload) + b"\n" for _, payload in payloads]


def aws_message(headers: dict[str, str], payload: bytes) -> bytes:
    """One AWS event-stream message: prelude (lengths + CRC), string headers, payload, message CRC."""
    head = b"".join(
        bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(value.encode())) + value.encode()
        for name, value in headers.items()
    )
    prelude = struct.pack(">II", 12 + len(head) + len(payload) + 4, len(head))
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + head + payload
    return message + struct.pack(">I", zlib.crc32(message))


def _aws_frames(payloads: _Payloads, wrap: Callable[[dict, str], dict]) -> list[bytes]:
    frames = []
    for i, (event, payload) in enumerate(payloads):
        if event == _EXCEPTION:
            kind = {
                ":exception-type": event,
                ":content-type": "application/json",
                ":message-type": "exception",
            }
            frames.append(aws_message(kind, orjson.dumps(payload)))
        else:
            kind = {
                ":event-type": event or "chunk",
                ":content-type": "application/json",
                ":message-type": "event",
            }
            frames.append(aws_message(kind, orjson.dumps(wrap(payload, _PAD[: 1 + i * 7 % 33]))))
    return frames


def _frame_converse(payloads: _Payloads) -> list[bytes]:
    return _aws_frames(payloads, lambda payload, pad: {**payload, "p": pad})


def _frame_invoke(payloads: _Payloads) -> list[bytes]:
    return _aws_frames(
        payloads, lambda payload, pad: {"bytes": base64.b64encode(orjson.dumps(payload)).decode(), "p": pad}
    )


class _Spec(NamedTuple):
    render: type[_Render]
    frame: Callable[[_Payloads], list[bytes]]
    content_type: str
    route: str  # a path suffix (the scenario is the body's "model"), or a template with {model} and {verb}
    error: tuple[int, dict]  # the not-streamed `error-midstream` (status, body); streamed, its payload
    call_id: str = "call_{key}"
    verbs: tuple[str, str] = ("", "")  # the route's {verb}: streaming, not streaming


_SSE = "text/event-stream; charset=utf-8"
_AWS = "application/vnd.amazon.eventstream"
_OPENAI_ERROR = (502, {"error": {"message": _OVERLOADED, "type": "server_error", "code": 502}})
_SPECS: dict[str, _Spec] = {
    "openai-chat": _Spec(_Chat, _frame_chat, _SSE, "/v1/chat/completions", _OPENAI_ERROR),
    "openai-responses": _Spec(_Responses, _frame_named, _SSE, "/v1/responses", _OPENAI_ERROR),
    "anthropic-messages": _Spec(
        _Anthropic,
        _frame_named,
        _SSE,
        "/v1/messages",
        (529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        "toolu_{key}",
    ),
    "gemini": _Spec(
        _Gemini,
        _frame_gemini_sse,
        _SSE,
        "/v1beta/models/{model}:{verb}",
        (503, {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}),
        verbs=("streamGenerateContent", "generateContent"),
    ),
    "bedrock-converse": _Spec(
        _Converse,
        _frame_converse,
        _AWS,
        "/model/{model}/{verb}",
        (429, _THROTTLED),
        "tooluse_{key}",
        ("converse-stream", "converse"),
    ),
    "bedrock-invoke": _Spec(
        _Invoke,
        _frame_invoke,
        _AWS,
        "/model/{model}/{verb}",
        (429, _THROTTLED),
        "toolu_{key}",
        ("invoke-with-response-stream", "invoke"),
    ),
    "cohere-v2": _Spec(
        _Cohere, _frame_named, _SSE, "/v2/chat", (500, {"message": _OVERLOADED}), "{name}_{key}"
    ),
    "ollama-chat": _Spec(
        _Ollama, _frame_ndjson, "application/x-ndjson", "/api/chat", (500, {"error": _OVERLOADED})
    ),
}


# -- the public helpers --------------------------------------------------------------------------------------


def _check(fmt: str, name: str) -> None:
    if fmt not in _SPECS:
        raise KeyError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    if name not in _SCRIPTS:
        raise KeyError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}")
    if name not in FORMAT_SCENARIOS[fmt]:
        raise KeyError(f"scenario {name!r} is only served as {_SCRIPTS[name]['only']}, not {fmt}")


@functools.cache
def _rendered(fmt: str, name: str) -> _Render:
    _check(fmt, name)
    return _SPECS[fmt].render(fmt, name)


@functools.cache
def events(format: str, scenario: str, *, gemini_sse: bool = True, cut: bool = False) -> tuple[bytes, ...]:
    """The body's writes, in order: one event (SSE event, JSON line, array element, AWS frame) each.

    With cut, only those sent before the connection drops (`truncated`); otherwise the full body's.
    """
    rendered = _rendered(format, scenario)
    frame = _frame_gemini_json if format == "gemini" and not gemini_sse else _SPECS[format].frame
    framed = tuple(frame(rendered.out))
    cut_after = _SCRIPTS[scenario].get("cut_after")
    return framed[: rendered.marks[cut_after - 1]] if cut and cut_after else framed


def body(format: str, scenario: str, *, gemini_sse: bool = True) -> bytes:
    """The scenario's full body in that format, uncompressed, as sent when nothing cuts it short."""
    return b"".join(events(format, scenario, gemini_sse=gemini_sse))


def endless(kind: str):
    """The events of an `endless-calls` or `endless-arguments` Chat Completions stream, forever."""
    head = {
        "id": "chatcmpl-fake-endless",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": kind,
    }

    def chunk(delta: dict) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": None}
        return b"data: " + orjson.dumps({**head, "choices": [choice]}) + b"\n\n"

    yield chunk({"role": "assistant", "content": None})
    if kind == "endless-calls":
        for n in itertools.count():
            call = {"index": n, "id": f"call_{n}", "type": "function"}
            call["function"] = {"name": f"tool_{n % 7}", "arguments": f'{{"n": {n}}}'}
            yield chunk({"tool_calls": [call]})
    else:
        function = {"name": "write_file", "arguments": '{"content": "'}
        yield chunk({"tool_calls": [{"index": 0, "id": "call_0", "type": "function", "function": function}]})
        fragment = string.ascii_letters * 20  # 1,040 characters
        while True:
            yield chunk({"tool_calls": [{"index": 0, "function": {"arguments": fragment}}]})


def drop_mid_event_pieces(pieces: tuple[bytes, ...]) -> tuple[bytes, ...]:
    """`drop-mid-event`: what is written before the connection drops inside an event."""
    half = len(pieces) // 2
    return (*pieces[:half], pieces[half][: len(pieces[half]) // 2])


HUGE_EVENT_HEAD = b'data: {"choices": [{"index": 0, "delta": {"content": "'
_MIB = 1024 * 1024


def huge_event_pieces(plain: tuple[bytes, ...], size: int):
    """`huge-event`: half the events, then one event of ``size`` bytes that never reaches a line end."""
    yield from plain[: len(plain) // 2]
    yield HUGE_EVENT_HEAD
    left = size - len(HUGE_EVENT_HEAD)
    block = b"a" * _MIB
    while left > 0:
        yield block[: min(left, _MIB)]
        left -= _MIB


@functools.cache
def bomb_pieces(plain: tuple[bytes, ...], encoding: str, size: int) -> tuple[bytes, ...]:
    """`bomb`: half the events, then a line of ``size`` spaces, compressed by one compressor: a small body
    that decodes to far more than it weighs."""
    compress, finish = _compressor(encoding)
    out = [compress(piece) for piece in plain[: len(plain) // 2]]
    out.append(compress(b"data: "))
    block = b" " * _MIB
    for start in range(0, size, _MIB):
        out.append(compress(block[: min(_MIB, size - start)]))
    out.append(finish())
    return tuple(piece for piece in out if piece)


def sse_body(name: str) -> bytes:
    """The scenario's full Chat Completions SSE body (for `truncated`: the uncut body)."""
    return body("openai-chat", name)


def expected_calls(name: str, format: str = "openai-chat") -> list[dict]:
    """The correct reconstruction of the full body's tool calls: [{"id", "name", "arguments"}] in order.

    `id` is the call's id as the format names it; `arguments` the JSON text (for Gemini and Ollama, which
    send objects, the text that parses to the object). For `error-midstream` this is the call as far as
    it got; formats that only send whole calls never send it.
    """
    return [{"id": c.id, "name": c.name, "arguments": c.full} for c in _rendered(format, name).calls]


def final_response(format: str, scenario: str) -> dict:
    """The non-streamed JSON response of the scenario (`error-midstream`: see _Spec.error)."""
    return _rendered(format, scenario).final()


def path(format: str, scenario: str, *, stream: bool = True, gemini_sse: bool = True) -> str:
    """The request path a client of that format would use for the scenario."""
    _check(format, scenario)
    spec = _SPECS[format]
    verb = spec.verbs[0] if stream else spec.verbs[1]
    result = spec.route.format(model=quote(scenario, safe=""), verb=verb)
    return result + "?alt=sse" if format == "gemini" and stream and gemini_sse else result


_HI = [{"role": "user", "content": "hi"}]
_REQUESTS: dict[str, dict[str, Any]] = {
    "openai-chat": {"messages": _HI},
    "openai-responses": {"input": "hi"},
    "anthropic-messages": {"max_tokens": 1024, "messages": _HI},
    "gemini": {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
    "bedrock-converse": {"messages": [{"role": "user", "content": [{"text": "hi"}]}]},
    "bedrock-invoke": {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 1024, "messages": _HI},
    "cohere-v2": {"messages": _HI},
    "ollama-chat": {"messages": _HI},
}


def request_body(format: str, scenario: str, *, stream: bool = True) -> bytes:
    """A minimal request body of that format for `path(format, scenario, stream=stream)`."""
    _check(format, scenario)
    payload = _REQUESTS[format]
    if "{model}" not in _SPECS[format].route:
        payload = {"model": scenario, **payload, "stream": stream}
    return orjson.dumps(payload)


# -- compression ---------------------------------------------------------------------------------------------


def _compressor(encoding: str) -> tuple[Callable[[bytes], bytes], Callable[[], bytes]]:
    """(compress one event and flush it, finish the stream) of one streaming compressor."""
    encoder = ContentEncoder(encoding)
    return encoder.encode, encoder.finish


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class _Wire(NamedTuple):
    pieces: tuple[bytes, ...]  # what each write sends
    headers: dict[str, str]


@functools.cache
def _wire(plain: tuple[bytes, ...], encoding: str | None) -> _Wire:
    """The writes of a body, each compressed and flushed by one compressor when asked, and its hash headers.

    X-Body-SHA256 is the hash of the full body as it goes on the wire (compressed, when it is);
    X-Decoded-SHA256 the hash of the uncompressed body. Both are for the full body, also when it is cut.
    """
    pieces = plain
    headers = {}
    if encoding is not None:
        compress, finish = _compressor(encoding)
        pieces = tuple(compress(piece) for piece in plain)
        pieces = (*pieces[:-1], pieces[-1] + finish())
        headers["Content-Encoding"] = encoding
    headers["X-Body-SHA256"] = _sha256(b"".join(pieces))
    headers["X-Decoded-SHA256"] = _sha256(b"".join(plain))
    return _Wire(pieces, headers)


# -- HTTP ----------------------------------------------------------------------------------------------------


def _error_json(message: str, kind: str = "invalid_request_error") -> bytes:
    return orjson.dumps({"error": {"message": message, "type": kind}})


_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    413: "Content Too Large",
    429: "Too Many Requests",
    500: "Internal Server Error",
    501: "Not Implemented",
    502: "Bad Gateway",
    503: "Service Unavailable",
    529: "Overloaded",
}

# Formats whose scenario is the body's "model": any POST path that ends so.
_BODY_ROUTES = (
    ("openai-chat", "/chat/completions"),
    ("openai-responses", "/responses"),
    ("anthropic-messages", "/messages"),
    ("cohere-v2", "/v2/chat"),
    ("ollama-chat", "/api/chat"),
)
_GEMINI_PATH = re.compile(r"/models/([^/]+):(streamGenerateContent|generateContent)$")
_BEDROCK_PATH = re.compile(r"/model/([^/]+)/(converse-stream|converse|invoke-with-response-stream|invoke)")


def _route(path: str) -> tuple[str, str | None, bool | None] | None:
    """(format, scenario from the path or None, streamed by the path or None) of an LLM request path."""
    for fmt, suffix in _BODY_ROUTES:
        if path.endswith(suffix):
            return fmt, None, None
    if match := _GEMINI_PATH.search(path):
        return "gemini", unquote(match[1]), match[2] == "streamGenerateContent"
    if match := _BEDROCK_PATH.fullmatch(path):
        fmt = "bedrock-converse" if match[2].startswith("converse") else "bedrock-invoke"
        return fmt, unquote(match[1]), match[2].endswith("stream")
    return None


class _BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class _Request:
    def __init__(self, method: str, target: str, version: str, headers: dict[str, str], body: bytes) -> None:
        self.method = method
        self.path, _, query = target.partition("?")
        self.query = parse_qs(query)
        self.headers = headers
        self.body = body
        tokens = {t.strip().lower() for t in headers.get("connection", "").split(",")}
        self.keep_alive = "keep-alive" in tokens if version == "HTTP/1.0" else "close" not in tokens


async def _read_request(reader: asyncio.StreamReader) -> _Request | None:
    """The next request on the connection, or None when the client closed it between requests."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if exc.partial.strip():
            raise _BadRequest(400, "incomplete request head") from None
        return None
    except asyncio.LimitOverrunError:
        raise _BadRequest(400, "request head too large") from None

    lines = head.decode("latin-1").split("\r\n")
    while lines and not lines[0]:  # RFC 9112 2.2: ignore empty lines before the request line
        lines.pop(0)
    parts = lines[0].split(" ") if lines else []
    if len(parts) != 3 or not parts[0].isalpha() or not parts[1] or parts[2] not in ("HTTP/1.1", "HTTP/1.0"):
        raise _BadRequest(400, "malformed request line")
    method, target, version = parts

    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise _BadRequest(400, "malformed header line")
        headers[name.lower()] = value.strip()

    if "transfer-encoding" in headers:
        raise _BadRequest(501, "request bodies with Transfer-Encoding are not supported")
    length = headers.get("content-length", "0")
    if not length.isdigit():
        raise _BadRequest(400, "malformed Content-Length")
    if int(length) > MAX_BODY_BYTES:
        raise _BadRequest(413, "request body too large")
    body = await reader.readexactly(int(length))
    return _Request(method, target, version, headers, body)


_CREDENTIAL_HEADERS = ("authorization", "x-api-key", "api-key", "x-goog-api-key", "x-amz-security-token")


def _credentials_sha256(request) -> str:
    """A hash of the credentials the request carried (headers, and ?key=), in a fixed order."""
    parts = [request.headers.get(name, "") for name in _CREDENTIAL_HEADERS]
    parts += request.query.get("key", [])
    return _sha256("\n".join(parts).encode())


def _head(status: int, headers: dict[str, str], keep_alive: bool) -> bytes:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}", "Server: fake_provider"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    lines.append("Connection: keep-alive" if keep_alive else "Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class _Refused(Exception):
    """A well-formed request the provider answers with a JSON error; the connection stays usable."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _scenario_of(request: _Request, fmt: str, name: str | None, stream: bool | None) -> tuple[str, bool]:
    if name is None:  # the body says
        try:
            payload = orjson.loads(request.body)
        except orjson.JSONDecodeError:
            raise _Refused(400, "body is not JSON") from None
        if not isinstance(payload, dict):
            raise _Refused(400, "body must be a JSON object")
        name = payload.get("model")
        # Ollama streams unless told not to; the others only when told to.
        stream = payload.get("stream") is not False if fmt == "ollama-chat" else payload.get("stream") is True
    if not isinstance(name, str) or name not in FORMAT_SCENARIOS[fmt]:
        raise _Refused(404, f"unknown scenario {name!r}; known: {', '.join(FORMAT_SCENARIOS[fmt])}")
    return name, bool(stream)


class _Fault(NamedTuple):
    name: str | None
    size: int
    drip_bytes: int | None
    hostile: bool
    length: bool = False  # X-Fake-Framing: length: a Content-Length body, not chunked


_NO_FAULT = _Fault(None, 0, None, False)


def _fault(request: _Request, fmt: str, encoding: str | None) -> _Fault:
    """The request's X-Fake-Fault (with its X-Fake-Size and X-Fake-Drip-Bytes) and X-Fake-Chunking."""
    headers = request.headers
    name = headers.get("x-fake-fault", "").strip().lower() or None
    if name is not None and name not in FAULTS:
        raise _Refused(400, f"X-Fake-Fault must be one of {', '.join(FAULTS)}")
    if name in ("endless-calls", "endless-arguments") and fmt != "openai-chat":
        raise _Refused(400, f"X-Fake-Fault {name} is a Chat Completions stream")
    if name == "huge-event" and _SPECS[fmt].frame in (_frame_converse, _frame_invoke):
        raise _Refused(400, "X-Fake-Fault huge-event needs a line-framed format")
    if name == "bomb" and encoding is None:
        raise _Refused(400, "X-Fake-Fault bomb needs X-Fake-Encoding")
    numbers = {}
    for header in ("x-fake-size", "x-fake-drip-bytes"):
        value = headers.get(header)
        if value is not None and (not value.isdigit() or int(value) > 2**34):
            raise _Refused(400, f"{header} must be a number of bytes up to 16 GiB")
        numbers[header] = None if value is None else int(value)
    default_size = 100 * 1000 * 1000 if name == "huge-event" else 256 * _MIB
    chunking = headers.get("x-fake-chunking", "").strip().lower()
    if chunking not in ("", "hostile"):
        raise _Refused(400, "X-Fake-Chunking must be hostile")
    framing = headers.get("x-fake-framing", "").strip().lower()
    if framing not in ("", "length", "chunked"):
        raise _Refused(400, "X-Fake-Framing must be length or chunked")
    size = numbers["x-fake-size"] or default_size
    return _Fault(name, size, numbers["x-fake-drip-bytes"], chunking == "hostile", framing == "length")


def _options(request: _Request, delay: float) -> tuple[float, str | None]:
    """The request's delay between events and response encoding."""
    if "x-fake-delay" in request.headers:
        try:
            delay = float(request.headers["x-fake-delay"])
        except ValueError:
            delay = math.nan
        if not 0 <= delay <= 60:
            raise _Refused(400, "X-Fake-Delay must be a number of seconds between 0 and 60")
    encoding = request.headers.get("x-fake-encoding", "").strip().lower() or None
    if encoding is not None and encoding not in ENCODINGS:
        raise _Refused(400, f"X-Fake-Encoding must be one of {', '.join(ENCODINGS)}")
    return delay, encoding


class ProviderState:
    """What both providers (HTTP/1.1 here, HTTP/2 in h2_provider.py) keep: the pacing, the gated streams
    waiting for GET /release, the open connections (cancelled at shutdown)."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.gates: set[asyncio.Event] = set()
        self.connections: set[asyncio.Task] = set()

    def plain_response(self, method: str, path: str) -> tuple[int, str, bytes]:
        """(status, content type, body) of a request that is no LLM call: /health, /v1/models, /release
        (which opens every gate still closed and says how many), else 404."""
        if method == "GET" and path == "/health":
            return 200, "text/plain", b"ok\n"
        if method == "GET" and path == "/v1/models":
            models = {"object": "list", "data": [{"id": name, "object": "model"} for name in SCENARIOS]}
            return 200, "application/json", orjson.dumps(models)
        if method == "GET" and path == "/release":
            waiting = [gate for gate in self.gates if not gate.is_set()]
            for gate in waiting:
                gate.set()
            return 200, "text/plain", f"{len(waiting)}\n".encode()
        return 404, "text/plain", b"not found\n"


class _Provider(ProviderState):
    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.connections.add(task)
        try:
            while True:
                try:
                    request = await _read_request(reader)
                except _BadRequest as exc:
                    await self._send(writer, exc.status, "text/plain", f"{exc}\n".encode(), keep_alive=False)
                    return
                if request is None or not await self._respond(request, writer) or not request.keep_alive:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            # The client went away mid-request or mid-stream: that connection is simply over.
            pass
        except asyncio.CancelledError:
            # Shutdown cancels connections. Ending cancelled would make asyncio 3.12.1's client_connected_cb
            # callback call task.exception() and print a traceback, so the task ends normally instead.
            pass
        finally:
            self.connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _send(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        content_type: str,
        body: bytes,
        *,
        keep_alive: bool,
        head_only: bool = False,
        extra: dict[str, str] | None = None,
    ) -> bool:
        headers = {"Content-Type": content_type, "Content-Length": str(len(body)), **(extra or {})}
        writer.write(_head(status, headers, keep_alive) + (b"" if head_only else body))
        await writer.drain()
        return keep_alive

    async def _respond(self, request: _Request, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; False when the connection must not carry another one."""
        method, path, keep = request.method, request.path, request.keep_alive
        if method == "POST" and (route := _route(path)):
            try:
                return await self._llm(request, writer, *route)
            except _Refused as exc:
                return await self._send(
                    writer, exc.status, "application/json", _error_json(str(exc)), keep_alive=keep
                )
        status, content_type, body = self.plain_response(method, path)
        return await self._send(
            writer, status, content_type, body, keep_alive=keep, head_only=method == "HEAD"
        )

    async def _llm(
        self, request: _Request, writer: asyncio.StreamWriter, fmt: str, name: str | None, stream: bool | None
    ) -> bool:
        keep = request.keep_alive
        name, stream = _scenario_of(request, fmt, name, stream)
        delay, encoding = _options(request, self.delay)
        fault = _fault(request, fmt, encoding)
        gemini_sse = "sse" in request.query.get("alt", ())
        if fault.name == "html-502":
            return await self._send(writer, 502, "text/html", HTML_502, keep_alive=keep)
        if fault.name == "json-429":
            body = orjson.dumps(RATE_LIMITED)
            extra = {"Retry-After": "20"}
            return await self._send(writer, 429, "application/json", body, keep_alive=keep, extra=extra)
        if stream:
            received = _credentials_sha256(request)
            return await self._stream(fmt, name, gemini_sse, delay, encoding, writer, keep, received, fault)
        extra = {"X-Scenario": name}
        if _SCRIPTS[name].get("error"):
            # Not streamed, the failure surfaces the way the provider reports it: as the HTTP status.
            status, error = _SPECS[fmt].error
            if fmt.startswith("bedrock"):
                extra["X-Amzn-ErrorType"] = "ThrottlingException"
            return await self._send(
                writer, status, "application/json", orjson.dumps(error), keep_alive=keep, extra=extra
            )
        wire = _wire((orjson.dumps(final_response(fmt, name)),), encoding)
        extra.update(wire.headers)
        return await self._send(
            writer, 200, "application/json", b"".join(wire.pieces), keep_alive=keep, extra=extra
        )

    async def _stream(
        self,
        fmt: str,
        name: str,
        gemini_sse: bool,
        delay: float,
        encoding: str | None,
        writer: asyncio.StreamWriter,
        keep: bool,
        received_credentials: str = "",
        fault: _Fault = _NO_FAULT,
    ) -> bool:
        script = _SCRIPTS[name]
        plain = events(fmt, name, gemini_sse=gemini_sse)
        wire = _wire(plain, encoding)
        if fault.name is not None and fault.name != "drip":
            return await self._faulty(fmt, name, plain, wire, delay, encoding, writer, fault)
        content_type = "application/json" if fmt == "gemini" and not gemini_sse else _SPECS[fmt].content_type
        headers = {
            "Content-Type": content_type,
            "Cache-Control": "no-cache",
            "Transfer-Encoding": "chunked",
            # Always the full body's hashes, also for `truncated`, so a client can tell it got less.
            **wire.headers,
            "X-Scenario": name,
            # What keys arrived, as a hash: a proxy that redacts too early would change it.
            "X-Received-Credentials-SHA256": received_credentials,
        }
        if fmt == "bedrock-invoke":
            headers["X-Amzn-Bedrock-Content-Type"] = "application/json"
        cut = script.get("cut_after") is not None
        if fault.length and not cut:
            del headers["Transfer-Encoding"]
            headers["Content-Length"] = str(sum(map(len, wire.pieces)))
        writer.write(_head(200, headers, keep))
        await writer.drain()

        gate_after = script.get("gate_after")
        pieces = wire.pieces[: len(events(fmt, name, gemini_sse=gemini_sse, cut=True))]
        gate = asyncio.Event() if gate_after else None
        if gate is not None:
            # Registered before the first write, so a client that has seen that event can always release it.
            self.gates.add(gate)
        if fault.hostile:
            pieces = tuple(
                p for piece in pieces for p in boundaries.cut(piece, boundaries.hostile_cuts(piece))
            )
        if fault.name == "drip":
            dripped = b"".join(pieces)[: fault.drip_bytes]
            rest = b"".join(pieces)[len(dripped) :]
            pieces = (*(dripped[i : i + 1] for i in range(len(dripped))), *((rest,) if rest else ()))
        try:
            for sent, piece in enumerate(pieces):
                if sent:
                    await asyncio.sleep(delay)
                # One event, one chunk, one write, drained: the pacing a real provider's stream has.
                writer.write(piece if fault.length else b"%x\r\n%s\r\n" % (len(piece), piece))
                await writer.drain()
                if gate is not None and sent + 1 == gate_after:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(gate.wait(), GATE_TIMEOUT)
        finally:
            if gate is not None:
                self.gates.discard(gate)

        if cut:
            # Dropping the connection without the zero-length chunk leaves the client an incomplete body.
            await asyncio.sleep(delay)
            return False
        if not fault.length:
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        return keep

    async def _faulty(
        self,
        fmt: str,
        name: str,
        plain: tuple[bytes, ...],
        wire: _Wire,
        delay: float,
        encoding: str | None,
        writer: asyncio.StreamWriter,
        fault: _Fault,
    ) -> bool:
        """A stream that goes wrong as X-Fake-Fault says; the connection is not reused after it."""
        headers = {
            "Content-Type": _SPECS[fmt].content_type,
            "Transfer-Encoding": "chunked",
            "X-Scenario": name,
        }
        if fault.name == "huge-event":
            pieces = huge_event_pieces(plain, fault.size)
            digest = hashlib.sha256()
            for piece in huge_event_pieces(plain, fault.size):
                digest.update(piece)
            headers["X-Body-SHA256"] = digest.hexdigest()
        elif fault.name == "bomb":
            assert encoding is not None
            pieces = bomb_pieces(plain, encoding, fault.size)
            headers["Content-Encoding"] = encoding
            headers["X-Body-SHA256"] = _sha256(b"".join(pieces))
        elif fault.name == "drop-mid-event":
            pieces = drop_mid_event_pieces(wire.pieces)
            headers.update(wire.headers)  # the hashes of the full body, which never comes
        else:  # endless: no hash can come first; the client checks a prefix of `endless(kind)`
            pieces = endless(fault.name)
            delay = 0.0
        writer.write(_head(200, headers, False))
        await writer.drain()
        for piece in pieces:
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
            if delay:
                await asyncio.sleep(delay)
        if fault.name == "drop-mid-event":
            return False  # no zero-length chunk: the body is incomplete
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return False


async def serve(provider, name: str, scheme: str, host: str, port: int, **server_options) -> int:
    """Serve ``provider.handle`` until SIGTERM or SIGINT; say where on one line (tests wait for it)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    try:
        server = await asyncio.start_server(provider.handle, host, port, **server_options)
    except OSError as exc:
        print(f"{name}: cannot listen on {host}:{port}: {exc}", file=sys.stderr)
        return 1
    bound_host, bound_port = server.sockets[0].getsockname()[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    print(f"{name} listening on {scheme}://{shown}:{bound_port}", flush=True)

    await stop.wait()
    server.close()
    # Idle keep-alive connections and gated streams would otherwise hold the shutdown open.
    for task in list(provider.connections):
        task.cancel()
    await asyncio.gather(*provider.connections, return_exceptions=True)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(server.wait_closed(), 5)
    return 0


def arguments(argv: list[str] | None, description: str) -> argparse.Namespace:
    """--host, --port and --delay, as both providers take them."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 lets the OS pick one (default)")
    parser.add_argument("--delay", type=float, default=0.02, help="seconds between event writes")
    args = parser.parse_args(argv)
    if not 0 <= args.delay <= 60:
        parser.error("--delay must be between 0 and 60 seconds")
    return args


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv, __doc__.splitlines()[0])
    provider = _Provider(args.delay)
    try:
        return asyncio.run(
            serve(provider, "fake_provider", "http", args.host, args.port, limit=MAX_HEAD_BYTES)
        )
    except KeyboardInterrupt:  # only before the loop's own SIGINT handler is in place
        return 0


if __name__ == "__main__":
    sys.exit(main())
