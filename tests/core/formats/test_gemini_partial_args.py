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
