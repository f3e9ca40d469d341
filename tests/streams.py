"""Building Chat Completions streams for tests, as the bytes a provider would send."""

from __future__ import annotations

import json
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the repository
DATA = Path(__file__).parent / "data"
# The project's shared/ folder beside the repository; TOOLCALL_LENS_SHARED names it from a copy of the tests
# elsewhere (the mutation run's mutants/, docs/mutation.md).
SHARED = Path(os.environ.get("TOOLCALL_LENS_SHARED") or Path(__file__).resolve().parents[2] / "shared")
CORPUS = SHARED / "corpus" / "recorded"
# For ``@pytest.mark.needs(HAVE_CORPUS, NO_CORPUS)`` (tests/conftest.py): skipped without it, failed in CI.
HAVE_CORPUS = (CORPUS / "index.json").is_file()
NO_CORPUS = f"the recorded corpus is not at {CORPUS} (it lives in the project's shared/ folder, outside the repository)"


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


def chat_message(
    calls: list[tuple[str, str, str]] = (), *, content: str | None = None, model: str = "gpt-test", **extra
) -> bytes:
    """A whole (non-streamed) Chat Completions response making these (id, name, arguments) calls."""
    said: dict = {"role": "assistant", "content": content}
    if calls:
        said["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": name, "arguments": args}}
            for i, name, args in calls
        ]
    finish = "tool_calls" if calls else "stop"
    choices = [{"index": 0, "message": said, "finish_reason": finish}]
    return json.dumps(
        {"id": "chatcmpl-1", "object": "chat.completion", "model": model, "choices": choices, **extra}
    ).encode()


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


# --- other wire formats ------------------------------------------------------------------------------


def named_sse(*events: tuple[str, dict]) -> bytes:
    """SSE with ``event:`` lines: each event a (name, payload) pair; the payload repeats the name as type."""
    return b"".join(
        f"event: {name}\ndata: {json.dumps({'type': name, **payload})}\n\n".encode()
        for name, payload in events
    )


def aws_frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One AWS event-stream message (string headers), CRCs valid."""
    import struct
    import zlib

    head = b"".join(
        bytes([len(k)]) + k.encode() + b"\x07" + struct.pack(">H", len(v.encode())) + v.encode()
        for k, v in headers.items()
    )
    total = 16 + len(head) + len(payload)
    prelude = struct.pack(">II", total, len(head))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    message = prelude + head + payload
    return message + struct.pack(">I", zlib.crc32(message))


def converse_frames(*events: tuple[str, dict]) -> bytes:
    return b"".join(
        aws_frame(
            {":event-type": name, ":content-type": "application/json", ":message-type": "event"},
            json.dumps({**payload, "p": "abcdef"}).encode(),
        )
        for name, payload in events
    )


def invoke_frames(*anthropic_events: dict) -> bytes:
    import base64

    return b"".join(
        aws_frame(
            {":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"},
            json.dumps({"bytes": base64.b64encode(json.dumps(e).encode()).decode(), "p": "xyz"}).encode(),
        )
        for e in anthropic_events
    )


def all_calls(result: dict) -> list[tuple]:
    return [(t["id"], t["name"], t["arguments"]) for c in result["choices"] for t in c["tool_calls"]]


# The production incident's two calls, as steps every format's builder turns into its own events:
# ("start", call) names a call, ("args", call, fragment) continues it.
CALL_NAMES = ["search_circulars", "get_user_profile"]
EXPECTED_ARGS = ['{"query": "RBI circulars"}', '{"user_id": "u123"}']
INTERLEAVED_STEPS = [
    ("start", 0),
    ("start", 1),
    ("args", 0, '{"query": "RBI'),
    ("args", 1, '{"user_id": "u'),
    ("args", 0, ' circulars"}'),
    ("args", 1, '123"}'),
]
SEQUENTIAL_STEPS = [
    ("start", 0),
    ("args", 0, '{"query": "RBI'),
    ("args", 0, ' circulars"}'),
    ("start", 1),
    ("args", 1, '{"user_id": "u'),
    ("args", 1, '123"}'),
]


# --- framing tests: the same events however the bytes are cut ----------------------------------------


def framed(decoder, *chunks: bytes) -> list:
    """Every event a decoder gives for these chunks, its close() included."""
    out = []
    for chunk in chunks:
        out.extend(decoder.feed(chunk))
    out.extend(decoder.close())
    return out


def pieces_at(body: bytes, cuts) -> list[bytes]:
    points = sorted({c % (len(body) + 1) for c in cuts})
    return [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]


def assert_every_cut_agrees(decode, body: bytes, label: str = "") -> None:
    """``decode(*pieces)`` gives the events of the whole body when cut at any single point."""
    whole = decode(body)
    assert whole, label
    for cut in range(len(body) + 1):
        assert decode(body[:cut], body[cut:]) == whole, f"{label} cut at {cut}"


def assert_nearby_cut_pairs_agree(decode, body: bytes, span: int = 200, gap: int = 8) -> None:
    """Two cuts close together (a CRLF, an escape, a BOM or a header split over three chunks)."""
    head = body[:span]
    whole = decode(head)
    for a in range(len(head) + 1):
        for b in range(a, min(len(head), a + gap) + 1):
            assert decode(head[:a], head[a:b], head[b:]) == whole, (a, b)


def core_part(result: dict) -> dict:
    """A front door's result less what only the front doors add (the cost, the agent session): what the
    core alone gives for the same bytes."""
    return {k: v for k, v in result.items() if k not in ("cost", "cost_note", "session")}


def without_timing(result: dict) -> dict:
    """A result less what depends on when bytes arrived (the addon has a clock, files do not)."""
    out = {k: v for k, v in result.items() if k != "timing"}
    out["choices"] = [
        {
            **c,
            "tool_calls": [
                {k: v for k, v in t.items() if k not in ("first_at", "last_at")} for t in c["tool_calls"]
            ],
        }
        for c in result["choices"]
    ]
    return out
