"""The stream rewriter (accumulator.rewrite): injections send a client hostile shapes on purpose, repairs make
a stream safe for a fragile client, and either way the stream stays valid and means the same to a correct
client (checked by rebuilding it by identity with ``analyze``). Hypothesis runs a fixed, derandomized set,
as tests/core/test_fuzz.py does; ``TOOLCALL_LENS_FUZZ=20000`` hunts longer."""

from __future__ import annotations

import collections
import gzip
import hashlib
import json
import os
import struct
import tracemalloc
import zlib

import brotli
import fake_provider
import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from rewriting import rewrite
from streams import DATA, invoke_frames, named_sse

from accumulator import analyze
from accumulator.boundaries import hostile_cuts
from accumulator.decoding import ContentDecoder, ContentEncoder
from accumulator.rewrite import BREAKING_INJECTIONS, INJECTIONS, REPAIRS, StreamRewriter, reorder, supported
from accumulator.rewrite.events import sse_event

try:
    from compression import zstd  # type: ignore[import-not-found]
except ImportError:
    from backports import zstd

EXAMPLES = int(os.environ.get("TOOLCALL_LENS_FUZZ", "120"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not os.environ.get("TOOLCALL_LENS_FUZZ"),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

FORMATS = fake_provider.FORMATS
FRAGMENTED = tuple(f for f in FORMATS if f not in ("gemini", "ollama-chat"))
SUPPORT = {
    "openai-chat": set(INJECTIONS) | set(REPAIRS),
    "openai-responses": {"interleave", "serialize", "rechunk"},
    "anthropic-messages": {"interleave", "serialize", "rechunk"},
    "bedrock-converse": {"interleave", "serialize", "rechunk"},
    "bedrock-invoke": {"interleave", "serialize", "rechunk"},
    "cohere-v2": {"interleave", "serialize", "rechunk"},
    "gemini": {"rechunk"},
    "ollama-chat": {"rechunk"},
}
# What keeps a stream's meaning: all but the injections that break it on purpose (seed-args, tested below).
RESHAPING = {fmt: names - set(BREAKING_INJECTIONS) for fmt, names in SUPPORT.items()}
# Warnings a rewrite must never add: they would mean it broke the stream.
BROKEN = {
    "malformed-event",
    "orphan-delta",
    "truncated-stream",
    "invalid-arguments",
    "unterminated-event",
    "arguments-mismatch",
    "message-restart",
    "invalid-utf8",
}


def scenarios(fmt: str) -> list[str]:
    return [name for name in fake_provider.FORMAT_SCENARIOS[fmt] if name != "gated"]


def rewritten(fmt: str, body: bytes, names=(), **options) -> bytes:
    return b"".join(rewrite(fmt, body, names, **options)[0])


def cut_at(body: bytes, points) -> list[bytes]:
    marks = sorted({p % (len(body) + 1) for p in points})
    return [body[a:b] for a, b in zip([0, *marks], [*marks, len(body)], strict=True)]


def events_of(fmt: str, body: bytes) -> list[bytes]:
    """A well-formed body's events, each with its exact bytes (an independent, simple splitter)."""
    if fmt.startswith("bedrock"):
        out, pos = [], 0
        while pos < len(body):
            (total,) = struct.unpack_from(">I", body, pos)
            out.append(body[pos : pos + total])
            pos += total
        return out
    sep = b"\r\n\r\n" if b"\r\n" in body else b"\n\n"
    *events, rest = body.split(sep)
    assert rest == b""
    return [event + sep for event in events]


def payload(event: bytes) -> dict:
    return orjson.loads(event.split(b"data: ", 1)[1].split(b"\n")[0])


def calls(result: dict) -> list[tuple]:
    return [(c["id"], c["name"], c["arguments"]) for ch in result["choices"] for c in ch["tool_calls"]]


def meaning(result: dict) -> dict:
    """What a correct client gets from a stream: calls, text, finish, usage, errors, completeness."""
    return {
        "choices": [
            (
                ch["index"],
                ch["text"],
                ch["reasoning"],
                ch["refusal"],
                ch["finish_reason"],
                calls({"choices": [ch]}),
            )
            for ch in result["choices"]
        ],
        "usage": result["usage"],
        "error": result["error"],
        "complete": result["complete"],
        "model": result["model"],
    }


def codes(result: dict) -> set[str]:
    return {w["code"] for w in result["warnings"]}


def verdict(result: dict, strategy: str) -> str:
    return result["compatibility"][strategy]["verdict"]


def assert_same_meaning(fmt: str, before: bytes, after: bytes) -> dict:
    old, new = analyze(before, fmt), analyze(after, fmt)
    assert meaning(new) == meaning(old)
    assert not (codes(new) - codes(old)) & BROKEN, codes(new) - codes(old)
    return new


# -- what applies where --------------------------------------------------------------------------------------


def test_the_support_table():
    for fmt in FORMATS:
        assert supported(fmt) == SUPPORT[fmt], fmt
    assert supported("no-such-format") == frozenset()


@pytest.mark.parametrize("fmt", FORMATS)
def test_what_does_not_apply_is_skipped_with_a_reason_and_the_rest_still_runs(fmt):
    body = fake_provider.body(fmt, "sequential")
    out, report = rewrite(fmt, body, [*INJECTIONS, *REPAIRS])
    assert report["inject"] == [n for n in INJECTIONS if n in SUPPORT[fmt]]
    assert report["repair"] == [n for n in REPAIRS if n in SUPPORT[fmt]]
    skipped = {entry["name"]: entry["reason"] for entry in report["skipped"]}
    assert set(skipped) == (set(INJECTIONS) | set(REPAIRS)) - SUPPORT[fmt]
    assert all(isinstance(reason, str) and reason and "\n" not in reason for reason in skipped.values())
    out, report = rewrite(fmt, body, [n for n in (*INJECTIONS, *REPAIRS) if n not in BREAKING_INJECTIONS])
    assert_same_meaning(fmt, body, b"".join(out))


def test_skip_reasons_say_why():
    report = rewrite("anthropic-messages", b"", ["split-names", "reindex"])[1]
    reasons = {entry["name"]: entry["reason"] for entry in report["skipped"]}
    assert "content_block_start" in reasons["split-names"]
    assert "a repair for openai-chat streams" in reasons["reindex"]
    report = rewrite("gemini", b"", ["interleave"])[1]
    assert "whole" in report["skipped"][0]["reason"]


def test_unknown_names_are_refused():
    with pytest.raises(ValueError):
        StreamRewriter("openai-chat", inject=["serialize"])  # a repair, not an injection
    with pytest.raises(ValueError):
        StreamRewriter("openai-chat", repair=["shuffle"])
    with pytest.raises(ValueError):
        StreamRewriter("no-such-format")


# -- every transformation keeps the stream's meaning ---------------------------------------------------------


def name_sets(fmt: str) -> list[list[str]]:
    """Each transformation the format supports alone, then all of them together (those that keep the
    stream's meaning)."""
    singles = [[name] for name in sorted(RESHAPING[fmt])]
    return singles + ([sorted(RESHAPING[fmt])] if len(singles) > 1 else [])


CASES = [(fmt, scenario, names) for fmt in FORMATS for scenario in scenarios(fmt) for names in name_sets(fmt)]


@pytest.mark.parametrize(
    ("fmt", "scenario", "names"), CASES, ids=lambda v: "+".join(v) if type(v) is list else v
)
def test_every_transformation_keeps_the_stream_valid_and_its_meaning(fmt, scenario, names):
    body = fake_provider.body(fmt, scenario)
    out, report = rewrite(fmt, body, names)
    new = assert_same_meaning(fmt, body, b"".join(out))
    assert report["stopped"] is None
    assert report["skipped"] == []
    if scenario not in ("truncated", "error-midstream"):
        expected = [
            (c["id"], c["name"], as_json(c["arguments"])) for c in fake_provider.expected_calls(scenario, fmt)
        ]
        assert [(i, n, as_json(a)) for i, n, a in calls(new)] == expected


def as_json(arguments: str):
    """The value of a call's JSON arguments; a custom tool's (a patch) as they are."""
    try:
        return orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return arguments


# -- each transformation does what it says -------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FRAGMENTED)
def test_interleave_sends_sequential_calls_round_robin(fmt):
    body = fake_provider.body(fmt, "sequential")
    out, report = rewrite(fmt, body, ["interleave"])
    before, after = analyze(body, fmt), assert_same_meaning(fmt, body, b"".join(out))
    assert verdict(before, "recency") == "ok"
    assert verdict(after, "recency") == "breaks"
    assert all(call["interleaved"] for call in after["choices"][0]["tool_calls"])
    assert report["calls_reordered"] == 2
    assert report["held_events_max"] > 0
    old, new = events_of(fmt, body), events_of(fmt, b"".join(out))
    if fmt == "openai-responses":
        # Only sequence_number was renumbered (strictly increasing, as many as before).
        numbers = [payload(e)["sequence_number"] for e in new]
        assert numbers == sorted(numbers) == [payload(e)["sequence_number"] for e in old]
        strip = lambda events: sorted(orjson.dumps({**payload(e), "sequence_number": 0}) for e in events)
        assert strip(new) == strip(old)
    else:
        assert sorted(new) == sorted(old)  # the same events, byte for byte: only their order changed


def test_interleave_keeps_each_calls_order_and_starts_in_index_order():
    fmt = "anthropic-messages"
    out = events_of(fmt, rewritten(fmt, fake_provider.body(fmt, "sequential"), ["interleave"]))
    tool = [payload(e) for e in out if payload(e).get("index") in (1, 2)]
    kinds = [(e["type"], e["index"]) for e in tool]
    assert kinds[:2] == [("content_block_start", 1), ("content_block_start", 2)]
    assert kinds[2:4] == [("content_block_delta", 1), ("content_block_delta", 2)]  # round-robin
    for index in (1, 2):
        fragments = [e["delta"]["partial_json"] for e in tool if e["index"] == index and "delta" in e]
        original = [
            payload(e)["delta"]["partial_json"]
            for e in events_of(fmt, fake_provider.body(fmt, "sequential"))
            if payload(e).get("index") == index and "delta" in payload(e)
        ]
        assert fragments == original


@pytest.mark.parametrize("fmt", FRAGMENTED)
def test_serialize_repairs_interleaved_calls(fmt):
    body = fake_provider.body(fmt, "interleaved")
    out, report = rewrite(fmt, body, ["serialize"])
    before, after = analyze(body, fmt), assert_same_meaning(fmt, body, b"".join(out))
    assert verdict(before, "recency") == "breaks"
    assert verdict(after, "recency") == "ok"
    assert not any(call["interleaved"] for call in after["choices"][0]["tool_calls"])
    assert report["calls_reordered"] == 2
    assert report["repair"] == ["serialize"]


@pytest.mark.parametrize("fmt", FRAGMENTED)
def test_interleave_then_serialize_gives_a_serialized_stream_again(fmt):
    body = fake_provider.body(fmt, "sequential")
    after = assert_same_meaning(fmt, body, rewritten(fmt, body, ["interleave", "serialize"]))
    assert verdict(after, "recency") == "ok"
    assert not any(call["interleaved"] for call in after["choices"][0]["tool_calls"])


@pytest.mark.parametrize("fmt", FRAGMENTED)
def test_serialize_leaves_a_stream_that_needs_nothing_as_it_was(fmt):
    body = fake_provider.body(fmt, "sequential")
    out, report = rewrite(fmt, body, ["serialize"])
    assert b"".join(out) == body
    assert report["calls_reordered"] == 0


def test_split_names_sends_each_name_in_two_pieces():
    body = fake_provider.body("openai-chat", "sequential")
    out, report = rewrite("openai-chat", body, ["split-names"])
    after = assert_same_meaning("openai-chat", body, b"".join(out))
    assert "name-split" in codes(after)
    assert report["names_split"] == 2
    assert report["events_out"] == report["events_in"] + 2
    named = [
        entry["function"]["name"]
        for event in events_of("openai-chat", b"".join(out))[:-1]
        for choice in payload(event)["choices"]
        for entry in choice["delta"].get("tool_calls", ())
        if "name" in entry.get("function", {})
    ]
    assert named == ["get_w", "eather", "get_", "time"]
    # The chunks without a name are untouched, byte for byte.
    kept = [e for e in events_of("openai-chat", body) if b'"name"' not in e]
    assert all(e in events_of("openai-chat", b"".join(out)) for e in kept)


def _chat_events(*payloads: dict) -> bytes:
    return b"".join(b"data: " + orjson.dumps(p) + b"\n\n" for p in payloads) + b"data: [DONE]\n\n"


def _chunk(delta: dict, finish: str | None = None, index: int = 0) -> dict:
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": index, "delta": delta, "finish_reason": finish}],
    }


def _entry(index=None, id=None, name=None, arguments=None) -> dict:
    entry: dict = {} if index is None else {"index": index}
    if id is not None:
        entry.update(id=id, type="function")
    function = {k: v for k, v in (("name", name), ("arguments", arguments)) if v is not None}
    return {**entry, "function": function}


@pytest.mark.parametrize("name", ["aaaa", "ab", "abab", "x_x_x"])
def test_split_names_cuts_where_a_correct_client_still_rebuilds_the_name(name):
    body = _chat_events(
        _chunk({"tool_calls": [_entry(0, "call_1", name, "")]}),
        _chunk({"tool_calls": [_entry(0, arguments="{}")]}),
        _chunk({}, "tool_calls"),
    )
    out, report = rewrite("openai-chat", body, ["split-names"])
    assert calls(assert_same_meaning("openai-chat", body, b"".join(out))) == [("call_1", name, "{}")]
    assert report["names_split"] == 1


def test_repeat_names_puts_the_identity_on_every_fragment():
    body = fake_provider.body("openai-chat", "sequential")
    out, report = rewrite("openai-chat", body, ["repeat-names"])
    after = assert_same_meaning("openai-chat", body, b"".join(out))
    assert "name-repeated" in codes(after)
    assert verdict(after, "field-concat") == "breaks"
    entries = [
        entry
        for event in events_of("openai-chat", b"".join(out))[:-1]
        for choice in payload(event)["choices"]
        for entry in choice["delta"].get("tool_calls", ())
    ]
    assert len(entries) == 8
    assert all(e["id"] and e["type"] == "function" and e["function"]["name"] for e in entries)
    assert report["edits"]["repeat-names"] == 6


def test_collide_index_puts_every_call_on_index_0_with_its_id():
    body = fake_provider.body("openai-chat", "sequential")
    after = assert_same_meaning("openai-chat", body, rewritten("openai-chat", body, ["collide-index"]))
    assert "index-collision" in codes(after)
    assert verdict(analyze(body), "index-only") == "ok"
    assert verdict(after, "index-only") == "breaks"
    entries = [
        entry
        for event in events_of("openai-chat", rewritten("openai-chat", body, ["collide-index"]))[:-1]
        for choice in payload(event)["choices"]
        for entry in choice["delta"].get("tool_calls", ())
    ]
    assert {e["index"] for e in entries} == {0}
    assert [e["id"] for e in entries] == ["call_w1"] * 4 + ["call_t1"] * 4


@pytest.mark.parametrize("scenario", ["sequential", "interleaved"])
def test_reindex_after_collide_index_gives_the_original_stream_back(scenario):
    body = fake_provider.body("openai-chat", scenario)
    out, report = rewrite("openai-chat", body, ["collide-index", "reindex"])
    after = analyze(b"".join(out))
    assert verdict(after, "index-only") == "ok"
    assert "index-collision" not in codes(after)
    # Indices given back and the ids collide-index repeated dropped: byte for byte what the provider sent.
    assert b"".join(out) == body
    assert report["edits"]["reindex"] > 0


def test_reindex_repairs_a_provider_whose_calls_all_claim_index_0():
    body = fake_provider.body("openai-chat", "index-collision")
    before = analyze(body)
    after = assert_same_meaning("openai-chat", body, rewritten("openai-chat", body, ["reindex"]))
    for strategy in ("index-only", "field-concat", "last-wins", "id-then-index"):
        assert verdict(before, strategy) == "breaks"
        assert verdict(after, strategy) == "ok", strategy
    assert "index-collision" not in codes(after)


def test_reindex_drops_repeated_ids_and_names_for_field_concatenating_clients():
    body = fake_provider.body("openai-chat", "name-repeated")
    after = assert_same_meaning("openai-chat", body, rewritten("openai-chat", body, ["reindex"]))
    assert verdict(analyze(body), "field-concat") == "breaks"
    assert verdict(after, "field-concat") == "ok"
    assert "name-repeated" not in codes(after)


def test_reindex_maps_an_id_less_fragment_through_the_index_its_call_took_last():
    # Two calls on index 0 (distinct ids), each followed by id-less fragments: identity routing's rule.
    body = _chat_events(
        _chunk({"tool_calls": [_entry(0, "call_a", "f", '{"a":')]}),
        _chunk({"tool_calls": [_entry(0, arguments="1}")]}),
        _chunk({"tool_calls": [_entry(0, "call_b", "g", '{"b":')]}),
        _chunk({"tool_calls": [_entry(0, arguments="2}")]}),
        _chunk({}, "tool_calls"),
    )
    out = rewritten("openai-chat", body, ["reindex"])
    after = assert_same_meaning("openai-chat", body, out)
    assert calls(after) == [("call_a", "f", '{"a":1}'), ("call_b", "g", '{"b":2}')]
    assert verdict(after, "index-only") == "ok"
    indices = [
        entry["index"]
        for event in events_of("openai-chat", out)[:-1]
        for entry in payload(event)["choices"][0]["delta"].get("tool_calls", ())
    ]
    assert indices == [0, 0, 1, 1]


def test_serialize_sends_a_finish_that_carries_a_fragment_after_every_held_call():
    # The last chunk carries call 0's last fragment and the finish_reason (as Mistral and vLLM do).
    body = _chat_events(
        _chunk({"tool_calls": [_entry(0, "call_a", "f", "")]}),
        _chunk({"tool_calls": [_entry(1, "call_b", "g", "")]}),
        _chunk({"tool_calls": [_entry(1, arguments='{"b":2}')]}),
        _chunk({"tool_calls": [_entry(0, arguments='{"a":1}')]}, "tool_calls"),
    )
    before = analyze(body)
    out, report = rewrite("openai-chat", body, ["serialize"])
    after = assert_same_meaning("openai-chat", body, b"".join(out))
    assert verdict(before, "recency") == "breaks"
    assert verdict(after, "recency") == "ok"
    finishes = [
        i
        for i, e in enumerate(events_of("openai-chat", b"".join(out)))
        if b'"finish_reason":"tool_calls"' in e
    ]
    assert finishes == [len(events_of("openai-chat", b"".join(out))) - 2]  # last before [DONE]
    assert report["events_out"] == report["events_in"] + 1


def test_text_riding_with_a_fragment_keeps_its_place_among_the_text():
    body = _chat_events(
        _chunk({"tool_calls": [_entry(0, "call_a", "f", "")]}),
        _chunk({"tool_calls": [_entry(1, "call_b", "g", "")]}),
        _chunk({"content": "Hel", "tool_calls": [_entry(1, arguments="{}")]}),
        _chunk({"content": "lo"}),
        _chunk({"tool_calls": [_entry(0, arguments="{}")]}),
        _chunk({}, "tool_calls"),
    )
    for names in (["interleave"], ["serialize"]):
        after = assert_same_meaning("openai-chat", body, rewritten("openai-chat", body, names))
        assert after["choices"][0]["text"] == "Hello"


def test_several_choices_are_rewritten_each_by_its_own_calls():
    body = _chat_events(
        _chunk({"tool_calls": [_entry(0, "a0", "f", "")]}, index=0),
        _chunk({"tool_calls": [_entry(0, "b0", "g", "")]}, index=1),
        _chunk({"tool_calls": [_entry(1, "a1", "h", "")]}, index=0),
        _chunk({"tool_calls": [_entry(0, arguments='{"x":1}')]}, index=1),
        _chunk({"tool_calls": [_entry(0, arguments='{"y":2}')]}, index=0),
        _chunk({"tool_calls": [_entry(1, arguments='{"z":3}')]}, index=0),
        _chunk({}, "tool_calls", index=0),
        _chunk({}, "tool_calls", index=1),
    )
    for names in (
        ["interleave"],
        ["serialize"],
        ["collide-index", "reindex"],
        sorted(RESHAPING["openai-chat"]),
    ):
        assert_same_meaning("openai-chat", body, rewritten("openai-chat", body, names))


# -- rechunk -------------------------------------------------------------------------------------------------


def _boundaries(pieces: list[bytes]) -> set[int]:
    out, at = set(), 0
    for piece in pieces[:-1]:
        at += len(piece)
        out.add(at)
    return out


def test_rechunk_cuts_inside_data_and_inside_characters_and_sends_the_same_bytes():
    body = _chat_events(
        _chunk({"role": "assistant", "content": "Grüße aus Zürich — 東京 ✓"}),
        _chunk({"tool_calls": [_entry(0, "call_1", "wetter", '{"stadt": "Zü')]}),
        _chunk({"tool_calls": [_entry(0, arguments='rich 日本"}')]}),
        _chunk({}, "tool_calls"),
    )
    out, report = rewrite("openai-chat", body, ["rechunk"])
    assert b"".join(out) == body
    assert all(out)
    cuts = _boundaries(out)
    assert set(hostile_cuts(body)) <= cuts
    data_at = body.index(b"data:", 1)
    assert {data_at + 1, data_at + 4, data_at + 5} <= cuts  # d|ata, data|:, data:| (inside the field)
    lead = body.index("ü".encode())
    assert lead + 1 in cuts  # between a character's lead byte and its continuation
    assert body.index("東".encode()) + 2 in cuts
    assert report["inject"] == ["rechunk"]
    assert report["writes"] == len(out) > report["events_out"]
    assert_same_meaning("openai-chat", body, b"".join(out))


def test_rechunk_cuts_between_cr_and_lf():
    body = fake_provider.body("gemini", "sequential")  # Gemini's SSE ends lines with CRLF
    assert b"\r\n" in body
    out, _ = rewrite("gemini", body, ["rechunk"])
    assert b"".join(out) == body
    crlf = [i + 1 for i in range(len(body) - 1) if body[i : i + 2] == b"\r\n"]
    assert set(crlf) <= _boundaries(out)
    assert any(piece.endswith(b"\r") for piece in out)


@pytest.mark.parametrize("fmt", FORMATS)
def test_rechunk_alone_changes_no_byte(fmt):
    for scenario in scenarios(fmt):
        body = fake_provider.body(fmt, scenario)
        out, _ = rewrite(fmt, body, ["rechunk"])
        assert b"".join(out) == body
        if fmt not in ("gemini", "ollama-chat"):
            assert len(out) > len(events_of(fmt, body))  # every event is cut at least once


def test_rechunk_cuts_aws_frames_inside_their_prelude():
    fmt = "bedrock-converse"
    body = fake_provider.body(fmt, "sequential")
    out, _ = rewrite(fmt, body, ["rechunk"])
    assert b"".join(out) == body
    cuts = _boundaries(out)
    start = 0
    for frame in events_of(fmt, body):
        assert {start + 1, start + 8, start + 12, start + len(frame) - 4} <= cuts
        start += len(frame)


def test_rechunk_comes_last_so_rewritten_events_are_cut_too():
    body = fake_provider.body("openai-chat", "sequential")
    plain = rewritten("openai-chat", body, ["interleave", "split-names"])
    out, _ = rewrite("openai-chat", body, ["interleave", "split-names", "rechunk"])
    assert b"".join(out) == plain
    assert set(hostile_cuts(plain)) <= _boundaries(out)


# -- bytes that no transformation touches --------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FRAGMENTED)
def test_events_outside_the_calls_keep_their_bytes(fmt):
    body = fake_provider.body(fmt, "sequential")
    names = sorted(SUPPORT[fmt] - {"rechunk"})
    out = events_of(fmt, rewritten(fmt, body, names))
    untouched = {
        "openai-chat": [
            b"data: [DONE]",
            b'"role":"assistant"',
            b'"finish_reason":"tool_calls"',
            b'"usage":{',
        ],
        "openai-responses": [b"response.created", b"response.in_progress", b"response.reasoning_summary"],
        "anthropic-messages": [b"message_start", b'"ping"', b"message_delta", b"message_stop", b"thinking"],
        "bedrock-converse": [b"messageStart", b"messageStop", b"metadata"],
        "bedrock-invoke": [],
        "cohere-v2": [b"message-start", b"tool-plan-delta", b"message-end"],
    }[fmt]
    events = events_of(fmt, body)
    for marker in untouched:
        found = [e for e in events if marker in e]
        assert found, marker
        assert all(e in out for e in found), marker
    if fmt == "bedrock-invoke":
        assert events[0] in out and events[-1] in out


def test_comments_and_pings_pass_in_place_while_calls_are_held():
    body = fake_provider.body("openai-chat", "interleaved")
    events = events_of("openai-chat", body)
    events.insert(3, b": keep-alive\n\n")
    rewriter = StreamRewriter("openai-chat", inject=["interleave"])
    sent = [rewriter.feed(event) for event in events]
    assert sent[3] == [b": keep-alive\n\n"]  # out at once, although calls are held around it
    assert sent[2] == sent[4] == []
    out = b"".join(b"".join(s) for s in sent) + b"".join(rewriter.finish())
    assert_same_meaning("openai-chat", b"".join(events), out)


def test_nothing_waits_longer_than_needed():
    # serialize on calls that already come one after another: the call streams live, nothing waits.
    for fmt in ("anthropic-messages", "openai-responses", "cohere-v2", "bedrock-converse"):
        body = fake_provider.body(fmt, "sequential")
        rewriter = StreamRewriter(fmt, repair=["serialize"])
        for event in events_of(fmt, body):
            assert b"".join(rewriter.feed(event)) == event, fmt
        assert rewriter.report()["held_events_max"] == 0
    # Chat Completions has no end per call: the first call streams live, later ones wait for the run's end.
    fmt = "openai-chat"
    rewriter = StreamRewriter(fmt, repair=["serialize"])
    events = events_of(fmt, fake_provider.body(fmt, "sequential"))
    sent = [b"".join(rewriter.feed(event)) for event in events]
    assert sent[:5] == events[:5]
    assert sent[5:9] == [b""] * 4
    assert sent[9] == b"".join(events[5:10])
    # A partial event waits for its end, and only that.
    rewriter = StreamRewriter(fmt, inject=["split-names"])
    assert rewriter.feed(events[0][:10]) == []
    assert rewriter.feed(events[0][10:] + events[1][:5]) == [events[0]]


# -- robustness ----------------------------------------------------------------------------------------------

SAMPLES = [(fmt, scenario) for fmt in FORMATS for scenario in scenarios(fmt)]
NAME_SETS = st.sets(st.sampled_from([*INJECTIONS, *REPAIRS]))


@FUZZ
@given(st.sampled_from(SAMPLES), NAME_SETS, st.lists(st.integers(0, 1 << 16), max_size=30), st.booleans())
def test_the_output_does_not_depend_on_how_the_input_is_cut(sample, names, points, compressed):
    fmt, scenario = sample
    body = fake_provider.body(fmt, scenario)
    whole, _ = rewrite(fmt, body, names)
    if compressed:
        sent = gzip.compress(body)
        out, report = rewrite(fmt, sent, names, pieces=cut_at(sent, points), encoding="gzip")
        if not set(names) & SUPPORT[fmt]:
            assert b"".join(out) == sent and report["decoded"] is None  # nothing to do: not even decoded
            return
        assert report["decoded"] == "gzip" and report["reencoded"]
        # Re-encoded piece by piece: each piece decodes to the piece the plain body gives.
        decoder = zlib.decompressobj(wbits=31)
        out = [decoder.decompress(piece) for piece in out]
        out = [piece for piece in out if piece]
    else:
        out, report = rewrite(fmt, body, names, pieces=cut_at(body, points))
    assert b"".join(out) == b"".join(whole)
    if "rechunk" in names and fmt not in ("gemini", "ollama-chat"):
        assert out == whole  # cut per event: even the pieces are the same


@FUZZ
@given(
    st.binary(max_size=2048), st.lists(st.integers(0, 4096), max_size=16), st.sampled_from(FORMATS), NAME_SETS
)
@example(bytes(12), [], "bedrock-converse", {"interleave"})  # a prelude failing its CRC: the rewriter stops
def test_garbage_passes_unchanged(noise, points, fmt, names):
    # Garbage may stop the rewriter (an event-stream prelude failing its CRC, say): it then passes the rest.
    names = set(names) - {"rechunk"}
    out, report = rewrite(fmt, noise, names, pieces=cut_at(noise, points), may_stop=True)
    assert b"".join(out) == noise
    assert report["stopped"] is None or "internal error" not in report["stopped"]["reason"]


def mutated(body: bytes, edits) -> bytes:
    data = bytearray(body)
    for position, kind, value in edits:
        at = position % (len(data) + 1)
        if kind == 0 and at < len(data):
            data[at] ^= value[0] if value else 0xFF
        elif kind == 1:
            data[at:at] = value
        else:
            del data[at : at + 1 + (value[0] if value else 0) % 64]
    return bytes(data)


@FUZZ
@given(
    st.sampled_from(SAMPLES),
    NAME_SETS,
    st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 2), st.binary(max_size=8)), max_size=8),
    st.lists(st.integers(0, 1 << 16), max_size=16),
)
def test_mutated_bodies_never_raise_and_reordering_never_loses_a_byte(sample, names, edits, points):
    fmt, scenario = sample
    body = mutated(fake_provider.body(fmt, scenario), edits)
    out, report = rewrite(fmt, body, names, pieces=cut_at(body, points), may_stop=True)
    assert report["stopped"] is None or "internal error" not in report["stopped"]["reason"]
    analyze(b"".join(out), fmt)
    if fmt in ("anthropic-messages", "cohere-v2", "bedrock-converse", "bedrock-invoke"):
        # Only whole events move there: the output is a permutation of the input's bytes.
        assert collections.Counter(b"".join(out)) == collections.Counter(body)
    if not set(names) & SUPPORT[fmt] - {"rechunk"}:
        assert b"".join(out) == body


NAMES = st.sampled_from(["f", "aa", "abab", "get_weather", "x_x_x", "überprüfen"])


@st.composite
def call_scripts(draw):
    """Tool calls (name, argument fragments) and an arrival order that keeps each call's own order."""
    count = draw(st.integers(1, 4))
    calls = [(draw(NAMES), draw(st.lists(st.text(max_size=4), min_size=1, max_size=4))) for _ in range(count)]
    queues = [[(n, i) for i in range(1 + len(fragments))] for n, (_, fragments) in enumerate(calls)]
    order = []
    while any(queues):
        pick = draw(st.sampled_from([n for n, q in enumerate(queues) if q]))
        order.append(queues[pick].pop(0))
    texts = draw(st.lists(st.integers(0, len(order)), max_size=3))
    return calls, order, texts, draw(st.booleans()), draw(st.booleans())


def chat_stream(calls, order, texts, finish_carries, collided) -> bytes:
    """Chat Completions chunks; ``collided``: every call on index 0, its id on every fragment (Groq)."""
    chunks = []
    for position, (n, step) in enumerate(order):
        chunks += [_chunk({"content": f"t{position}"}) for t in texts if t == position]
        name, fragments = calls[n]
        index = 0 if collided else n
        if step == 0:
            chunks.append(_chunk({"tool_calls": [_entry(index, f"call_{n}", name, "")]}))
        else:
            entry = _entry(index, f"call_{n}" if collided else None, arguments=fragments[step - 1])
            chunks.append(_chunk({"tool_calls": [entry]}))
    if finish_carries:
        chunks[-1]["choices"][0]["finish_reason"] = "tool_calls"  # the last fragment rides with the finish
    else:
        chunks.append(_chunk({}, "tool_calls"))
    return _chat_events(*chunks)


@FUZZ
@given(
    call_scripts(),
    st.sets(st.sampled_from(sorted(RESHAPING["openai-chat"]))),
    st.lists(st.integers(0, 1 << 14)),
)
def test_any_chat_tool_stream_keeps_its_meaning_and_the_repairs_hold(script, names, points):
    body = chat_stream(*script)
    out, _ = rewrite("openai-chat", body, names, pieces=cut_at(body, points))
    after = assert_same_meaning("openai-chat", body, b"".join(out))
    if "split-names" not in names and "reindex" in names:
        # Its own index per call, no repeated id or name: every index-keyed client rebuilds the calls.
        assert verdict(after, "index-only") == verdict(after, "field-concat") == "ok"
        if "serialize" in names:
            assert verdict(after, "recency") == "ok"
    if not names & {"split-names", "repeat-names", "collide-index"} and not script[4]:
        if "serialize" in names:
            assert verdict(after, "recency") == "ok"
        assert verdict(after, "index-only") == "ok"


def anthropic_stream(calls, order, texts, _) -> bytes:
    events = [("message_start", {"message": {"id": "m", "model": "x", "content": [], "usage": {}}})]
    remaining = {n: len(fragments) for n, (_, fragments) in enumerate(calls)}
    for position, (n, step) in enumerate(order):
        if position in texts:
            events.append(("ping", {}))
        name, fragments = calls[n]
        if step == 0:
            block = {"type": "tool_use", "id": f"toolu_{n}", "name": name, "input": {}}
            events.append(("content_block_start", {"index": n, "content_block": block}))
        else:
            delta = {"type": "input_json_delta", "partial_json": fragments[step - 1]}
            events.append(("content_block_delta", {"index": n, "delta": delta}))
            remaining[n] -= 1
            if not remaining[n]:
                events.append(("content_block_stop", {"index": n}))
    events += [("message_delta", {"delta": {"stop_reason": "tool_use"}}), ("message_stop", {})]
    return named_sse(*events)


@FUZZ
@given(
    call_scripts(),
    st.sets(st.sampled_from(["interleave", "serialize", "rechunk"])),
    st.lists(st.integers(0, 1 << 14)),
)
def test_any_anthropic_tool_stream_keeps_its_meaning_and_serialize_holds(script, names, points):
    calls, order, texts, flag, _ = script
    # Anthropic opens blocks in index order: number the calls by when they start.
    starts = [n for n, step in order if step == 0]
    renumber = {old: new for new, old in enumerate(starts)}
    calls = [calls[old] for old in starts]
    order = [(renumber[n], step) for n, step in order]
    body = anthropic_stream(calls, order, texts, flag)
    out, _ = rewrite("anthropic-messages", body, names, pieces=cut_at(body, points))
    after = assert_same_meaning("anthropic-messages", body, b"".join(out))
    if "serialize" in names:
        assert verdict(after, "recency") == "ok"
    assert collections.Counter(b"".join(out)) == collections.Counter(body)


@pytest.mark.parametrize("fmt", FRAGMENTED)
def test_an_internal_error_passes_every_byte_not_yet_sent_unchanged(fmt, monkeypatch):
    body = fake_provider.body(fmt, "sequential")
    pushed = []
    original = reorder.Interleaver._add

    def failing(self, unit, role, key):
        pushed.append(unit)
        if len(pushed) == 6:
            raise RuntimeError("boom")
        return original(self, unit, role, key)

    monkeypatch.setattr(reorder.Interleaver, "_add", failing)
    events = events_of(fmt, body)
    out, report = rewrite(fmt, body, ["interleave"], pieces=events, may_stop=True)
    assert b"".join(out) == body  # what was held left as it came, the rest passed through
    assert "internal error" in report["stopped"]["reason"] and "boom" in report["stopped"]["reason"]


@pytest.mark.parametrize("fmt", ["anthropic-messages", "cohere-v2", "bedrock-converse", "bedrock-invoke"])
@pytest.mark.parametrize("compressed", [False, True])
def test_an_error_at_any_point_neither_loses_nor_repeats_a_byte(fmt, compressed, monkeypatch):
    body = fake_provider.body(fmt, "interleaved")
    original = reorder.Reorderer.push
    for fail_at in range(1, 2 * len(events_of(fmt, body)) + 2):
        seen = []

        def failing(self, unit, fail_at=fail_at, seen=seen):
            seen.append(unit)
            if len(seen) == fail_at:
                raise RuntimeError("boom")
            return original(self, unit)

        monkeypatch.setattr(reorder.Reorderer, "push", failing)
        sent = gzip.compress(body) if compressed else body
        options = {"encoding": "gzip", "reencode": False} if compressed else {}
        out, report = rewrite(
            fmt,
            sent,
            ["interleave", "serialize"],
            pieces=cut_at(sent, range(0, len(sent), 97)),
            **options,
            may_stop=True,
        )
        # Only whole events move in these formats: whatever failed where, every byte is there once.
        assert collections.Counter(b"".join(out)) == collections.Counter(body), fail_at
        assert (report["stopped"] is not None) == (fail_at <= len(seen)), fail_at


def test_an_internal_error_after_rewritten_events_neither_loses_nor_repeats_one(monkeypatch):
    body = fake_provider.body("openai-chat", "sequential")
    calls_made = []
    original = reorder.Serializer._add

    def failing(self, unit, role, key):
        calls_made.append(unit)
        if len(calls_made) == 7:  # while the second call is held
            raise RuntimeError("boom")
        return original(self, unit, role, key)

    monkeypatch.setattr(reorder.Serializer, "_add", failing)
    out, report = rewrite(
        "openai-chat",
        body,
        ["split-names", "serialize"],
        pieces=events_of("openai-chat", body),
        may_stop=True,
    )
    after = assert_same_meaning("openai-chat", body, b"".join(out))
    assert "name-split" in codes(after)  # the first call was sent rewritten, the rest as it came
    assert report["stopped"] is not None


# -- content encoding ----------------------------------------------------------------------------------------

COMPRESS = {
    "gzip": gzip.compress,
    "deflate": zlib.compress,
    "br": brotli.compress,
    "zstd": lambda data: zstd.compress(data),
}


@pytest.mark.parametrize("encoding", sorted(COMPRESS))
@pytest.mark.parametrize("fmt", ["openai-chat", "anthropic-messages", "bedrock-converse", "gemini"])
def test_compressed_input_is_sent_decoded_and_rewritten_the_same(fmt, encoding):
    body = fake_provider.body(fmt, "sequential")
    names = sorted(SUPPORT[fmt])
    sent = COMPRESS[encoding](body)
    pieces = cut_at(sent, range(0, len(sent), 5))
    out, report = rewrite(fmt, sent, names, pieces=pieces, encoding=encoding, reencode=False)
    assert b"".join(out) == rewritten(fmt, body, names)
    assert report["decoded"] == encoding and not report["reencoded"]
    assert StreamRewriter(fmt, inject=["rechunk"], encoding=encoding, reencode=False).decodes
    assert not StreamRewriter(fmt, inject=["rechunk"], encoding="identity").decodes


@pytest.mark.parametrize("encoding", [*sorted(COMPRESS), "gzip, br"])
@pytest.mark.parametrize("fmt", ["openai-chat", "anthropic-messages", "bedrock-converse", "gemini"])
def test_compressed_input_is_rewritten_and_encoded_again_each_piece_decodable_at_once(fmt, encoding):
    body = fake_provider.body(fmt, "sequential")
    names = sorted(SUPPORT[fmt])
    encoder = ContentEncoder(encoding)
    sent = b"".join([encoder.encode(body), encoder.finish()])
    out, report = rewrite(fmt, sent, names, pieces=cut_at(sent, range(0, len(sent), 5)), encoding=encoding)
    assert report["decoded"] == encoding and report["reencoded"]
    assert not StreamRewriter(fmt, inject=["rechunk"], encoding=encoding).decodes
    # The client's decoder gives each piece's rewritten bytes as soon as that piece arrives (every write is
    # flushed), and the whole decodes to the rewritten body.
    decoder = ContentDecoder(encoding, 1 << 30)
    decoded = [decoder.decode(piece) for piece in out]
    decoder.flush()
    assert decoder.error is None
    assert b"".join(decoded) == rewritten(fmt, body, names)
    assert sum(bool(d) for d in decoded) >= len(out) - 1  # only the encoder's end decodes to nothing


def test_a_bomb_is_rewritten_a_mebibyte_at_a_time_and_leaves_small():
    # 64 MiB of spaces after a few events, gzip: the rewriting stops at the event cap and passes the rest,
    # encoded again; no piece it returns is large, decoded or not.
    plain = fake_provider.events("openai-chat", "sequential")
    sent = b"".join(fake_provider.bomb_pieces(plain, "gzip", 64 * 2**20))
    rewriter = StreamRewriter("openai-chat", inject=["interleave"], encoding="gzip")
    largest = total = 0
    for start in range(0, len(sent), 65536):
        for piece in rewriter.feed(sent[start : start + 65536]):
            largest, total = max(largest, len(piece)), total + len(piece)
    for piece in rewriter.finish():
        largest, total = max(largest, len(piece)), total + len(piece)
    assert largest < 2**20 and total < 4 * len(sent), (largest, total, len(sent))
    assert rewriter.report()["stopped"] is not None


def test_when_nothing_applies_the_body_passes_as_it_came_still_encoded():
    sent = gzip.compress(fake_provider.body("gemini", "sequential"))
    rewriter = StreamRewriter("gemini", inject=["interleave"], repair=["serialize"], encoding="gzip")
    assert not rewriter.decodes
    assert b"".join(rewriter.feed(sent) + rewriter.finish()) == sent
    report = rewriter.report()
    assert report["decoded"] is None and report["inject"] == report["repair"] == []
    assert [entry["name"] for entry in report["skipped"]] == ["interleave", "serialize"]


def test_a_corrupt_compressed_body_passes_unchanged_and_says_so():
    body = bytearray(gzip.compress(fake_provider.body("openai-chat", "sequential")))
    body[40] ^= 0xFF
    out, report = rewrite("openai-chat", bytes(body), ["interleave"], encoding="gzip", may_stop=True)
    assert b"".join(out) == bytes(body)
    assert report["decoding_error"] and "gzip" in report["stopped"]["reason"]


def test_a_body_that_stops_decoding_midway_sends_what_decoded_rewritten_then_the_rest_raw():
    events = events_of("openai-chat", fake_provider.body("openai-chat", "sequential"))
    compressor = zlib.compressobj(wbits=31)
    pieces = [compressor.compress(e) + compressor.flush(zlib.Z_SYNC_FLUSH) for e in events]
    pieces[6] = b"\xff\xff\xff\xff"  # a deflate block of the reserved type: corrupt for sure
    out, report = rewrite(
        "openai-chat", b"", ["interleave"], pieces=pieces, encoding="gzip", reencode=False, may_stop=True
    )
    # Events 0-5 decoded and were rewritten as if the stream ended there (held ones released in a valid
    # order); from the corrupt piece on, the bytes pass as they came.
    prefix = rewritten("openai-chat", b"".join(events[:6]), ["interleave"])
    assert b"".join(out) == prefix + b"".join(pieces[6:])
    assert prefix != b"".join(events[:6])  # something was held and released interleaved
    assert "invalid block type" in report["decoding_error"]


def test_an_unsupported_encoding_passes_unchanged_and_is_not_decoded():
    body = b"\x1f\x8b whatever compress makes"
    rewriter = StreamRewriter("openai-chat", inject=["interleave"], encoding="compress")
    assert not rewriter.decodes
    assert b"".join(rewriter.feed(body) + rewriter.finish()) == body
    assert "compress" in rewriter.report()["stopped"]["reason"]
    assert rewriter.report()["decoded"] is None


# -- holding is bounded --------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FRAGMENTED)
def test_the_hold_cap_releases_everything_held_in_arrival_order(fmt):
    body = fake_provider.body(fmt, "sequential")
    out, report = rewrite(fmt, body, ["interleave"], max_held_bytes=1)
    assert report["released_early"] is True
    assert b"".join(out) == body  # released as soon as held: nothing moved, nothing lost
    out, report = rewrite(fmt, fake_provider.body(fmt, "interleaved"), ["serialize"], max_held_bytes=1)
    assert report["released_early"] is True
    assert_same_meaning(fmt, fake_provider.body(fmt, "interleaved"), b"".join(out))


@pytest.mark.parametrize("names", [["interleave"], ["serialize"], ["interleave", "serialize"]])
def test_a_cap_between_holds_the_run_partly_and_keeps_the_meaning(names):
    for fmt in FRAGMENTED:
        body = fake_provider.body(fmt, "interleaved")
        held = rewrite(fmt, body, names)[1]["held_bytes_max"]
        out, report = rewrite(fmt, body, names, max_held_bytes=held // 2)
        assert report["released_early"] is True
        assert report["held_bytes_max"] > held // 2
        assert_same_meaning(fmt, body, b"".join(out))


def test_an_oversized_event_stops_the_rewriting_and_passes_unchanged():
    body = fake_provider.body("openai-chat", "interleaved")
    out, report = rewrite("openai-chat", body, ["interleave"], max_event_bytes=100, may_stop=True)
    assert b"".join(out) == body
    assert "cap" in report["stopped"]["reason"]


def test_a_corrupt_frame_prelude_stops_the_rewriting_and_passes_the_rest_unchanged():
    fmt = "bedrock-converse"
    events = events_of(fmt, fake_provider.body(fmt, "interleaved"))
    broken = bytearray(events[2])
    broken[2] ^= 0xFF  # the prelude's CRC no longer matches
    body = b"".join(events[:2]) + bytes(broken) + b"".join(events[3:])
    out, report = rewrite(fmt, body, ["serialize"], may_stop=True)
    assert b"".join(out) == body
    assert "prelude" in report["stopped"]["reason"]


# -- the report ----------------------------------------------------------------------------------------------


def test_the_report_names_what_was_done():
    body = fake_provider.body("openai-chat", "sequential")
    _, report = rewrite("openai-chat", body, ["interleave", "split-names", "rechunk", "serialize"])
    assert report["format"] == "openai-chat"
    assert report["inject"] == ["interleave", "split-names", "rechunk"]
    assert report["repair"] == ["serialize"]
    assert report["decoded"] is None
    assert report["names_split"] == 2
    assert report["events_in"] == len(events_of("openai-chat", body))
    assert report["events_out"] == report["events_in"] + 2
    assert report["released_early"] is False
    assert report["stopped"] is None
    assert report["bytes_in"] == len(body)
    assert set(report) >= {"held_events_max", "held_bytes_max", "calls_reordered", "writes", "skipped"}


# -- the raw-event layer -------------------------------------------------------------------------------------


def test_a_rewritten_sse_event_keeps_its_other_lines_and_line_ends():
    template = b'event: e\r\nid: 7\r\n: note\r\ndata: {"a":1}\r\n\r\n'
    assert sse_event(template, b'{"a":2}') == b'event: e\r\nid: 7\r\n: note\r\ndata: {"a":2}\r\n\r\n'
    assert sse_event(b"data:x\ndata:y\n\n", b"z") == b"data:z\n\n"


def test_invoke_frames_are_reordered_whole_by_the_anthropic_event_inside():
    events = [
        {"type": "message_start", "message": {"id": "m", "model": "x", "content": [], "usage": {}}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "t0", "name": "f", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"a":'},
        },
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": "t1", "name": "g", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"b":2}'},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": "1}"},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_stop", "index": 1},
        {"type": "message_stop"},
    ]
    body = invoke_frames(*events)
    out = rewritten("bedrock-invoke", body, ["serialize"])
    after = assert_same_meaning("bedrock-invoke", body, out)
    assert verdict(analyze(body, "bedrock-invoke"), "recency") == "breaks"
    assert verdict(after, "recency") == "ok"
    assert sorted(events_of("bedrock-invoke", out)) == sorted(events_of("bedrock-invoke", body))


def test_a_text_block_between_tool_blocks_ends_the_run():
    body = named_sse(
        ("message_start", {"message": {"id": "m", "model": "x", "content": [], "usage": {}}}),
        (
            "content_block_start",
            {"index": 0, "content_block": {"type": "tool_use", "id": "a", "name": "f", "input": {}}},
        ),
        ("content_block_delta", {"index": 0, "delta": {"type": "input_json_delta", "partial_json": "{}"}}),
        ("content_block_stop", {"index": 0}),
        ("content_block_start", {"index": 1, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"index": 1, "delta": {"type": "text_delta", "text": "hi"}}),
        ("content_block_stop", {"index": 1}),
        (
            "content_block_start",
            {"index": 2, "content_block": {"type": "tool_use", "id": "b", "name": "g", "input": {}}},
        ),
        ("content_block_delta", {"index": 2, "delta": {"type": "input_json_delta", "partial_json": "{}"}}),
        ("content_block_stop", {"index": 2}),
        ("message_stop", {}),
    )
    out = rewritten("anthropic-messages", body, ["interleave"])
    assert out == body  # two runs of one call each: nothing to interleave, and the text stays between
    assert_same_meaning("anthropic-messages", body, out)


def test_an_unfinished_last_event_leaves_last_and_unchanged():
    body = fake_provider.body("openai-chat", "interleaved")
    cut = body[: body.rindex(b"data: {") + 30]  # the connection dropped inside an event
    out, report = rewrite("openai-chat", cut, ["serialize"])
    assert b"".join(out).endswith(cut[cut.rindex(b"data: {") :])
    assert collections.Counter(b"".join(out)) == collections.Counter(cut)
    assert report["events_in"] == report["events_out"]


# -- a stream that never ends --------------------------------------------------------------------------------


@pytest.mark.heavy
@pytest.mark.parametrize("kind", ["endless-calls", "endless-arguments"])
@pytest.mark.parametrize(
    ("inject", "repair"),
    [
        ((), ("serialize",)),
        (("interleave",), ()),
        (("split-names", "repeat-names", "collide-index"), ("reindex",)),
    ],
)
def test_a_stream_that_never_ends_holds_bounded_memory(kind, inject, repair):
    # 16 MB of a never-ending stream, with a 1 MiB hold cap: held units stay under it, past 1,000 calls
    # the rest passes as it is, and nothing else grows with the stream. Reordering one call, or whole
    # calls one per event, changes no byte.
    rewriter = StreamRewriter("openai-chat", inject=inject, repair=repair, max_held_bytes=2**20)
    sent, out = hashlib.sha256(), hashlib.sha256()
    tracemalloc.start()
    try:
        total = 0
        for event in fake_provider.endless(kind):
            sent.update(event)
            for piece in rewriter.feed(event):
                out.update(piece)
            total += len(event)
            if total > 16 * 2**20:
                break
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    for piece in rewriter.finish():
        out.update(piece)
    assert peak < 12 * 2**20, peak
    report = rewriter.report()
    if kind == "endless-calls":
        assert "more than 1000 tool calls" in report["stopped"]["reason"]
    if not inject:
        assert out.hexdigest() == sent.hexdigest()


@pytest.mark.parametrize("where", ["both", "event line only", "payload only"])
def test_cohere_events_are_known_by_their_event_line_or_their_payload_type(where):
    body = (DATA / "cohere_v2_parallel.sse").read_bytes()
    lines = []
    for line in body.split(b"\n"):
        if where == "payload only" and line.startswith(b"event:"):
            continue
        if where == "event line only" and line.startswith(b"data: {"):
            obj = json.loads(line[6:])
            obj.pop("type", None)
            line = b"data: " + json.dumps(obj).encode()
        lines.append(line)
    stream = b"\n".join(lines)
    rewriter = StreamRewriter("cohere-v2", inject=["interleave"])
    out = b"".join([*rewriter.feed(stream), *rewriter.finish()])
    assert rewriter.report()["calls_reordered"] == 2, where
    assert out != stream


@pytest.mark.parametrize("names", [["interleave"], ["serialize"]])
def test_a_chunk_carrying_the_last_fragment_and_the_finish_is_split_around_the_held_calls(names):
    # Two choices (n=2): choice 0's second call ends in the chunk that finishes both choices (an empty
    # content beside its fragment); choice 1 has no call. The calls held must go out before that finish.
    last = {
        "id": "c",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [
            {"index": 0, "delta": {"content": "", "tool_calls": [_entry(1, arguments="}")]}, "finish_reason": "tool_calls"},
            {"index": 1, "delta": {}, "finish_reason": "stop"},
        ],
    }  # fmt: skip
    sequential = _chat_events(
        _chunk({"role": "assistant", "content": ""}),
        _chunk({"content": "done"}, index=1),
        _chunk({"tool_calls": [_entry(0, "call_a", "alpha", '{"a": ')]}),
        _chunk({"tool_calls": [_entry(0, arguments="1}")]}),
        _chunk({"tool_calls": [_entry(1, "call_b", "beta", '{"b": ')]}),
        _chunk({"tool_calls": [_entry(1, arguments="2")]}),
        last,
    )
    body = sequential if names == ["interleave"] else rewritten("openai-chat", sequential, ["interleave"])
    out, report = rewrite("openai-chat", body, names)
    result = assert_same_meaning("openai-chat", body, b"".join(out))
    first, second = result["choices"]
    assert [(c["id"], c["name"], c["arguments"]) for c in first["tool_calls"]] == [
        ("call_a", "alpha", '{"a": 1}'),
        ("call_b", "beta", '{"b": 2}'),
    ]
    assert (first["finish_reason"], second["finish_reason"], second["text"]) == (
        "tool_calls",
        "stop",
        "done",
    )
    assert report["calls_reordered"] > 0
    # The finish went out in a chunk of its own, after every fragment.
    finishes = [
        n
        for n, e in enumerate(events_of("openai-chat", b"".join(out)))
        if b'"tool_calls","index":0' in e or b'"finish_reason":"tool_calls"' in e
    ]
    fragments = [n for n, e in enumerate(events_of("openai-chat", b"".join(out))) if b'"arguments"' in e]
    assert max(fragments) < max(finishes)


def _responses_by_item_id(with_type: bool = True) -> bytes:
    """Two calls one after the other; the argument deltas name their item by item_id alone; every event
    numbered, but for one ping; the type in the event line (and in the payload when ``with_type``)."""
    events = [("response.created", {"response": {"id": "r", "model": "m"}})]
    for n, (item_id, name) in enumerate((("fc_a", "alpha"), ("fc_b", "beta"))):
        item = {
            "type": "function_call",
            "id": item_id,
            "call_id": f"call_{name}",
            "name": name,
            "arguments": "",
        }
        events.append(("response.output_item.added", {"output_index": n, "item": item}))
        for piece in ('{"k": ', f'"{name}"', "}"):
            events.append(("response.function_call_arguments.delta", {"item_id": item_id, "delta": piece}))
        done = {**item, "arguments": f'{{"k": "{name}"}}'}
        events.append(("response.output_item.done", {"output_index": n, "item": done}))
    events.insert(1, ("ping", {}))
    events.append(("response.completed", {"response": {"id": "r", "status": "completed"}}))
    out, number = [], 0
    for kind, payload in events:
        body = dict(payload)
        if kind != "ping":
            number += 1
            body["sequence_number"] = number
        if with_type:
            body = {"type": kind, **body}
        out.append(b"event: " + kind.encode() + b"\ndata: " + json.dumps(body).encode() + b"\n\n")
    return b"".join(out)


@pytest.mark.parametrize("with_type", [True, False], ids=["typed", "event-line-only"])
def test_responses_deltas_named_by_item_id_alone_are_interleaved_and_renumbered(with_type):
    body = _responses_by_item_id(with_type)
    out, report = rewrite("openai-responses", body, ["interleave"])
    after = b"".join(out)
    result = assert_same_meaning("openai-responses", body, after)
    assert [(c["id"], c["arguments"]) for c in result["choices"][0]["tool_calls"]] == [
        ("call_alpha", '{"k": "alpha"}'),
        ("call_beta", '{"k": "beta"}'),
    ]
    assert report["calls_reordered"] == 2
    deltas = [
        payload(e).get("item_id") for e in events_of("openai-responses", after) if b"arguments.delta" in e
    ]
    assert deltas[:2] == ["fc_a", "fc_b"]  # round robin: the item ids routed them
    numbers = [
        payload(e)["sequence_number"] for e in events_of("openai-responses", after) if b"sequence_number" in e
    ]
    assert numbers == list(range(1, len(numbers) + 1)) and report["edits"]["sequence_number"] > 0
