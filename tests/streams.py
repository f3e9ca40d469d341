"""Building Chat Completions streams for tests, as the bytes a provider would send."""

from __future__ import annotations

import json
from pathlib import Path

DATA = Path(__file__).parent / "data"
SHARED = Path(__file__).resolve().parents[2] / "shared"
CORPUS = SHARED / "corpus" / "recorded"


def chunk(*choices: dict, **extra) -> dict:
    obj = {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1767225600,
        "model": "gpt-test",
        "choices": list(choices),
    }
    obj.update(extra)
    return obj


def choice(index: int = 0, finish_reason: str | None = None, **delta) -> dict:
    return {"index": index, "delta": delta, "finish_reason": finish_reason}


def call(index=None, id=None, name=None, arguments=None, **extra) -> dict:
    entry: dict = {}
    if index is not None:
        entry["index"] = index
    if id is not None:
        entry["id"] = id
    function = {}
    if name is not None:
        function["name"] = name
    if arguments is not None:
        function["arguments"] = arguments
    if function:
        entry["function"] = function
    entry.update(extra)
    return entry


def tool_chunk(*calls: dict, choice_index: int = 0, finish_reason: str | None = None) -> dict:
    return chunk(choice(choice_index, finish_reason, tool_calls=list(calls)))


def sse(*events, done: bool = True) -> bytes:
    """Each event: a dict (sent as JSON), or bytes/str sent verbatim as the data."""
    out = []
    for event in events:
        if isinstance(event, dict):
            event = json.dumps(event)
        if isinstance(event, bytes):
            out.append(b"data: " + event + b"\n\n")
        else:
            out.append(f"data: {event}\n\n".encode())
    if done:
        out.append(b"data: [DONE]\n\n")
    return b"".join(out)


def calls_of(result: dict, choice_index: int = 0) -> list[tuple]:
    for c in result["choices"]:
        if c["index"] == choice_index:
            return [(t["id"], t["name"], t["arguments"]) for t in c["tool_calls"]]
    return []


def codes(result: dict) -> list[str]:
    return [w["code"] for w in result["warnings"]]


def warning(result: dict, code: str) -> dict:
    found = [w for w in result["warnings"] if w["code"] == code]
    assert found, f"no {code} in {codes(result)}"
    return found[0]
