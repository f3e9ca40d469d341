"""OpenAI Chat Completions and Responses: what a mutation run found untested (the logic survivors of
``accumulator/formats/openai_chat.py`` and ``openai_responses.py`` left after test_openai_survivors.py; see
docs/mutation.md): Chat's rewriting (the chunk roles the reorderers read, split-names, repeat-names,
collide-index, reindex), the Responses events that restate a call or name the response, errors and usage.
Each test was checked by applying the mutation it guards against to the source by hand and seeing it fail."""

from __future__ import annotations

import json

import pytest
from streams import call, choice, chunk, named_sse, sse, tool_chunk, warning
from test_openai_survivors import (
    ADDED,
    CHAT,
    COMPLETED,
    RESPONSES,
    args_delta,
    calls,
    chat_rewrite,
    data_lines,
)

from accumulator import analyze

# === Chat Completions: rewriting ==============================================================================


def entries(body: bytes, choice_index: int = 0) -> list[dict]:
    """Every tool-call entry of a choice, in the order the chunks carry them."""
    return [
        entry
        for c in data_lines(body)
        for ch in c["choices"]
        if ch.get("index", 0) == choice_index
        for entry in ch["delta"].get("tool_calls") or ()
    ]


def verdict(body: bytes, strategy: str) -> str:
    return analyze(body, CHAT)["compatibility"][strategy]["verdict"]


def fn(index=None, id=None, name=None, arguments=None) -> dict:
    """A tool-call entry with ``type: function`` where it has an id (as providers send the first one)."""
    return call(index, id, name, arguments, **({"type": "function"} if id else {}))


# --- _role, _finishes: what passes in place while serialize holds a call -------------------------------------

TEXT_WITHOUT_FINISH_KEY = chunk({"index": 0, "delta": {"content": "Hi"}})  # no finish_reason at all
NO_CHOICES = {"id": "chatcmpl-test", "object": "chat.completion.chunk", "model": "gpt-test"}


@pytest.mark.parametrize("middle", [TEXT_WITHOUT_FINISH_KEY, NO_CHOICES], ids=["text", "no-choices"])
def test_a_chunk_of_no_call_passes_in_place_and_serialize_still_holds_the_other_call(middle):
    # _role 4, 21 (a text chunk taken as the run's end), _finishes 9 (a choice without finish_reason read as
    # one: KeyError), 7 (a chunk without choices taken as a finish)
    body = sse(
        tool_chunk(fn(0, "call_a", "alpha", "")),
        tool_chunk(fn(1, "call_b", "beta", "")),
        tool_chunk(call(0, arguments='{"a": ')),
        middle,
        tool_chunk(call(1, arguments="{}")),
        tool_chunk(call(0, arguments="1}")),
        chunk(choice(0, "tool_calls")),
    )
    out, report = chat_rewrite(body, repair=["serialize"])
    assert report["stopped"] is None and verdict(body, "recency") == "breaks"
    assert verdict(out, "recency") == "ok"
    assert calls(analyze(out, CHAT)) == [("call_a", "alpha", '{"a": 1}'), ("call_b", "beta", "{}")]
    chunks = data_lines(out)
    assert chunks.index(middle) < min(n for n, c in enumerate(chunks) if "call_b" in json.dumps(c))


# --- IndexKeys, CallKeys: the keys interleave and serialize group chunks by ---------------------------------


def test_interleave_keeps_calls_of_no_integer_index_in_one_group_as_they_came():
    # IndexKeys.__call__ 13 (an index that is no int used as a key of its own: the calls interleaved)
    body = sse(
        tool_chunk(fn("x", "call_a", "alpha", "")),
        tool_chunk(fn("x", "call_a", arguments="{}")),
        tool_chunk(fn("y", "call_b", "beta", "")),
        tool_chunk(fn("y", "call_b", arguments="{}")),
        chunk(choice(0, "tool_calls")),
    )
    out, report = chat_rewrite(body, inject=["interleave"])
    assert out == body and report["stopped"] is None


def test_serialize_leaves_a_fragment_no_call_claims_where_it_came():
    # CallKeys.__call__ 8 (the key of an unclaimed entry read from None: the rewriting stops)
    orphan = tool_chunk(call(5, arguments="x"))
    body = sse(
        tool_chunk(fn(0, "call_a", "alpha", "")),
        tool_chunk(fn(1, "call_b", "beta", "")),
        orphan,
        tool_chunk(call(0, arguments="{}")),
        tool_chunk(call(1, arguments="{}")),
        chunk(choice(0, "tool_calls")),
    )
    out, report = chat_rewrite(body, repair=["serialize"])
    assert report["stopped"] is None
    assert data_lines(out)[2] == orphan


# --- _head_chunk: the first half of a split chunk carries no usage ----------------------------------------------


def test_a_finish_chunk_split_around_held_calls_reports_its_usage_once():
    # _head_chunk 4, 5, 8 (the usage kept on the fragments' half too), 9 ("" for null), 12 (Groq's x_groq kept)
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    final = tool_chunk(call(0, arguments="}"), finish_reason="tool_calls")
    final.update(usage=usage, x_groq={"usage": usage})
    body = sse(
        tool_chunk(fn(0, "call_a", "alpha", "{")),
        tool_chunk(fn(1, "call_b", "beta", "{}")),
        final,
    )
    out, _ = chat_rewrite(body, repair=["serialize"])
    chunks = data_lines(out)
    assert [c.get("usage") for c in chunks] == [None] * (len(chunks) - 1) + [usage]
    assert ["x_groq" in c for c in chunks] == [False] * (len(chunks) - 1) + [True]
    head = next(
        c
        for c in chunks
        if c["choices"] and c["choices"][0]["delta"].get("tool_calls") == [call(0, arguments="}")]
    )
    assert "usage" in head and head["usage"] is None


# --- _cut, ChatEdits._split_name: which names split-names cuts, and how -------------------------------------------


@pytest.mark.parametrize("entry", [fn(0, "call_a", "x", "{}"), fn(0, "call_a", "aa", "{}"), fn(None, "call_a", "alpha", "{}")],
                         ids=["one-letter", "no-cut-of-aa", "no-index"])  # fmt: skip
def test_split_names_leaves_a_name_it_cannot_cut_or_a_call_without_index_whole(entry):
    # _cut 12 ("aa" cut into "aa" and ""), _split_name 3 (no cut taken as one; an entry without index
    # split: KeyError)
    body = sse(tool_chunk(entry), chunk(choice(0, "tool_calls")))
    out, report = chat_rewrite(body, inject=["split-names"])
    assert out == body and report["names_split"] == 0 and report["stopped"] is None


def test_split_names_moves_the_id_and_type_to_the_first_piece():
    # _split_name 24, 28 (the first piece's type null), 27 (the type left on the second piece)
    body = sse(
        tool_chunk(fn(0, "call_a", "alpha", "")),
        tool_chunk(call(1, "call_b", "gamma", "")),  # no type: the first piece says function
        tool_chunk(call(0, arguments="{}"), call(1, arguments="{}")),
        chunk(choice(0, "tool_calls")),
    )
    out, report = chat_rewrite(body, inject=["split-names"])
    assert report["names_split"] == 2
    assert entries(out)[:4] == [
        {"index": 0, "id": "call_a", "type": "function", "function": {"name": "al", "arguments": ""}},
        {"index": 0, "function": {"name": "pha", "arguments": ""}},
        {"index": 1, "id": "call_b", "type": "function", "function": {"name": "ga", "arguments": ""}},
        {"index": 1, "function": {"name": "mma", "arguments": ""}},
    ]


def test_split_names_keeps_a_second_choices_name_in_its_choice():
    # ChatEdits.push 88 (the first piece's chunk sent for choice null, read as choice 0)
    body = sse(
        tool_chunk(fn(0, "call_a", "alpha", "{}"), choice_index=1),
        chunk(choice(1, "tool_calls")),
    )
    out, _ = chat_rewrite(body, inject=["split-names"])
    result = analyze(out, CHAT)
    assert calls(result, 1) == [("call_a", "alpha", "{}")] and calls(result, 0) == []


# --- ChatEdits.push: what an edit leaves alone, and what it counts -----------------------------------------------


def test_edits_keep_the_bytes_of_every_chunk_they_do_not_change():
    # ChatEdits.push 7, Reindex.push 6 (every chunk marked edited: serialised again), Reindex.push 29 (every
    # index taken as wrong), _drop_repeats 2 (every continuation taken as repeating its call), Reindex.push 9
    # (the choices' calls numbered together: choice 1's call moved to index 1)
    body = sse(  # json.dumps' spacing: a chunk serialised again would not keep these bytes
        tool_chunk(fn(0, "call_a", "alpha", "")),
        tool_chunk(call(0, arguments="{}")),
        tool_chunk(fn(0, "call_b", "beta", ""), choice_index=1),
        tool_chunk(call(0, arguments="{}"), choice_index=1),
        chunk(choice(0, "tool_calls"), choice(1, "tool_calls")),
    )
    for names in (["split-names"], ["reindex"]):
        out, report = chat_rewrite(
            body, inject=[n for n in names if n != "reindex"], repair=[n for n in names if n == "reindex"]
        )
        kept = [line for line in body.splitlines() if line.startswith(b"data: {") and b'"name"' not in line]
        assert set(kept) <= set(out.splitlines()), names
        if names == ["reindex"]:
            assert out == body and report["edits"] == {}


def test_split_names_with_collide_index_counts_each_chunk_it_moved_to_index_0():
    # ChatEdits.push 68, 69 (a first piece's collision dropped from the count, or needed beside the second's)
    body = sse(
        tool_chunk(fn(0, "call_a", "get_weather", "")),
        tool_chunk(call(0, arguments="{}")),
        tool_chunk(fn(1, "call_b", "beta", "{}")),
        chunk(choice(0, "tool_calls")),
    )
    out, report = chat_rewrite(body, inject=["split-names", "collide-index"])
    assert report["edits"] == {"split-names": 2, "collide-index": 3}
    assert [(e["index"], e["id"]) for e in entries(out)] == [(0, "call_a")] * 3 + [(0, "call_b")] * 2


# --- ChatEdits._repeat_identity: repeat-names ----------------------------------------------------------------


def test_split_names_with_repeat_names_puts_the_identity_on_the_second_piece_and_keeps_its_name():
    # ChatEdits.push 49 (the second piece of a split name left without identity), _repeat_identity 56 (the
    # second piece given the whole name)
    body = sse(tool_chunk(fn(0, "call_a", "get_weather", "")), tool_chunk(call(0, arguments="{}")))
    out, report = chat_rewrite(body, inject=["split-names", "repeat-names"])
    function = {"index": 0, "id": "call_a", "type": "function"}
    assert entries(out) == [
        {**function, "function": {"name": "get_w", "arguments": ""}},
        {**function, "function": {"name": "eather", "arguments": ""}},
        {**function, "function": {"name": "get_weather", "arguments": "{}"}},
    ]
    assert report["edits"] == {"split-names": 1, "repeat-names": 2}


def test_repeat_names_repeats_a_name_the_provider_sent_in_pieces_whole():
    # ChatEdits.push 25, _grown 2 (the call's name taken as its last piece), _repeat_identity 14 (a piece of
    # the name without id left so), 15 (a fragment repeating the id but not the name left so)
    body = sse(
        tool_chunk(fn(0, "call_a", "get_", "")),
        tool_chunk(call(0, name="weather")),
        tool_chunk(call(0, "call_a", arguments="{")),
        tool_chunk(call(0, arguments="}")),
        chunk(choice(0, "tool_calls")),
    )
    out, report = chat_rewrite(body, inject=["repeat-names"])
    assert [(e.get("id"), e.get("type"), e["function"].get("name")) for e in entries(out)] == [
        ("call_a", "function", "get_"),
        ("call_a", "function", "weather"),
        ("call_a", "function", "get_weather"),
        ("call_a", "function", "get_weather"),
    ]
    assert report["edits"] == {"repeat-names": 3}
    assert calls(analyze(out, CHAT)) == [("call_a", "get_weather", "{}")]


@pytest.mark.parametrize(
    "body",
    [
        sse(tool_chunk(call(0, name="alpha", arguments="")), tool_chunk(call(0, arguments="{}"))),
        sse(tool_chunk(fn(0, "call_a", "alpha", "")), tool_chunk(fn(0, "call_a", "alpha", "{}"))),
    ],
    ids=["no-id", "identity-already-repeated"],
)
def test_repeat_names_leaves_a_call_without_id_or_fragments_that_repeat_it_already(body):
    # _repeat_identity 1 (a call without id given "id": null), 4 (counted all the same), 16, 19, 20, 23,
    # 26, 29 (a fragment that repeats id, type and name already rewritten and counted)
    out, report = chat_rewrite(body, inject=["repeat-names"])
    assert out == body and report["edits"] == {}


def test_repeat_names_keeps_each_fragments_index_or_its_lack_of_one():
    # _repeat_identity 41, 49 (the index dropped), 42 (an entry without index read as having one: KeyError),
    # 11 (a fragment without function read as one: AttributeError)
    body = sse(
        tool_chunk(fn(0, "call_a", "alpha", "")),
        tool_chunk(call(0, arguments="{}")),
        tool_chunk(fn(1, "call_b", "beta", "")),
        tool_chunk(call(1)),  # no function at all
        tool_chunk(fn(None, "call_c", "gamma", "")),
        tool_chunk(call(None, "call_c", arguments="{}")),
        chunk(choice(0, "tool_calls")),
    )
    out, report = chat_rewrite(body, inject=["repeat-names"])
    assert report["stopped"] is None and report["edits"] == {"repeat-names": 3}
    assert [(e.get("index"), e["id"], e["function"]["name"]) for e in entries(out)] == [
        (0, "call_a", "alpha"),
        (0, "call_a", "alpha"),
        (1, "call_b", "beta"),
        (1, "call_b", "beta"),
        (None, "call_c", "gamma"),
        (None, "call_c", "gamma"),
    ]


def test_an_edit_reaches_the_entries_after_one_no_call_claims_in_the_same_chunk():
    # ChatEdits.push 16, Reindex.push 14 (the entries after an unclaimed one left as they were)
    body = sse(
        tool_chunk(fn(0, "call_a", "alpha", "")),
        tool_chunk(fn(0, "call_b", "beta", "")),  # index 0 again: reindex gives it 1
        tool_chunk(call(5, arguments="x"), call(0, arguments="{}")),
        chunk(choice(0, "tool_calls")),
    )
    out, _ = chat_rewrite(body, inject=["repeat-names"])
    assert entries(out)[3] == {
        "index": 0,
        "id": "call_b",
        "type": "function",
        "function": {"name": "beta", "arguments": "{}"},
    }
    out, _ = chat_rewrite(body, repair=["reindex"])
    assert [e["index"] for e in entries(out)] == [0, 1, 5, 1]


# --- ChatEdits._collide_index ----------------------------------------------------------------------------------


def test_collide_index_leaves_a_stream_whose_calls_all_sit_on_index_0_with_their_ids():
    # _collide_index 2, 7, 11 (an entry already on index 0 with its id rewritten and counted)
    body = sse(
        tool_chunk(fn(0, "call_a", "alpha", "")),
        tool_chunk(call(0, "call_a", arguments="{}")),
        tool_chunk(fn(0, "call_b", "beta", "")),
        tool_chunk(call(0, "call_b", arguments="{}")),
        chunk(choice(0, "tool_calls")),
    )
    out, report = chat_rewrite(body, inject=["collide-index"])
    assert out == body and report["edits"] == {}


# --- Reindex ---------------------------------------------------------------------------------------------------


def test_reindex_counts_every_index_it_gives_back_and_every_repeat_it_drops():
    # Reindex.push 44 (the reindex count stuck at 1), _drop_repeats 33, 36, 37 (the dropped repeats' count
    # null, going down, or stuck at 1); Reindex.push 25, _grown 2 (a name sent in pieces then repeated whole
    # taken as its last piece: the repeat kept)
    body = sse(
        tool_chunk(fn(0, "call_a", "get_", "")),
        tool_chunk(call(0, name="weather")),
        tool_chunk(fn(0, "call_a", "get_weather", "{}")),
        tool_chunk(fn(0, "call_b", "beta", "")),
        tool_chunk(call(0, "call_b", arguments="{")),
        tool_chunk(call(0, arguments="}")),
        chunk(choice(0, "tool_calls")),
    )
    out, report = chat_rewrite(body, repair=["reindex"])
    assert report["edits"] == {"reindex-dropped-repeats": 2, "reindex": 3}
    assert entries(out)[2] == {"index": 0, "type": "function", "function": {"arguments": "{}"}}
    assert calls(analyze(out, CHAT)) == [("call_a", "get_weather", "{}"), ("call_b", "beta", "{}")]


def test_serialize_tells_the_calls_of_two_choices_apart():
    # CallKeys.__call__ 4 (every choice's entries routed as one choice's: choice 0's fragment read as choice
    # 1's call, held behind the next call)
    body = sse(
        tool_chunk(fn(0, "call_a0", "alpha", "{"), choice_index=0),
        tool_chunk(fn(0, "call_b0", "beta", "{"), choice_index=1),
        tool_chunk(fn(1, "call_a1", "gamma", "{"), choice_index=0),
        tool_chunk(call(0, arguments="}"), choice_index=0),
        tool_chunk(call(0, arguments="}"), choice_index=1),
        tool_chunk(call(1, arguments="}"), choice_index=0),
        chunk(choice(0, "tool_calls"), choice(1, "tool_calls")),
    )
    out, _ = chat_rewrite(body, repair=["serialize"])
    assert [(e.get("id"), e["function"]["arguments"]) for e in entries(out, 0)] == [
        ("call_a0", "{"),
        (None, "}"),
        ("call_a1", "{"),
        (None, "}"),
    ]
    assert calls(analyze(out, CHAT), 0) == [("call_a0", "alpha", "{}"), ("call_a1", "gamma", "{}")]


# === Responses ================================================================================================


def test_arguments_only_in_output_item_done_are_the_calls_at_that_event():
    # obj_ops 138, 139, 142, 145 (the done item not read as a call), 146, 154, 155 (its output_index), 147,
    # 158 (its arguments), 148 (its event number), 149 (the operations' list: AttributeError)
    item = {**ADDED[1]["item"], "status": "completed", "arguments": '{"city": "Oslo"}'}
    message = {"id": "msg_1", "type": "message", "role": "assistant", "content": []}
    body = named_sse(
        ADDED,
        ("response.output_item.done", {"output_index": 1, "item": message}),
        ("response.output_item.done", {"output_index": 0, "item": item}),
        COMPLETED,
    )
    result = analyze(body, RESPONSES)
    (found,) = result["choices"][0]["tool_calls"]
    assert (found["arguments"], found["last_event"]) == ('{"city": "Oslo"}', 3)
    assert result["warnings"] == []


def test_an_output_item_done_that_differs_from_the_deltas_is_a_mismatch():
    # obj_ops 138, 145, 147 (the restatement not compared)
    item = {**ADDED[1]["item"], "status": "completed", "arguments": '{"city": "Oslo"}'}
    body = named_sse(
        ADDED, args_delta('{"city": "LA"}'), ("response.output_item.done", {"output_index": 0, "item": item})
    )
    found = warning(analyze(body + named_sse(COMPLETED), RESPONSES), "arguments-mismatch")
    assert (found["event"], found["output_index"], found["final"]) == (3, 0, '{"city": "Oslo"}')


def test_an_error_event_with_the_sdks_flat_shape_is_the_providers_error_at_its_event():
    # obj_ops 212 (its event number), 220 (the fields kept: only "type" instead of all but it)
    body = named_sse(ADDED, ("error", {"code": "server_error", "message": "boom", "param": None}))
    found = warning(analyze(body, RESPONSES), "provider-error")
    assert (found["event"], found["error"]) == (2, {"code": "server_error", "message": "boom", "param": None})


def test_a_model_named_only_by_response_created_is_the_results():
    # obj_ops 187 (the model alone not enough to name the response)
    created = ("response.created", {"response": {"model": "gpt-test", "status": "in_progress"}})
    result = analyze(named_sse(created, ADDED, COMPLETED), RESPONSES)
    assert (result["model"], result["response_id"]) == ("gpt-test", "resp_1")


@pytest.mark.parametrize(
    "usage, figures",
    [
        (
            {"input_tokens": 100, "output_tokens": 20, "total_tokens": 120,
             "input_tokens_details": {"cached_tokens": 50, "cache_write_tokens": 10}},
            {"input": 100, "output": 20, "cache_read": 50, "cache_write": 10},
        ),
        (
            {"input_tokens": 500, "output_tokens": 20, "total_tokens": 120},
            {"input": None, "output": 20, "cache_read": None, "cache_write": None},
        ),
    ],
    ids=["cache-write", "input-over-total"],
)  # fmt: skip
def test_responses_usage_reads_its_cache_writes_and_its_total(usage, figures):
    # usage_parts 27 (input_tokens_details.cache_write_tokens), 43 (total_tokens: an input over it left out)
    completed = ("response.completed", {"response": {"id": "resp_1", "status": "completed", "usage": usage}})
    result = analyze(named_sse(ADDED, completed), RESPONSES)
    assert {name: result["usage"][name] for name in figures} == figures
    assert ("larger than the provider's total" in " ".join(result["usage"]["notes"])) == (
        figures["input"] is None
    )
