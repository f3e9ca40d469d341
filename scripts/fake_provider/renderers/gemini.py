"""Gemini generateContent: whole candidates (thought parts, text parts, whole functionCall parts with a
thought signature on the first), as SSE with CRLF line ends under ?alt=sse, else one JSON array."""

from __future__ import annotations

from typing import Any

import orjson

from .base import SIGNATURE, Block, Payloads, Render, WireFormat
from .framing import SSE, data_lines


class Gemini(Render):
    whole_calls = True

    def response(self, parts: list, usage: dict, **candidate: Any) -> dict:
        return {
            "candidates": [{"content": {"parts": parts, "role": "model"}, "index": 0, **candidate}],
            "usageMetadata": usage,
            "modelVersion": self.name,
            "responseId": f"fake-{self.name}",
        }

    def part(self, block: Block, text: str) -> dict:
        if block.kind == "think":
            return {"text": text, "thought": True}
        if block.kind == "text":
            return {"text": text}
        call = {"name": block.name, "args": block.whole}
        part: dict[str, Any] = {"functionCall": {"id": block.id, **call} if block.id else call}
        if block.number == 0:  # only the first call of a step carries the signature
            part["thoughtSignature"] = SIGNATURE
        return part

    def open(self, block: Block) -> None:
        if block.kind == "call" and self.sent(block):
            self.emit(self.response([self.part(block, "")], {"promptTokenCount": 50, "totalTokenCount": 50}))

    def add(self, block: Block, fragment: str) -> None:
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


def frame_sse(payloads: Payloads) -> list[bytes]:
    return data_lines(payloads, b"\r\n\r\n")


def frame_array(payloads: Payloads) -> list[bytes]:
    """One JSON array, written an element at a time: `[` first, `,` between, `]` after the last."""
    last = len(payloads) - 1
    return [
        (b"[" if i == 0 else b"\r\n,\r\n")
        + orjson.dumps(payload, option=orjson.OPT_INDENT_2)
        + (b"\r\n]" if i == last else b"")
        for i, (_, payload) in enumerate(payloads)
    ]


FORMAT = WireFormat(
    "gemini",
    Gemini,
    frame_sse,
    SSE,
    "/v1beta/models/{model}:{verb}",
    (503, {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}),
    {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
    verbs=("streamGenerateContent", "generateContent"),
    array_frame=frame_array,
)
