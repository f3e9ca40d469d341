"""Hostile input never hurts the traffic: for every format, mutated and structure-fuzzed bodies cut at any
points go through the addon's stream callable unchanged, and the core never raises (a failure would show
as an internal-error warning). Hypothesis runs a fixed, derandomized set in CI; for a longer hunt:
``TOOLCALL_LENS_FUZZ=20000 .venv/bin/python -m pytest tests/core/test_fuzz.py``."""

from __future__ import annotations

import json
import os

import fake_provider
import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from streams import DATA

import addon as addon_module
from accumulator import FORMATS, StreamAccumulator, analyze_message
from accumulator.echo import ObservedCalls
from accumulator.request import request_body
from toolcall_lens.worker import read_request

EXAMPLES = int(os.environ.get("TOOLCALL_LENS_FUZZ", "150"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not os.environ.get("TOOLCALL_LENS_FUZZ"),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Real bodies of every format: the reference examples and the fake provider's scenarios.
BODIES = [
    (f, fake_provider.body(f, s)) for f in fake_provider.FORMATS for s in ("interleaved", "error-midstream")
]
BODIES += [("gemini", fake_provider.body("gemini", "sequential", gemini_sse=False))]
BODIES += [(f, fake_provider.body(f, "custom-interleaved")) for f in ("openai-chat", "openai-responses")]
BODIES += [("openai-chat", (DATA / "production_interleaved.sse").read_bytes())]
BODIES += [("bedrock-converse", (DATA / "bedrock_converse_parallel.bin").read_bytes())]


def mutated(body: bytes, edits: list[tuple[int, int, bytes]]) -> bytes:
    data = bytearray(body)
    for position, kind, value in edits:
        at = position % (len(data) + 1)
        if kind == 0 and at < len(data):
            data[at] ^= value[0] if value else 0xFF  # flip bits
        elif kind == 1:
            data[at:at] = value  # insert
        else:
            del data[at : at + 1 + (value[0] if value else 0) % 64]  # delete a run
    return bytes(data)


def cut(body: bytes, points: list[int]) -> list[bytes]:
    marks = sorted({p % (len(body) + 1) for p in points})
    return [body[a:b] for a, b in zip([0, *marks], [*marks, len(body)], strict=True)]


def through_the_callable(format: str | None, pieces: list[bytes], encoding: str | None = None) -> dict | None:
    accumulator = StreamAccumulator(format, encoding=encoding, max_event_bytes=4096)
    watch = addon_module.StreamWatch(accumulator, format, 1 << 20)
    for piece in pieces:
        assert watch(piece) is piece  # the very object it was given
    assert watch(b"") == b""
    result, body = watch.finish()
    assert body == b"".join(pieces)
    assert watch.failure is None, watch.failure
    if result is not None:
        codes = [w["code"] for w in result["warnings"]]
        assert "internal-error" not in codes, result["warnings"]
        orjson.dumps(result)  # JSON-safe whatever came in
    return result


@FUZZ
@given(
    st.sampled_from(BODIES),
    st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 2), st.binary(max_size=8)), max_size=12),
    st.lists(st.integers(0, 1 << 20), max_size=24),
    st.booleans(),
)
def test_mutated_bodies_pass_unchanged_and_never_break_the_core(sample, edits, points, known_format):
    format, body = sample
    through_the_callable(format if known_format else None, cut(mutated(body, edits), points))


@FUZZ
@given(
    st.binary(max_size=2048), st.lists(st.integers(0, 4096), max_size=16), st.sampled_from([*FORMATS, None])
)
def test_random_bytes_pass_unchanged(noise, points, format):
    through_the_callable(format, cut(noise, points))


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
# The keys each dialect reads, to put fuzzed values exactly where it looks.
KEYS = [
    "choices",
    "delta",
    "tool_calls",
    "function",
    "index",
    "id",
    "name",
    "arguments",
    "content",
    "reasoning",
    "refusal",
    "finish_reason",
    "usage",
    "model",
    "error",
    "type",
    "item",
    "output_index",
    "item_id",
    "content_block",
    "partial_json",
    "input",
    "message",
    "candidates",
    "parts",
    "functionCall",
    "args",
    "partialArgs",
    "jsonPath",
    "willContinue",
    "contentBlockIndex",
    "start",
    "toolUse",
    "stopReason",
    "done",
    "x_groq",
    "response",
    "output",
    "call_id",
    "thinking",
    "text",
    "stringValue",
    "custom",
    "namespace",
    "tools",
    "execution",
    "previous_response_id",
    "conversation",
    "action",
    "actions",
    "operation",
    "environment",
    "status",
]
# Values the dialects branch on (item and tool types), put among the fuzzed leaves so those branches run.
WORDS = [
    "function_call",
    "custom_tool_call",
    "tool_search_call",
    "tool_search_output",
    "additional_tools",
    "tool_search",
    "namespace",
    "client",
    "shell_call",
    "apply_patch_call",
    "local_shell_call",
    "computer_call",
    "shell_call_output",
    "apply_patch_call_output",
    "local_shell_call_output",
    "shell",
    "apply_patch",
    "local",
    "failed",
]
NESTED = st.recursive(
    JSON | st.sampled_from(WORDS),
    lambda children: (
        st.dictionaries(st.sampled_from(KEYS), children, max_size=5) | st.lists(children, max_size=3)
    ),
    max_leaves=30,
)
EVENT_NAMES = [
    "message_start",
    "content_block_start",
    "content_block_delta",
    "response.output_item.added",
    "response.function_call_arguments.delta",
    "response.custom_tool_call_input.delta",
    "response.custom_tool_call_input.done",
    "response.output_item.done",
    "tool-call-start",
    "tool-call-delta",
    None,
]


@FUZZ
@given(
    st.sampled_from(FORMATS),
    st.lists(st.tuples(st.sampled_from(EVENT_NAMES), NESTED), max_size=12),
    st.lists(st.integers(0, 1 << 16), max_size=12),
)
def test_wrong_types_in_the_fields_each_dialect_reads(format, events, points):
    if format.startswith("bedrock"):
        body = b"".join(
            fake_provider.aws_message(
                {
                    ":event-type": name or "chunk",
                    ":content-type": "application/json",
                    ":message-type": "event",
                },
                dumps(value),
            )
            for name, value in events
        )
    elif format == "ollama-chat":
        body = b"".join(dumps(value) + b"\n" for _, value in events)
    else:
        body = b"".join(
            (f"event: {name}\n".encode() if name else b"") + b"data: " + dumps(value) + b"\n\n"
            for name, value in events
        )
    result = through_the_callable(format, cut(body, points))
    observed = ObservedCalls()
    if result is not None:
        observed.record(result, "flow")
    for _, value in events[:3]:  # the same values as whole non-streamed responses, and as requests
        analyze_message(dumps(value), format, request=dumps(value))
        observed.check(dumps({"messages": [value], "input": [value], "contents": [value]}))
        observed.check(dumps(value))


def dumps(value) -> bytes:
    # The standard library writes integers of any size (orjson refuses those over 64 bits; the core
    # then meets them as it would on the wire).
    return json.dumps(value).encode()


@FUZZ
@given(
    st.binary(max_size=512),
    st.sampled_from(["gzip", "br", "zstd", "deflate", "gzip, br", "identity"]),
    st.lists(st.integers(0, 1024), max_size=8),
)
def test_corrupt_compressed_bodies_pass_unchanged(noise, encoding, points):
    through_the_callable("openai-chat", cut(noise, points), encoding)


@FUZZ
@given(
    st.one_of(st.binary(max_size=512), st.sampled_from([b'{"messages": []}', b""])),
    st.sampled_from(["gzip", "br", "zstd", "deflate", "gzip, br", "identity", "compress", "zstd, zstd"]),
    st.integers(0, 600),
)
def test_a_compressed_requests_reading_says_why_it_fails_and_nothing_else(noise, encoding, cap):
    # A request's body as it came (Codex compresses its own), read by every front door: its bytes, or a
    # ValueError that says why not, never another exception; its echo check the same, as evidence.
    try:
        body = request_body(noise, encoding, cap)
    except ValueError as exc:
        assert str(exc).startswith("the request's body cannot be read: "), exc
    else:
        assert isinstance(body, bytes) and len(body) <= max(cap, len(noise))
    facts, echoes, evidence, failed = read_request(ObservedCalls(), noise, "openai-chat", None, encoding)
    if failed is not None:  # the flow loses its facts and its check, and its evidence says why
        assert facts is None and echoes == [] and evidence["reason"] == failed
    orjson.dumps(evidence)


# AWS frames: prelude = total length (4), headers length (4), prelude CRC (4); the message CRC closes it.
FRAME_FIELDS = {"total_length": 0, "headers_length": 4, "prelude_crc": 8, "message_crc": -4}


@FUZZ
@given(
    st.sampled_from(["bedrock-converse", "bedrock-invoke"]),
    st.lists(
        st.tuples(
            st.integers(0, 64), st.sampled_from(sorted(FRAME_FIELDS)), st.binary(min_size=4, max_size=4)
        )
    ),
    st.integers(0, 64),
    st.lists(st.integers(0, 1 << 12), max_size=12),
)
def test_aws_frames_with_bad_lengths_crcs_or_a_cut_end(format, corruptions, keep_frames, points):
    frames = [bytearray(frame) for frame in fake_provider.events(format, "interleaved")]
    for which, field, value in corruptions:
        frame = frames[which % len(frames)]
        at = FRAME_FIELDS[field] % len(frame)
        frame[at : at + 4] = value  # a length that lies or a CRC that does not match
    body = b"".join(frames[: 1 + keep_frames % len(frames)])
    body = body[: len(body) - keep_frames % 7]  # and the last frame cut short, sometimes
    through_the_callable(format, cut(body, points))


# Strings as the wire may carry them: NUL bytes, bytes that are not UTF-8, lone surrogates escaped.
NASTY_STRINGS = st.sampled_from(
    [b"\\u0000", b"a\x00b", b"\xff\xfe", b"\xc3", b"\xed\xa0\x80", b"\\ud800", b"\xf0\x9f\x98", b""]
)


@FUZZ
@given(
    st.sampled_from([f for f in FORMATS if not f.startswith("bedrock")]),
    st.sampled_from(["name", "arguments", "id", "content", "partial_json", "text"]),
    NASTY_STRINGS,
    st.integers(1, 3000),
    st.lists(st.integers(0, 1 << 16), max_size=12),
)
def test_nul_bytes_invalid_utf8_and_deep_nesting_in_real_events(format, key, nasty, depth, points):
    # Every string value of that key in a real stream replaced by the nasty bytes, and one event nested
    # ``depth`` levels deep (orjson's limit is 1024: deeper is malformed, not a crash).
    body = fake_provider.body(format, "interleaved")
    body = body.replace(b'"' + key.encode() + b'":"', b'"' + key.encode() + b'":"' + nasty)
    deep = b'data: {"choices":' + b"[" * depth + b"]" * depth + b"}\n\n"
    through_the_callable(format, cut(deep + body + deep, points))
