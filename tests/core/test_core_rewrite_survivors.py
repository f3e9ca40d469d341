"""The core and the rewriter: what a mutation run found untested (the logic survivors of
``accumulator/assembly.py``, ``strategies.py``, ``result.py``, the formats' usage parts,
``rewrite/events.py``, ``rewrite/reorder.py``, ``rewrite/rewriter.py`` and ``addon.py``; see
docs/mutation.md). Each test was checked by applying the mutation it guards against to the source by hand
and seeing it fail."""

from __future__ import annotations

import json

import pytest
from schemas import check_result
from streams import call, calls_of, choice, chunk, sse, tool_chunk, warning

from accumulator import analyze, failure_result
from accumulator.formats import usage_parts
from accumulator.rewrite import StreamRewriter
from accumulator.usage import normalised

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
    return [
        (c["id"], c["name"], c["arguments"]) for ch in analyze(body, fmt)["choices"] for c in ch["tool_calls"]
    ]


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


# --- rewrite/reorder.py ------------------------------------------------------------------------------------


def test_each_run_is_reordered_and_counted():
    # Two runs of two sequential calls, a text block between: each run interleaved. _settle mutants 2 (the
    # count set, not added), 4, 5, 7, 8 (the run's state reset to None: the second run raised).
    run = lambda a, b: [tool(a), delta(a, '{"x": '), delta(a, "1}"), stop(a), tool(b), delta(b), stop(b)]
    body = anthropic(START, *run(0, 1), *text_block(2), *run(3, 4), *END)
    out, report = rewrite("anthropic-messages", body, ["interleave"])
    assert report["stopped"] is None and report["calls_reordered"] == 4
    assert report["events_in"] == report["events_out"] == body.count(b"\n\n")
    assert rebuilt("anthropic-messages", out) == rebuilt("anthropic-messages", body)
    order = [json.loads(line[6:]).get("index") for line in out.split(b"\n") if line.startswith(b"data: ")]
    assert order[1:8] == [0, 1, 0, 1, 0, 1, 0] and order[11:18] == [3, 4, 3, 4, 3, 4, 3]


def test_a_final_chunk_of_the_only_call_held_is_not_split():
    # Reorderer.push mutants 7 and 8 split it anyway; 20, 23, 24, 25 (the unit or an argument of _add
    # lost) made it raise, and the stream passed as it came.
    body = sse(
        tool_chunk(call(0, "call_1", "lookup", '{"q": ')),
        tool_chunk(call(0, arguments='"x"')),
        tool_chunk(call(0, arguments="}"), finish_reason="tool_calls"),
    )
    out, report = rewrite("openai-chat", body, ["interleave"])
    assert out == body
    assert report["stopped"] is None and report["events_in"] == report["events_out"] == 4
    assert report["held_events_max"] == 2  # the first two chunks were held until the final one


def test_serialize_counts_every_call_that_left_out_of_place():
    # Each path of Serializer._add that lets a unit leave names its call: _arrive mutant 8 and _add
    # mutants 11, 19, 32 (None for the key) counted fewer calls; 16 (a late unit marked held) and 13, 14,
    # 15 (arguments lost: it raised) too.
    first_run = [
        tool(0), delta(0), tool(1), delta(1), delta(0), stop(0),  # 0 passes 1 (held): then 1 leaves
        delta(1), stop(1), tool(2), tool(3), delta(2), stop(2), stop(3),  # 2 passes 3 (held)
    ]  # fmt: skip
    second_run = [
        tool(5), stop(5), tool(6), stop(6), tool(7), tool(8),
        delta(5), delta(6),  # late fragments of calls that ended, past 8 (held)
        stop(7), stop(8),
    ]  # fmt: skip
    body = anthropic(START, *first_run, *text_block(4), *second_run, *END)
    out, report = rewrite("anthropic-messages", body, repair=["serialize"])
    assert report["stopped"] is None
    assert report["calls_reordered"] == 8  # 0, 1, 2, 3; 5, 6, 7, 8
    assert sorted(out.split(b"\n\n")) == sorted(body.split(b"\n\n"))


def test_serialize_streams_the_next_call_live_when_the_held_one_before_it_had_ended():
    # _add mutant 30 (the held call's end not noted): call 2 was held to the run's end.
    rewriter = StreamRewriter("anthropic-messages", repair=["serialize"])
    sent = [rewriter.feed(anthropic(e)) for e in (START, tool(0), tool(1), delta(1), stop(1), stop(0))]
    assert [len(pieces) for pieces in sent] == [1, 1, 0, 0, 0, 1]  # 1 held while 0 is open
    assert b'"index": 1' in sent[-1][0]  # 0's end releases 1, which had ended
    assert rewriter.feed(anthropic(tool(2))) != []  # then 2 is the live call
    assert rewriter.feed(anthropic(delta(2))) != []


# --- rewrite/rewriter.py -----------------------------------------------------------------------------------


def test_an_oversized_event_stops_the_rewriting_and_every_event_is_counted_out():
    # What was held leaves, then the events not processed yet from the ledger: _release_ledger mutants 4
    # and 5 (= and -= for +=) lost the first in events_out.
    big = tool_chunk(call(0, arguments='"' + "x" * 3000))
    body = sse(
        tool_chunk(call(0, "call_1", "lookup", '{"q": ')),
        tool_chunk(call(1, "call_2", "other", "{}")),
        big,
        tool_chunk(call(0, arguments='"}')),
        chunk(choice(0, "tool_calls")),
    )
    out, report = rewrite("openai-chat", body, ["interleave"], max_event_bytes=1000)
    assert out == body
    assert report["stopped"] == {"reason": "an event of 3234 bytes is over the 1000 cap", "after_events": 0}
    assert report["events_in"] == report["events_out"] == 6


# --- strategies.py: where a strategy first went astray (_diverges) ------------------------------------------


def test_a_fragment_both_sides_drop_is_no_divergence():
    # An orphan fragment first (identity routing and id-then-index both drop it), then a new id on a taken
    # index, which id-then-index merges: astray at event 3, not 1 (_diverges mutants 4, 5, 6, 7).
    body = sse(
        tool_chunk(call(5, arguments='{"lost": 1}')),
        tool_chunk(call(0, "call_a", "f", "{}")),
        tool_chunk(call(0, "call_b", "g", "{}")),
        chunk(choice(0, "tool_calls")),
    )
    result = analyze(body, "openai-chat", strategies=("id-then-index",))
    assert calls_of(result) == [("call_a", "f", "{}"), ("call_b", "g", "{}")]
    assert warning(result, "id-then-index-misroute")["first_divergence_event"] == 3


def test_a_call_opened_by_a_delta_that_carries_nothing_is_where_a_strategy_went_astray():
    # call_a again at another index, nothing in it: index-only opens an empty second call there, identity
    # routing continues call_a (_diverges mutant 13 let it pass: a misroute with no first divergence).
    body = sse(
        tool_chunk(call(0, "call_a", "f", "{}")),
        tool_chunk(call(1, "call_a", None, "")),
        chunk(choice(0, "tool_calls")),
    )
    result = analyze(body, "openai-chat", strategies=("index-only",))
    assert calls_of(result) == [("call_a", "f", "{}")]
    misroute = warning(result, "index-only-misroute")
    assert misroute["would_build"] == [
        {"id": "call_a", "name": "f", "arguments": "{}"},
        {"id": "call_a", "name": None, "arguments": ""},
    ]
    assert misroute["first_divergence_event"] == 2


# --- assembly.py: the index-collision warning -------------------------------------------------------------
# _collision mutants 4, 5, 11, 12 (the event and choice left out or None), 18, 21, 24 (the message's names).


def test_an_index_collision_names_both_calls_their_event_and_choice():
    body = sse(
        tool_chunk(call(0, "call_1", "f", "{}"), choice_index=1),
        tool_chunk(call(0, "call_2", "g", "{}"), choice_index=1),
        chunk(choice(1, "tool_calls")),
    )
    found = warning(analyze(body, "openai-chat"), "index-collision")
    assert found == {
        "code": "index-collision",
        "severity": found["severity"],
        "message": "event 2: new call call_2 arrived with index 0, already held by call call_1",
        "event": 2,
        "choice": 1,
        "index": 0,
        "id": "call_2",
        "existing_id": "call_1",
    }


def test_an_index_collision_of_calls_without_ids_names_the_holder_by_its_position():
    lines = [
        {
            "message": {
                "role": "assistant",
                "tool_calls": [{"function": {"index": 0, "name": n, "arguments": {}}}],
            }
        }
        for n in ("one", "two")
    ]
    lines.append({"message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop"})
    body = b"".join(json.dumps({"model": "m", "done": False, **line}).encode() + b"\n" for line in lines)
    found = warning(analyze(body, "ollama-chat"), "index-collision")
    assert found["message"] == "event 2: new call (no id) arrived with index 0, already held by call #0"
    assert (found["id"], found["existing_id"]) == (None, None)


# --- result.py -----------------------------------------------------------------------------------------------


def test_a_failure_result_keeps_the_format_the_flow_facts_and_says_why_it_has_no_usage():
    # failure_result mutants 19, 20, 23, 24, 30, 31: each argument of the result it builds.
    result = failure_result("gemini", "boom", streamed=False, nbytes=1234)
    check_result(result)
    assert (result["format"], result["streamed"], result["complete"]) == ("gemini", False, False)
    assert result["stats"]["bytes"] == 1234
    assert result["usage"]["notes"] == ["the analysis stopped before any usage was read"]
    assert [(w["code"], w["message"]) for w in result["warnings"]] == [
        ("internal-error", "analysis stopped: boom")
    ]
    assert failure_result("openai-chat", "boom")["streamed"] is True


@pytest.mark.parametrize(("length", "quoted"), [(4096, "x" * 4096), (4097, "x" * 4096 + "…")])
def test_an_orphans_text_is_quoted_whole_up_to_the_cap(length, quoted):
    # _cap mutants 2 (never cut) and 3 (< for <=: a text of exactly the cap cut).
    body = sse(tool_chunk(call(0, "call_1", "f", "{}")), tool_chunk(call(7, arguments="x" * length)))
    assert warning(analyze(body, "openai-chat"), "orphan-delta")["arguments"] == quoted


# --- the formats' usage parts: the provider's total and Anthropic's thinking tokens ---------------------
# usage_parts mutants (raw -> None): gemini 47, gemini_live 67, openai_realtime 27 (the total never read:
# an output beyond it kept); anthropic 37 (the reasoning count never read).


@pytest.mark.parametrize(
    ("fmt", "raw"),
    [
        ("gemini", {"promptTokenCount": 10, "candidatesTokenCount": 40, "totalTokenCount": 30}),
        ("gemini-live", {"promptTokenCount": 10, "responseTokenCount": 40, "totalTokenCount": 30}),
        ("gemini-live", {"prompt_token_count": 10, "response_token_count": 40, "total_token_count": 30}),
        ("openai-realtime", {"input_tokens": 10, "output_tokens": 40, "total_tokens": 30}),
    ],
)
def test_an_output_beyond_the_providers_total_is_left_out(fmt, raw):
    usage = normalised(usage_parts(fmt), raw)
    assert (usage["input"], usage["output"]) == (10, None)
    assert usage["notes"] == ["output (40) is larger than the provider's total (30): left out"]


def test_anthropic_reads_its_thinking_tokens_as_reasoning():
    raw = {"input_tokens": 10, "output_tokens": 50, "output_tokens_details": {"thinking_tokens": 20}}
    usage = normalised(usage_parts("anthropic-messages"), raw)
    assert (usage["input"], usage["output"], usage["reasoning"]) == (10, 50, 20)


# --- addon.py -------------------------------------------------------------------------------------------------


def test_what_a_request_asked_is_forgotten_when_its_flow_ends_in_an_error():
    # ToolcallLens.error mutant 16 (the wrong key popped): one entry kept for every flow that failed.
    from mitmproxy.flow import Error
    from mitmproxy.test import taddons, tflow

    import addon

    lens = addon.ToolcallLens()
    with taddons.context(lens):
        flow = tflow.tflow()
        flow.request.method = "POST"
        flow.request.host = "api.openai.com"
        flow.request.path = "/v1/chat/completions"
        flow.request.content = json.dumps({"model": "m", "stream": True, "messages": []}).encode()
        lens.request(flow)
        assert list(lens.turn_facts) == [flow.id]
        flow.error = Error("server unreachable")  # no response came: only the error hook fires
        lens.error(flow)
        assert lens.turn_facts == {} and lens.echo_warnings == {}
