"""The core and the rewriter: what a mutation run found untested (the logic survivors of
``accumulator/assembly.py``, ``result.py``, the formats' usage parts, ``rewrite/events.py``,
``rewrite/reorder.py`` and ``rewrite/rewriter.py``; see docs/mutation.md). Each test was checked by applying the
mutation it guards against to the source by hand and seeing it fail."""

from __future__ import annotations

import gzip
import json

import pytest
from schemas import check_result
from streams import call, calls_of, choice, chunk, sse, tool_chunk

from accumulator import analyze
from accumulator.rewrite import StreamRewriter

BOM = b"\xef\xbb\xbf"


def rewrite(fmt: str, body: bytes, inject=(), repair=(), **options) -> tuple[bytes, dict]:
    """The bytes a rewriter sends for ``body`` fed whole, and its report."""
    rewriter = StreamRewriter(fmt, inject=inject, repair=repair, **options)
    out = b"".join([*rewriter.feed(body), *rewriter.finish()])
    return out, rewriter.report()


def anthropic(*events: dict) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


START = {"type": "message_start", "message": {"id": "msg_1", "model": "claude-test", "content": []}}
END = [{"type": "message_delta", "delta": {"stop_reason": "tool_use"}}, {"type": "message_stop"}]


def tool(index: int) -> dict:
    block = {"type": "tool_use", "id": f"toolu_{index}", "name": f"f{index}", "input": {}}
    return {"type": "content_block_start", "index": index, "content_block": block}


def delta(index: int, fragment: str = "{}") -> dict:
    return {
        "type": "content_block_delta",
        "index": index,
        "delta": {"type": "input_json_delta", "partial_json": fragment},
    }


def stop(index: int) -> dict:
    return {"type": "content_block_stop", "index": index}


def text_block(index: int) -> list[dict]:
    return [
        {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": "and"}},
        stop(index),
    ]


def rebuilt(fmt: str, body: bytes) -> list[tuple]:
    return [(c["id"], c["name"], c["arguments"]) for ch in analyze(body, fmt)["choices"] for c in ch["tool_calls"]]


# --- rewrite/events.py: a body that starts with a BOM ----------------------------------------------------
# A fault these found: the first event's template carries the body's BOM, and every event made from it got
# one; a BOM further on starts a line a client does not read as data, and loses that event (here the second
# half of a split name and the call's arguments). sse_event mutant 4 (the BOM not taken off) made it raise.


@pytest.mark.parametrize(("inject", "repair"), [(["split-names"], []), (["split-names"], ["reindex"])])
def test_a_bom_stays_in_front_of_the_body_only_when_its_first_event_is_rewritten(inject, repair):
    body = BOM + sse(tool_chunk(call(3, "call_1", "lookup", '{"q": 1}')), chunk(choice(0, "tool_calls")))
    out, report = rewrite("openai-chat", body, inject, repair)
    assert report["stopped"] is None and report["edits"]["split-names"] == 1
    assert out.startswith(BOM) and out.count(BOM) == 1
    assert rebuilt("openai-chat", out) == [("call_1", "lookup", '{"q": 1}')]


def test_a_data_line_without_a_colon_is_a_data_line_of_the_rewritten_event():
    # "data" alone is an empty data line (the payload is "\n{...}"): _is_data_line mutant 6 read past it.
    first = tool_chunk(call(0, "call_1", "lookup", '{"q": 1}'))
    body = b"data\ndata: " + json.dumps(first).encode() + b"\n\n" + sse(chunk(choice(0, "tool_calls")))
    out, report = rewrite("openai-chat", body, ["split-names"])
    assert report["stopped"] is None and report["edits"] == {"split-names": 1}
    assert rebuilt("openai-chat", out) == [("call_1", "lookup", '{"q": 1}')]
