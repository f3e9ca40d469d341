"""The generated Chat Completions streams every part measures: N parallel tool calls interleaved round-robin,
~20-byte argument fragments, realistic chunk JSON; and the request body that asks the upstream for one."""

from __future__ import annotations

import dataclasses
import random
import re

import orjson

PIECE = 64 * 1024
CREATED = 1767225600
MODEL = "gpt-4.1-2025-04-14"
# A fixed-width system_fingerprint: the proxy benchmark's upstream writes each event's send time into it.
FINGERPRINT = b"fp_" + b"0" * 20
FINGERPRINT_RE = re.compile(rb"fp_(\d{20})")
TOOL_NAMES = ("read_file", "search_documents", "get_user_profile", "write_file", "run_query", "fetch_url")
# Argument text: plain words, quoted, path-like, with a newline, a tab and non-ASCII (all escaped in JSON).
LOREM = (
    "the quick brown fox jumps over lazy dog lorem ipsum dolor sit amet consectetur adipiscing elit sed do "
    'eiusmod tempor incididunt ut labore et dolore magna aliqua "quoted" path/to/file.py line\n tab\t é ü'
)
WORDS = tuple(LOREM.split(" "))


@dataclasses.dataclass
class Stream:
    """One generated Chat Completions stream: its events (each ``data: ...\\n\\n``) and what it carries."""

    name: str
    calls: int
    events: list[bytes]
    ids: list[str]
    names: list[str]
    arguments: list[str]

    @property
    def body(self) -> bytes:
        return b"".join(self.events)

    @property
    def argument_bytes(self) -> int:
        return sum(len(arguments.encode()) for arguments in self.arguments)

    def pieces(self, feeding: str) -> list[bytes]:
        if feeding == "event":
            return self.events
        body = self.body
        return [body[i : i + PIECE] for i in range(0, len(body), PIECE)]


def _arguments(rng: random.Random, size: int, number: int) -> str:
    """A JSON object of about ``size`` bytes, with escapes and non-ASCII text, as tool arguments have."""
    head = {"path": f"src/module_{number}.py", "line": rng.randint(1, 9999), "overwrite": False}
    words: list[str] = []
    length = len(orjson.dumps({**head, "content": ""}))
    while length < size:
        word = rng.choice(WORDS)
        words.append(word)
        length += len(orjson.dumps(word)) - 1  # its escaped length, plus a space
    return orjson.dumps({**head, "content": " ".join(words)}).decode()


def _fragments(rng: random.Random, text: str) -> list[str]:
    """The argument text cut into fragments of 12 to 28 characters (a token or a few: ~20 bytes)."""
    pieces, start = [], 0
    while start < len(text):
        end = start + rng.randint(12, 28)
        pieces.append(text[start:end])
        start = end
    return pieces


def _chunk(delta: dict, finish_reason: str | None = None) -> bytes:
    payload = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": MODEL,
        "service_tier": "default",
        "system_fingerprint": FINGERPRINT.decode(),
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
    }
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def make_stream(name: str, calls: int, argument_size: int, seed: int = 7) -> Stream:
    """``calls`` parallel tool calls of ~``argument_size`` bytes of arguments each, interleaved round-robin:
    every call's opening delta (id, type, name, empty arguments), then one ~20-byte fragment of each call
    in turn; a role chunk first, a finish chunk and ``[DONE]`` last."""
    rng = random.Random(seed * 1_000_003 + calls * 7919 + argument_size)
    ids = [f"call_{rng.getrandbits(96):024x}" for _ in range(calls)]
    names = [f"{TOOL_NAMES[i % len(TOOL_NAMES)]}_{i}" for i in range(calls)]
    arguments = [_arguments(rng, argument_size, i) for i in range(calls)]
    fragments = [_fragments(rng, text) for text in arguments]
    events = [_chunk({"role": "assistant", "content": None, "refusal": None})]
    for i in range(calls):
        opener = {
            "index": i,
            "id": ids[i],
            "type": "function",
            "function": {"name": names[i], "arguments": ""},
        }
        events.append(_chunk({"tool_calls": [opener]}))
    for round_ in range(max(map(len, fragments))):
        for i in range(calls):
            if round_ < len(fragments[i]):
                events.append(
                    _chunk({"tool_calls": [{"index": i, "function": {"arguments": fragments[i][round_]}}]})
                )
    events.append(_chunk({}, "tool_calls"))
    events.append(b"data: [DONE]\n\n")
    return Stream(name, calls, events, ids, names, arguments)


def stream_sizes(quick: bool) -> dict[str, tuple[int, int]]:
    if quick:
        return {"small": (3, 200), "medium": (8, 1024), "large": (32, 2048)}
    return {"small": (3, 200), "medium": (8, 4096), "large": (32, 65536)}


def expected_calls(stream: Stream) -> list:
    return list(zip(stream.ids, stream.names, stream.arguments, strict=True))


def chat_body(model: str, echo: bool = False) -> bytes:
    messages: list[dict] = [{"role": "user", "content": "Find the RBI circulars and my profile."}]
    if echo:  # the client's follow-up: the calls of the `interleaved` scenario and their results
        calls = [
            ("call_abc", "search_circulars", '{"query": "RBI circulars"}'),
            ("call_xyz", "get_user_profile", '{"user_id": "u123"}'),
        ]
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                    for i, n, a in calls
                ],
            }
        )
        messages += [{"role": "tool", "tool_call_id": i, "content": "ok"} for i, _, _ in calls]
    return orjson.dumps({"model": model, "stream": True, "messages": messages})
