"""Vertex's streamed function-call arguments (`partialArgs`: one value at a JSON path per part, a string
continued across parts): any arguments object, sent leaf by leaf with its strings cut in pieces, is rebuilt
exactly (objects and arrays nested, keys that need the bracket form, numbers, booleans, nulls)."""

from __future__ import annotations

import json
import re

from hypothesis import example, given, settings
from hypothesis import strategies as st

from accumulator import analyze

KEYS = st.sampled_from(["a", "b", "city", "x1", "with space", "dot.ted", "0"])
LEAVES = st.one_of(
    st.text("ab é{}\"'", max_size=6),
    st.integers(-1000, 1000),
    st.booleans(),
    st.none(),
)
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=3), st.dictionaries(KEYS, inner, min_size=1, max_size=3)
    ),
    max_leaves=8,
)
ARGUMENTS = st.dictionaries(KEYS, VALUES, min_size=1, max_size=4)
PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")


def leaves(value, path="$"):
    """(JSON path, leaf) in document order."""
    if isinstance(value, dict):
        for key, item in value.items():
            step = f".{key}" if PLAIN.match(key) else f"['{key}']"
            yield from leaves(item, path + step)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from leaves(item, f"{path}[{index}]")
    else:
        yield path, value


def part(path: str, leaf, more: bool) -> dict:
    if isinstance(leaf, str):
        field = {"stringValue": leaf}
    elif isinstance(leaf, bool):
        field = {"boolValue": leaf}
    elif leaf is None:
        field = {"nullValue": None}
    else:
        field = {"numberValue": leaf}
    return {"jsonPath": path, **field, **({"willContinue": True} if more else {})}


def stream(arguments: dict, cuts) -> bytes:
    def event(call: dict, finish: bool = False) -> bytes:
        candidate = {"content": {"role": "model", "parts": [{"functionCall": call}]}}
        if finish:
            candidate["finishReason"] = "STOP"
        return b"data: " + json.dumps({"candidates": [candidate]}).encode() + b"\r\n\r\n"

    out = [event({"name": "act", "willContinue": True})]
    for path, leaf in leaves(arguments):
        pieces = [leaf]
        if isinstance(leaf, str) and len(leaf) > 1:
            cut = cuts.draw(st.integers(1, len(leaf) - 1))
            pieces = [leaf[:cut], leaf[cut:]]
        for n, piece in enumerate(pieces):
            out.append(event({"partialArgs": [part(path, piece, n < len(pieces) - 1)], "willContinue": True}))
    out.append(event({}, finish=True))
    return b"".join(out)


@settings(max_examples=300, deadline=None)
@given(ARGUMENTS, st.data())
# Found by this test: a key of digits was read as an index wherever the path held that index elsewhere
# (the first built [[null]]; the second put an integer key in an object, and the analysis raised).
@example({"a": [{"0": None}]}, st.data())
@example({"0": [""]}, st.data())
def test_any_arguments_sent_leaf_by_leaf_are_rebuilt_exactly(arguments, cuts):
    result = analyze(stream(arguments, cuts), "gemini")
    [call] = result["choices"][0]["tool_calls"]
    assert call["name"] == "act" and json.loads(call["arguments"]) == arguments
    assert not [w for w in result["warnings"] if w["severity"] == "warning"]


def test_an_index_into_an_object_is_left_out_and_raises_nothing():
    body = stream({"a": 1}, None).replace(b'"$.a"', b'"$[0]"')
    result = analyze(body, "gemini")
    [call] = result["choices"][0]["tool_calls"]
    assert json.loads(call["arguments"] or "{}") == {}


def test_a_path_that_is_not_a_json_path_is_left_out():
    body = stream({"a": 1}, None).replace(b'"$.a"', b'"a"')
    [call] = analyze(body, "gemini")["choices"][0]["tool_calls"]
    assert json.loads(call["arguments"] or "{}") == {}


def _event(obj: dict) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\r\n\r\n"


def _candidate(index: int, parts: list, finish: str | None = None) -> dict:
    out = {"index": index, "content": {"role": "model", "parts": parts}}
    return {**out, "finishReason": finish} if finish else out


def test_candidates_keep_their_own_calls_thoughts_and_ends():
    body = b"".join(
        _event(obj)
        for obj in (
            {"modelVersion": "g-1", "responseId": "r1", "candidates": [
                "odd",
                _candidate(0, [{"text": "Plan", "thought": True}, {"text": ""}, "odd"]),
                _candidate(1, [{"functionCall": {"name": "b_one", "args": {"x": 1}}}]),
            ]},
            {"modelVersion": "g-1", "responseId": "r1", "usageMetadata": {"totalTokenCount": 3}, "candidates": [
                _candidate(0, [{"functionCall": {"name": "a_one", "willContinue": True}}]),
                _candidate(1, [{"functionCall": {"name": "b_two", "args": {}}},
                               {"functionCall": {"name": "b_three", "args": {"z": 1}, "willContinue": True}}]),
            ]},
            {"candidates": [_candidate(1, [{"functionCall": {}}])]},  # its args came whole: nothing was open
            {"candidates": [_candidate(0, [{"functionCall": {"partialArgs": [
                {"jsonPath": "$.q", "stringValue": "hi"}]}}])]},  # no willContinue: the call is closed
            {"candidates": [_candidate(0, [{"functionCall": {"partialArgs": [
                {"jsonPath": "$.q", "stringValue": "late"}]}}])]},  # nothing open: malformed
            {"usageMetadata": {"totalTokenCount": 9}, "candidates": [
                _candidate(0, [{"text": "Done."}], "STOP"), _candidate(1, [], "MAX_TOKENS")]},
        )
    )  # fmt: skip
    result = analyze(body, "gemini")
    first, second = result["choices"]
    assert (first["reasoning"], first["text"], first["finish_reason"]) == ("Plan", "Done.", "STOP")
    assert [(c["name"], json.loads(c["arguments"]), c["index"]) for c in first["tool_calls"]] == [
        ("a_one", {"q": "hi"}, 0)
    ]
    assert [(c["name"], json.loads(c["arguments"]), c["index"]) for c in second["tool_calls"]] == [
        ("b_one", {"x": 1}, 0),
        ("b_two", {}, 1),
        ("b_three", {"z": 1}, 2),
    ]
    assert second["finish_reason"] == "MAX_TOKENS"
    assert (result["model"], result["response_id"], result["usage"]["provider"]) == ("g-1", "r1", {"totalTokenCount": 9})
    assert [w["code"] for w in result["warnings"]] == ["malformed-event"]


def test_a_new_call_closes_one_left_open_and_a_cut_stream_shows_what_had_arrived():
    body = b"".join(
        _event(obj)
        for obj in (
            {"candidates": [_candidate(0, [{"functionCall": {"name": "one", "willContinue": True}}])]},
            {"candidates": [_candidate(0, [{"functionCall": {"partialArgs": [
                {"jsonPath": "$.a", "numberValue": 1}], "willContinue": True}}])]},
            {"candidates": [_candidate(0, [{"functionCall": {"name": "two", "willContinue": True}}])]},
            {"candidates": [_candidate(0, [{"functionCall": {"partialArgs": [
                {"jsonPath": "$.b", "boolValue": True}], "willContinue": True}}])]},
        )
    )  # fmt: skip
    result = analyze(body, "gemini")
    [choice] = result["choices"]
    assert [(c["name"], json.loads(c["arguments"])) for c in choice["tool_calls"]] == [
        ("one", {"a": 1}),
        ("two", {"b": True}),
    ]
    assert result["complete"] is False and "truncated-stream" in [w["code"] for w in result["warnings"]]
    error = analyze(_event({"error": {"code": 500, "message": "boom"}}), "gemini")
    assert error["warnings"][0]["code"] == "provider-error"
