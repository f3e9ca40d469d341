"""The core's hot paths: what a mutation run found untested (the logic survivors of ``Assembly._tool_delta``,
``SseDecoder._line``, ``_choice_result`` and ``StreamAccumulator.feed``; see docs/mutation.md). Each test
was checked by applying the mutation it guards against to the source by hand and seeing it fail."""

from __future__ import annotations

from schemas import check_result
from streams import call, calls_of, choice, chunk, codes, sse, tool_chunk, warning

from accumulator import StreamAccumulator, analyze
from accumulator.framing import SseDecoder, SseEvent
from accumulator.framing.sse import OVERSIZED

# --- Assembly._tool_delta --------------------------------------------------------------------------------


def test_a_repeated_name_is_reported_with_its_event_and_choice():
    # _tool_delta_67/68: the event number and the choice handed on to the name check.
    body = sse(
        tool_chunk(call(0, "call_a", "lookup", "{}"), choice_index=1),
        tool_chunk(call(0, None, "lookup"), choice_index=1),
    )
    repeated = warning(analyze(body, "openai-chat"), "name-repeated")
    assert (repeated["event"], repeated["choice"], repeated["id"]) == (2, 1, "call_a")
    assert repeated["message"].startswith("event 2:")


def test_past_the_calls_cap_the_strategies_still_follow_the_calls_that_were_kept():
    # _tool_delta_97: once a call was refused, a fragment of a kept call is still shown to the awake
    # strategies (the repeated id wakes the index-keyed ones); they must not be left without its "}".
    body = sse(
        tool_chunk(call(0, "call_a", "f", '{"x":')),
        tool_chunk(call(0, "call_a", None, "1")),
        tool_chunk(call(1, "call_b", "g", "{}")),
        tool_chunk(call(2, "call_c", "h", "{}")),  # refused: the cap is 2
        tool_chunk(call(0, None, None, "}")),
    )
    result = analyze(body, "openai-chat", max_calls=2)
    check_result(result)
    assert result["stats"]["calls_dropped"] == 1
    assert calls_of(result) == [("call_a", "f", '{"x":1}'), ("call_b", "g", "{}")]
    for name in ("index-only", "id-then-index", "last-wins"):
        assert result["compatibility"][name]["verdict"] == "ok", name


# --- _choice_result --------------------------------------------------------------------------------------


def test_invalid_arguments_name_the_choice_and_the_call():
    # _choice_result_9/11/15: the warning's choice and name.
    result = analyze(sse(tool_chunk(call(0, "call_a", "lookup", '{"q":'), choice_index=1)), "openai-chat")
    invalid = warning(result, "invalid-arguments")
    assert (invalid["choice"], invalid["id"], invalid["name"]) == (1, "call_a", "lookup")


# --- SseDecoder._line ------------------------------------------------------------------------------------


def decode(*chunks: bytes, max_event_bytes: int | None = None) -> list[SseEvent]:
    decoder = SseDecoder(max_event_bytes) if max_event_bytes else SseDecoder()
    out = []
    for piece in chunks:
        out.extend(decoder.feed(piece))
    return out + decoder.close()


def test_the_lines_of_an_oversized_event_are_ignored_its_id_too():
    # _line_3: while an oversized event is skipped, none of its lines counts (an id there names nothing).
    body = b"id: 1\ndata: " + b"x" * 50 + b"\nid: 2\nevent: lost\n\ndata: after\n\n"
    assert decode(body, max_event_bytes=20) == [OVERSIZED, SseEvent(None, b"after", "1")]


def test_bare_data_fields_add_up_to_the_cap_and_drop_the_event():
    # _line_53: a data field with no colon at all (an empty line of data each) counts toward the cap too.
    assert decode(b"data\n" * 30 + b"\ndata: after\n\n", max_event_bytes=20) == [
        OVERSIZED,
        SseEvent(None, b"after", None),
    ]


def test_a_field_value_may_hold_a_colon():
    # _line_23: the field name ends at the first colon.
    assert decode(b"event: a:b\nid: x:1\ndata: d\n\n") == [SseEvent("a:b", b"d", "x:1")]


def test_an_id_that_is_not_utf8_is_read_with_replacement_characters():
    # _line_66: the decoder never raises, whatever bytes the id holds.
    assert decode(b"id: \xff1\ndata: d\n\n") == [SseEvent(None, b"d", "\ufffd1")]


# --- StreamAccumulator.feed: the decoded-size cap of a body that is not compressed ----------------------

CHAT = sse(tool_chunk(call(0, "call_a", "lookup", "{}")), chunk(choice(0, "tool_calls")))


def test_a_body_exactly_at_the_byte_cap_is_read_whole():
    # feed_9: the cap is on bytes beyond it.
    result = analyze(CHAT, "openai-chat", max_decoded_bytes=len(CHAT))
    assert "decoded-size-cap" not in codes(result)
    assert result["complete"] is True


def test_a_body_past_the_byte_cap_is_read_up_to_the_cap_and_the_cap_named():
    # feed_12: the bytes up to the cap are still analysed (one chunk past it, or the last of several);
    # feed_14: the warning says what happened.
    for pieces in ([CHAT + b"x" * 40], [CHAT[:10], CHAT[10:] + b"x" * 40]):
        stream = StreamAccumulator("openai-chat", max_decoded_bytes=len(CHAT))
        for piece in pieces:
            stream.feed(piece)
        result = stream.finish()
        check_result(result)
        assert calls_of(result) == [("call_a", "lookup", "{}")]
        cap = warning(result, "decoded-size-cap")
        assert cap["limit"] == len(CHAT)
        assert cap["message"] == f"the body exceeded {len(CHAT)} bytes; analysis stopped there"
