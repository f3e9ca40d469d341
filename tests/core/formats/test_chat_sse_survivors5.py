"""OpenAI Chat chunks, SSE data lines and the rewriter's skip reasons: what a mutation run found untested (the
logic survivors of ``accumulator/formats/openai_chat.py``'s ``ChatCompletionsDialect._chunk_ops``, of
``accumulator/framing/sse.py``'s ``SseDecoder._add_data`` and of ``accumulator/rewrite/formats.py``'s
``skip_reason``, left after test_openai_chat_survivors3.py; see docs/mutation.md). Each test was checked by
applying the mutation it guards against to the source by hand and seeing it fail."""

from __future__ import annotations

import pytest
from streams import choice, chunk, codes, framed, sse

from accumulator import analyze
from accumulator.framing.sse import OVERSIZED, SseDecoder, SseEvent
from accumulator.rewrite import StreamRewriter

CHAT = "openai-chat"
USAGE = {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}


# --- ChatCompletionsDialect._chunk_ops: the response id, usage and choices a chunk names ------------------------


@pytest.mark.parametrize(
    "chunks",
    [
        # chunks that name no model: the id alone says who they are
        [
            {"id": "resp-1", "choices": [choice(content="Hi")]},
            {"id": "resp-2", "choices": [choice(0, "stop")]},
        ],
        # the same model throughout, the id changing
        [chunk(choice(content="Hi"), id="resp-1"), chunk(choice(0, "stop"), id="resp-2")],
    ],
    ids=["no-model", "same-model"],
)
def test_the_response_id_is_the_last_one_named_even_when_the_model_does_not_change(chunks):
    # _chunk_ops 23 (an id's change alone no longer reported)
    assert analyze(sse(*chunks), CHAT)["response_id"] == "resp-2"


@pytest.mark.parametrize("late", [{}, [1], "none"], ids=["empty-object", "list", "string"])
def test_a_later_usage_that_is_empty_or_not_an_object_leaves_the_usage_read_before(late):
    # _chunk_ops 39 (an empty or non-object usage taken as the stream's usage)
    body = sse(chunk(choice(content="Hi"), usage=USAGE), chunk(choice(0, "stop"), usage=late))
    result = analyze(body, CHAT)
    assert result["usage"]["provider"] == USAGE
    assert (result["usage"]["input"], result["usage"]["output"]) == (3, 1)


@pytest.mark.parametrize("choices", [5, True], ids=["number", "true"])
def test_choices_that_are_not_a_list_are_skipped(choices):
    # _chunk_ops 71 (a truthy non-list walked as the choices: iterating a number raised)
    body = sse(
        chunk(choice(content="Hi")), {"id": "chatcmpl-test", "choices": choices}, chunk(choice(0, "stop"))
    )
    result = analyze(body, CHAT)
    assert codes(result) == []
    assert (result["choices"][0]["text"], result["choices"][0]["finish_reason"]) == ("Hi", "stop")


# --- SseDecoder._line: the size cap on "data:" lines without the space (and at end of input) ------------------
# (An event's size is its lines, each with one byte for its end: "data:" and 15 bytes and an LF are 21.)


@pytest.mark.parametrize(
    ("size", "expected"),
    [(15, [OVERSIZED]), (14, [SseEvent(None, b"z" * 14, None)])],
    ids=["over-cap", "at-cap"],
)
def test_a_data_line_without_its_space_is_held_to_the_cap_at_its_exact_bound(size, expected):
    # (once _add_data's) len - 1: the line at the cap kept; >=: the line under it dropped;
    # _drop_event(None): the decoder raised
    assert framed(SseDecoder(20), b"data:" + b"z" * size + b"\n\n") == expected


def test_data_lines_without_their_space_add_up_toward_the_cap():
    # (once _add_data's) = : each line counted alone; -= : the count going down
    body = b"data:" + b"a" * 6 + b"\ndata:" + b"b" * 6 + b"\n\ndata:after\n\n"  # 12 + 12 counted
    assert framed(SseDecoder(20), body) == [OVERSIZED, SseEvent(None, b"after", None)]


def test_data_lines_under_the_cap_together_are_one_event():
    body = b"data:" + b"a" * 4 + b"\ndata:" + b"b" * 4 + b"\n\n"  # 10 + 10 counted: not over 20
    assert framed(SseDecoder(20), body) == [SseEvent(None, b"a" * 4 + b"\n" + b"b" * 4, None)]


# --- skip_reason: only split-names is refused for a name that arrives whole ---------------------------------------


@pytest.mark.parametrize(
    ("fmt", "start"), [("anthropic-messages", "content_block_start"), ("cohere-v2", "tool-call-start")]
)
def test_the_other_edits_are_refused_for_having_no_id_or_name_not_for_a_whole_name(fmt, start):
    # skip_reason 22 (every edit told the name arrives whole)
    report = StreamRewriter(fmt, inject=["split-names", "repeat-names", "collide-index"]).report()
    reasons = {entry["name"]: entry["reason"] for entry in report["skipped"]}
    assert reasons["split-names"].startswith(f"the name arrives whole in {start}")
    for name in ("repeat-names", "collide-index"):
        assert reasons[name].startswith("a shape of openai-chat streams")
        assert reasons[name].endswith("alone, with no id or name")
