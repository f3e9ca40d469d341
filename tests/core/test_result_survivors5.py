"""result.py: what a mutation run found untested (the logic survivors of ``_choice_result`` and
``_orphan_warning`` in issue 16's last stretch; see docs/mutation.md). Each test was checked by applying the
mutation it guards against to the source by hand and seeing it fail."""

from __future__ import annotations

from streams import call, choice, chunk, sse, tool_chunk

from accumulator import analyze


def details(result: dict, code: str) -> list[tuple]:
    return [
        (w["message"], {k: v for k, v in w.items() if k not in ("code", "severity", "message")})
        for w in result["warnings"]
        if w["code"] == code
    ]


def test_invalid_arguments_name_the_call_by_its_id_or_else_by_its_place_in_its_choice():
    # _choice_result_17 (no name), _21 (id and ordinal), _24 (no ordinal)
    body = sse(
        tool_chunk(call(0, "call_1", "f", '{"a": '), choice_index=1),
        tool_chunk(call(1, None, "g", "{"), choice_index=1),
        chunk(choice(1, "tool_calls")),
    )
    found = details(analyze(body, "openai-chat"), "invalid-arguments")
    assert [(message.split(":")[0], fields) for message, fields in found] == [
        ("call call_1 (f)", {"choice": 1, "id": "call_1", "name": "f", "arguments": '{"a": '}),
        ("call #1 (g)", {"choice": 1, "id": None, "name": "g", "arguments": "{"}),
    ]


def opened(*orphans: dict) -> bytes:
    """Choice 1 opens two calls, then fragments naming neither."""
    return sse(
        tool_chunk(call(0, "call_1", "f", "{}"), choice_index=1),
        tool_chunk(call(1, "call_2", "g", "{}"), choice_index=1),
        *(tool_chunk(orphan, choice_index=1) for orphan in orphans),
        chunk(choice(1, "tool_calls")),
    )


def test_an_orphan_is_warned_on_its_choice_with_the_indices_it_named_or_why_none():
    # _orphan_warning_11, _18 (the choice), _26, _27 (which of the two messages)
    by_index = details(analyze(opened(call(5, None, None, "x")), "openai-chat"), "orphan-delta")
    assert by_index == [
        (
            "1 fragment(s) of choice 1 named no known call (index 5)",
            {"choice": 1, "count": 1, "events": [3], "indices": [5], "arguments": "x"},
        )
    ]
    unnamed = details(analyze(opened(call(None, None, None, "y")), "openai-chat"), "orphan-delta")
    assert unnamed == [
        (
            "1 fragment(s) of choice 1 named no known call (no id, no index, several calls open)",
            {"choice": 1, "count": 1, "events": [3], "indices": [], "arguments": "y"},
        )
    ]


def test_warnings_added_later_count_on_top_of_those_the_result_already_suppressed():
    # WarningLog.of_4, _5: the count a result carries is kept and added to, never replaced or taken from
    from accumulator.result import add_warnings
    from accumulator.warnings import MAX_PER_CODE

    body = b"data: {not json\n\n" * (MAX_PER_CODE + 5) + sse(chunk(choice(0, "stop")))
    result = analyze(body, "openai-chat")
    before = result["stats"]["warnings_suppressed"]
    assert before == 5  # more malformed events than a code keeps
    echoed = [
        {"code": "unanswered-call", "severity": "warning", "message": f"call {n}", "ids": [str(n)]}
        for n in range(MAX_PER_CODE + 3)
    ]
    add_warnings(result, echoed)
    assert [w["code"] for w in result["warnings"]].count("unanswered-call") == MAX_PER_CODE
    assert result["stats"]["warnings_suppressed"] == before + 3
