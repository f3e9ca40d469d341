"""Real recorded streams (../shared/corpus/recorded, third-party data read in place, never copied)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streams import CORPUS, HAVE_CORPUS, NO_CORPUS

from accumulator import StreamAccumulator, analyze, detect_format


def corpus_fixtures() -> list[dict]:
    if not HAVE_CORPUS:
        return []
    return json.loads((CORPUS / "index.json").read_text())["fixtures"]


FIXTURES = corpus_fixtures()
needs_corpus = pytest.mark.needs(bool(FIXTURES), NO_CORPUS)
# Without the corpus, one placeholder case per parametrized test, so that it is skipped (failed in CI) with
# the reason rather than collected as an empty parameter set.
CASES = FIXTURES or [{"file": "corpus-missing"}]

# Every warning each recorded stream earns besides the misroutes HAZARDS explains, in order, repeats
# included: a stream not named here earns none. The broken ones say how (index.json notes each defect);
# the captures cut without their final blank line earn the one informational note.
WARNINGS = {
    "anthropic_messages_tool_use.sse": ["unterminated-event"],
    "vercel_openai_compat_anthropic_fallback_index1.sse": ["unterminated-event"],
    # stop_reason max_tokens: the tool input JSON stops mid-value (and the capture's last event is cut).
    "anthropic_messages_truncated_tool_json.sse": ["unterminated-event", "invalid-arguments"],
    # A second message_start restarts block indexes at 0: two generations spliced, the first call cut off.
    "vercel_anthropic_spliced_message_start.sse": ["message-restart", "index-collision", "invalid-arguments"],
    # Origin defect kept as-is: the response.created and response.completed lines are not valid JSON.
    "vercel_responses_parallel_wrapper.sse": ["malformed-event", "malformed-event", "truncated-stream"],
}
# The hazard strategies each stream really breaks, from its documented wire quirk (docs/routing.md,
# the hazard strategies): every other strategy must rebuild it exactly, so a flag there would be a false alarm.
HAZARDS = {
    # Q4: continuation deltas carry id "" / name "": a client that lets them overwrite loses the id/name.
    "vercel_alibaba_qwen_empty_id.sse": {"last-wins"},
    "vercel_mistral_zai_glm_empty_name.sse": {"last-wins"},
    # Q20: the spliced second message reuses block index 1 for a new call: index-keyed clients merge them.
    "vercel_anthropic_spliced_message_start.sse": {
        "index-only",
        "id-then-index",
        "field-concat",
        "last-wins",
    },
}


def expected_calls(fixture: dict) -> dict[int, list[tuple]]:
    expected = fixture["expected_tool_calls"]
    if isinstance(expected, list):  # formats without choices: one list
        expected = {"0": expected}
    return {
        int(choice): [(c["id"], c["name"], c["arguments"]) for c in calls]
        for choice, calls in expected.items()
    }


def actual_calls(result: dict) -> dict[int, list[tuple]]:
    return {
        c["index"]: [(t["id"], t["name"], t["arguments"]) for t in c["tool_calls"]] for c in result["choices"]
    }


@needs_corpus
@pytest.mark.parametrize("fixture", CASES, ids=[f["file"] for f in CASES])
def test_recorded_stream_reconstructs_with_exactly_its_warnings(fixture):
    body = (CORPUS / fixture["file"]).read_bytes()
    format = fixture["api"]
    assert detect_format(body) == format
    result = analyze(body, format)
    assert actual_calls(result) == expected_calls(fixture)
    for choice in result["choices"]:
        for tool_call, expected in zip(
            choice["tool_calls"],
            fixture["expected_tool_calls"]
            if isinstance(fixture["expected_tool_calls"], list)
            else fixture["expected_tool_calls"][str(choice["index"])],
            strict=True,
        ):
            if expected.get("arguments_valid_json", True):
                json.loads(tool_call["arguments"] or "{}")
    hazards = HAZARDS.get(fixture["file"], set())
    broken = {name for name, v in result["compatibility"].items() if v["verdict"] == "breaks"}
    assert broken == hazards, "a strategy verdict that the stream's quirks do not explain"
    misroutes = [w["code"] for w in result["warnings"] if w["code"].endswith("-misroute")]
    assert misroutes == [f"{name}-misroute" for name in result["compatibility"] if name in hazards]
    expected = WARNINGS.get(fixture["file"], [])
    others = [w["code"] for w in result["warnings"] if not w["code"].endswith("-misroute")]
    assert others == expected, "a warning lost, or a false alarm on a real stream"
    assert result["complete"] is ("truncated-stream" not in expected)


@needs_corpus
def test_the_corpus_covers_the_formats_it_promises():
    assert {f["api"] for f in FIXTURES} >= {"openai-chat", "openai-responses", "anthropic-messages", "gemini"}
    assert len(FIXTURES) >= 20


@needs_corpus
def test_capture_cut_without_its_final_blank_line_is_read_with_a_note():
    for name in ("vercel_openai_compat_anthropic_fallback_index1.sse", "anthropic_messages_tool_use.sse"):
        fixture = next(f for f in FIXTURES if f["file"] == name)
        result = analyze((CORPUS / name).read_bytes(), fixture["api"])
        assert [w["code"] for w in result["warnings"]] == ["unterminated-event"]
        assert result["complete"] is True  # the end marker in that last event was read


@needs_corpus
@settings(max_examples=200, deadline=None)
@given(st.data())
def test_any_chunking_gives_the_same_result(data):
    fixture = data.draw(st.sampled_from(FIXTURES))
    body = (CORPUS / fixture["file"]).read_bytes()
    cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=60)))
    accumulator = StreamAccumulator(fixture["api"])
    for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True):
        accumulator.feed(body[a:b])
    assert accumulator.finish() == analyze(body, fixture["api"])


@needs_corpus
@pytest.mark.parametrize("fixture", CASES[:3] + CASES[-3:] if FIXTURES else CASES, ids=lambda f: f["file"])
def test_unknown_format_is_recognised_from_the_first_bytes(fixture):
    body = (CORPUS / fixture["file"]).read_bytes()
    accumulator = StreamAccumulator(None)
    for i in range(0, len(body), 5):
        accumulator.feed(body[i : i + 5])
    assert accumulator.finish() == analyze(body, fixture["api"])
