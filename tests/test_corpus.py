"""Real recorded streams (../shared/corpus/recorded, third-party data read in place, never copied)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streams import CORPUS

from accumulator import StreamAccumulator, analyze, detect_format

FORMAT = "openai-chat"


def corpus_fixtures(api: str) -> list[dict]:
    index = CORPUS / "index.json"
    if not index.is_file():
        return []
    return [f for f in json.loads(index.read_text())["fixtures"] if f["api"] == api]


FIXTURES = corpus_fixtures(FORMAT)
needs_corpus = pytest.mark.skipif(
    not FIXTURES, reason=f"recorded corpus not found at {CORPUS} (it lives in the project's shared/ folder)"
)


def expected_calls(fixture: dict) -> dict[int, list[tuple]]:
    return {
        int(choice): [(c["id"], c["name"], c["arguments"]) for c in calls]
        for choice, calls in fixture["expected_tool_calls"].items()
    }


def actual_calls(result: dict) -> dict[int, list[tuple]]:
    return {
        c["index"]: [(t["id"], t["name"], t["arguments"]) for t in c["tool_calls"]] for c in result["choices"]
    }


@needs_corpus
@pytest.mark.parametrize("fixture", FIXTURES, ids=[f["file"] for f in FIXTURES])
def test_recorded_stream_reconstructs_with_no_false_alarm(fixture):
    body = (CORPUS / fixture["file"]).read_bytes()
    assert detect_format(body) == FORMAT
    result = analyze(body, FORMAT)
    assert actual_calls(result) == expected_calls(fixture)
    for choice in result["choices"]:
        for tool_call in choice["tool_calls"]:
            json.loads(tool_call["arguments"] or "{}")
    loud = [w for w in result["warnings"] if w["severity"] == "warning"]
    assert loud == [], "a clean real stream raised a warning: a false alarm"
    assert result["complete"] is True


@needs_corpus
def test_the_corpus_has_the_chat_streams_it_promises():
    assert len(FIXTURES) >= 10


@needs_corpus
def test_capture_cut_without_its_final_blank_line_is_read_with_a_note():
    fixture = next(f for f in FIXTURES if f["file"] == "vercel_openai_compat_anthropic_fallback_index1.sse")
    result = analyze((CORPUS / fixture["file"]).read_bytes(), FORMAT)
    assert [w["code"] for w in result["warnings"]] == ["unterminated-event"]
    assert result["complete"] is True  # the [DONE] in that last event was read


@needs_corpus
@settings(max_examples=200, deadline=None)
@given(st.data())
def test_any_chunking_gives_the_same_result(data):
    fixture = data.draw(st.sampled_from(FIXTURES))
    body = (CORPUS / fixture["file"]).read_bytes()
    cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=60)))
    accumulator = StreamAccumulator(FORMAT)
    for a, b in zip([0, *cuts], [*cuts, len(body)]):
        accumulator.feed(body[a:b])
    assert accumulator.finish() == analyze(body, FORMAT)
