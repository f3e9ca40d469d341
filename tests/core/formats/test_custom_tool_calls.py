"""Custom tools' calls (OpenAI's free-form tools, as Codex's ``apply_patch``): in Responses streams
(``custom_tool_call`` items, ``custom_tool_call_input`` events) and Chat streams (``custom`` entries), their
input is raw text: rebuilt by identity like any call, said ``custom``, never judged as JSON; declared,
forced, echoed and answered like a function's."""

from __future__ import annotations

import json

import fake_provider
import pytest
from rewriting import rewrite
from schemas import check_result
from streams import call, choice, chunk, codes, named_sse, sse, tool_chunk, warning

from accumulator import analyze, analyze_message
from accumulator.echo import ObservedCalls
from accumulator.websocket import Connection

PATCH = "*** Begin Patch\n*** Update File: a.py\n@@\n-x = 1\n+x = 2\n*** End Patch"
HALF = PATCH.index("@@")


def responses_events(*, interleaved: bool = True, deltas: bool = True, done_input: str = PATCH) -> list:
    """A custom call (apply_patch, output 0) beside a function call (read_file, output 1)."""
    custom = {
        "id": "ctc_1",
        "type": "custom_tool_call",
        "call_id": "call_p",
        "name": "apply_patch",
        "input": "",
    }
    function = {
        "id": "fc_2",
        "type": "function_call",
        "call_id": "call_r",
        "name": "read_file",
        "arguments": "",
    }
    patch = [("response.custom_tool_call_input.delta", {"item_id": "ctc_1", "output_index": 0, "delta": d})
             for d in (PATCH[:HALF], PATCH[HALF:])] if deltas else []  # fmt: skip
    read = [("response.function_call_arguments.delta", {"item_id": "fc_2", "output_index": 1, "delta": d})
            for d in ('{"path": ', '"a.py"}')]  # fmt: skip
    events = [
        (
            "response.created",
            {"response": {"id": "resp_1", "model": "gpt-5.1-codex", "status": "in_progress"}},
        ),
        ("response.output_item.added", {"output_index": 0, "item": custom}),
        ("response.output_item.added", {"output_index": 1, "item": function}),
    ]
    if interleaved and deltas:
        events += [patch[0], read[0], patch[1], read[1]]
    else:
        events += [*patch, *read]
    events += [
        ("response.custom_tool_call_input.done", {"item_id": "ctc_1", "output_index": 0, "input": done_input}),
        ("response.output_item.done", {"output_index": 0, "item": {**custom, "input": done_input}}),
        ("response.output_item.done", {"output_index": 1, "item": {**function, "arguments": '{"path": "a.py"}'}}),
        ("response.completed", {"response": {"id": "resp_1", "status": "completed"}}),
    ]  # fmt: skip
    return events


def calls(result: dict) -> list[tuple]:
    return [
        (c["id"], c["name"], c["arguments"], c.get("custom", False))
        for c in result["choices"][0]["tool_calls"]
    ]


REBUILT = [("call_p", "apply_patch", PATCH, True), ("call_r", "read_file", '{"path": "a.py"}', False)]


def test_a_responses_custom_call_is_rebuilt_by_identity_said_custom_and_not_judged_as_json():
    result = analyze(named_sse(*responses_events()), "openai-responses")
    check_result(result)
    assert calls(result) == REBUILT
    assert "custom" not in result["choices"][0]["tool_calls"][1]  # a function's call: as before
    assert "invalid-arguments" not in codes(result) and "arguments-mismatch" not in codes(result)
    # Both items open before their deltas: a client appending each to the latest call gets it wrong.
    misroute = warning(result, "recency-misroute")
    assert "\n" not in misroute["message"] and "*** Begin Patch\\n" in misroute["message"]  # one line
    assert "\n" not in result["compatibility"]["recency"]["reason"]
    would = misroute["would_build"]
    assert [c["arguments"] for c in would] == ["", PATCH[:HALF] + '{"path": ' + PATCH[HALF:] + '"a.py"}']
    assert [c["interleaved"] for c in result["choices"][0]["tool_calls"]] == [True, True]


def test_a_custom_calls_input_only_in_its_done_events_is_used_once_and_a_different_one_is_flagged():
    # A server that streams no input deltas (as LM Studio streams no argument deltas).
    result = analyze(named_sse(*responses_events(deltas=False)), "openai-responses")
    assert calls(result) == REBUILT and "arguments-mismatch" not in codes(result)
    assert [c["deltas"] for c in result["choices"][0]["tool_calls"]] == [2, 3]  # added, done; added, 2
    other = PATCH.replace("x = 2", "x = 3")
    result = analyze(named_sse(*responses_events(done_input=other)), "openai-responses")
    assert calls(result) == REBUILT  # what the deltas built
    assert warning(result, "arguments-mismatch")["final"] == other


def test_a_custom_call_in_a_whole_responses_message():
    body = json.dumps(
        {
            "object": "response",
            "status": "completed",
            "output": [
                {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_p", "name": "apply_patch", "input": PATCH},
                {"type": "function_call", "id": "fc_2", "call_id": "call_r", "name": "read_file",
                 "arguments": '{"path": "a.py"}'},
            ],
        }
    ).encode()  # fmt: skip
    result = analyze_message(body, "openai-responses")
    check_result(result)
    assert calls(result) == REBUILT and result["warnings"] == []


def custom_entry(index: int, id=None, name=None, input=None) -> dict:
    custom = {k: v for k, v in (("name", name), ("input", input)) if v is not None}
    return {"index": index, **({"id": id, "type": "custom"} if id else {}), "custom": custom}


def test_a_chat_custom_call_is_rebuilt_said_custom_and_not_judged_as_json():
    body = sse(
        tool_chunk(custom_entry(0, "call_p", "apply_patch", "")),
        tool_chunk(call(1, "call_r", "read_file", '{"path": ')),
        tool_chunk(custom_entry(0, input=PATCH[:HALF])),
        tool_chunk(call(1, arguments='"a.py"}')),
        tool_chunk(custom_entry(0, input=PATCH[HALF:])),
        chunk(choice(0, "tool_calls")),
    )
    request = {
        "tools": [
            {"type": "custom", "custom": {"name": "apply_patch", "format": {"type": "text"}}},
            {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}},
        ]
    }
    result = analyze(body, "openai-chat", request=request)
    check_result(result)
    assert calls(result) == REBUILT
    assert "invalid-arguments" not in codes(result) and "undeclared-tool" not in codes(result)
    assert "recency-misroute" in codes(result)


@pytest.mark.parametrize(
    "format,choice_of",
    [
        ("openai-responses", {"type": "custom", "name": "apply_patch"}),
        ("openai-chat", {"type": "custom", "custom": {"name": "apply_patch"}}),
    ],
)
def test_a_forced_custom_tool_is_read_from_the_tool_choice(format, choice_of):
    if format == "openai-responses":
        patched = named_sse(*responses_events())
        read_only = named_sse(*[e for e in responses_events() if e[1].get("output_index") != 0])
    else:
        patched = sse(
            tool_chunk(custom_entry(0, "call_p", "apply_patch", PATCH)), chunk(choice(0, "tool_calls"))
        )
        read_only = sse(tool_chunk(call(0, "call_r", "read_file", "{}")), chunk(choice(0, "tool_calls")))
    request = {"tool_choice": choice_of}
    assert "tool-choice-ignored" not in codes(analyze(patched, format, request=request))
    assert (
        warning(analyze(read_only, format, request=request), "tool-choice-ignored")["forced"] == "apply_patch"
    )


def responses_follow_up(patch: str, answered: tuple[str, ...] = ("call_p", "call_r")) -> bytes:
    items = [
        {"type": "message", "role": "user", "content": "fix it"},
        {"type": "custom_tool_call", "call_id": "call_p", "name": "apply_patch", "input": patch},
        {"type": "function_call", "call_id": "call_r", "name": "read_file", "arguments": '{"path": "a.py"}'},
    ]
    outputs = {"call_p": "custom_tool_call_output", "call_r": "function_call_output"}
    items += [{"type": outputs[i], "call_id": i, "output": "done"} for i in answered]
    return json.dumps({"model": "gpt-5.1-codex", "input": items}).encode()


def test_a_custom_calls_echo_and_answer_are_checked_as_a_functions():
    streamed = analyze(named_sse(*responses_events()), "openai-responses")
    index = ObservedCalls()
    index.record(streamed, "flow-1")
    warnings, evidence = index.examine(responses_follow_up(PATCH), "openai-responses")
    assert warnings == [] and evidence["checked"] == 4 and evidence["matched"] == 2
    # A client that spliced the patch: its echo says so.
    warnings, _ = index.examine(responses_follow_up(PATCH[:HALF]), "openai-responses")
    assert [(w["code"], w["id"]) for w in warnings] == [("client-misassembled", "call_p")]
    # A client that answered the function's call and dropped the patch.
    warnings, evidence = index.examine(responses_follow_up(PATCH, ("call_r",)), "openai-responses")
    assert [(w["code"], w["id"]) for w in warnings] == [("unanswered-call", "call_p")]


def test_a_chat_custom_calls_echo_is_read():
    streamed = analyze(
        sse(tool_chunk(custom_entry(0, "call_p", "apply_patch", PATCH)), chunk(choice(0, "tool_calls"))),
        "openai-chat",
    )
    index = ObservedCalls()
    index.record(streamed, "flow-1")
    echoed = {"id": "call_p", "type": "custom", "custom": {"name": "apply_patch", "input": PATCH[:HALF]}}
    request = {
        "messages": [
            {"role": "user", "content": "fix it"},
            {"role": "assistant", "tool_calls": [echoed]},
            {"role": "tool", "tool_call_id": "call_p", "content": "done"},
        ]
    }
    warnings, evidence = index.examine(json.dumps(request).encode(), "openai-chat")
    assert evidence["checked"] == 2
    assert [(w["code"], w["id"]) for w in warnings] == [("client-misassembled", "call_p")]


def test_a_responses_websocket_custom_call_is_answered_by_its_custom_output():
    connection = Connection("openai-responses", path="/v1/responses")
    connection.message(True, json.dumps({"type": "response.create", "input": []}).encode(), True)
    for name, payload in responses_events():
        connection.message(False, json.dumps({"type": name, **payload}).encode(), True)
    follow = {"type": "response.create", "previous_response_id": "resp_1"}
    follow["input"] = [
        {"type": "custom_tool_call_output", "call_id": "call_p", "output": "done"},
        {"type": "function_call_output", "call_id": "call_r", "output": "x = 1"},
    ]
    (settled,) = connection.message(True, json.dumps(follow).encode(), True)
    assert calls(settled) == REBUILT
    assert settled["websocket"]["evidence"]["answered"] == ["call_p", "call_r"]
    assert settled["websocket"]["evidence"]["unanswered"] == []


def test_hostile_item_types_are_read_as_no_call():
    events = [
        ("response.output_item.added", {"output_index": 0, "item": {"type": ["custom_tool_call"], "call_id": "x"}}),
        ("response.output_item.done", {"output_index": 0, "item": {"type": {"a": 1}, "input": 5}}),
        ("response.custom_tool_call_input.delta", {"output_index": 0, "delta": ["not", "text"]}),
        ("response.custom_tool_call_input.done", {"output_index": 0, "input": {"a": 1}}),
        ("response.completed", {"response": {"status": "completed"}}),
    ]  # fmt: skip
    result = analyze(named_sse(*events), "openai-responses")
    check_result(result)
    assert "internal-error" not in codes(result)


def test_the_report_and_the_span_show_a_custom_calls_input_as_written(tmp_path, capsys):
    from accumulator.cli import main
    from toolcall_lens.otel import FlowFacts, span_of

    path = tmp_path / "patch.sse"
    path.write_bytes(named_sse(*responses_events()))
    main([str(path)])
    out = capsys.readouterr().out
    assert "[0] apply_patch  id=call_p  index=0  custom tool (its input as written, no JSON)" in out
    assert "      *** Begin Patch\n      *** Update File: a.py\n" in out and "not valid JSON" not in out
    # A custom input that happens to parse as JSON is still text in the span.
    body = sse(tool_chunk(custom_entry(0, "call_p", "apply_patch", "42")), chunk(choice(0, "tool_calls")))
    span = span_of(analyze(body, "openai-chat"), FlowFacts(start=1.0), content=True)
    (message,) = json.loads(span.attributes["gen_ai.output.messages"])
    assert message["parts"][0]["arguments"] == "42"


@pytest.mark.parametrize("format", ["openai-chat", "openai-responses"])
def test_the_fake_providers_custom_scenario_whole_and_streamed(format):
    # Its whole answer (stream: false) and its stream give the same calls, the patch marked custom.
    whole = analyze_message(
        json.dumps(fake_provider.final_response(format, "custom-interleaved")).encode(), format
    )
    streamed = analyze(fake_provider.body(format, "custom-interleaved"), format)
    for result in (whole, streamed):
        check_result(result)
        assert [(c["name"], c.get("custom", False)) for c in result["choices"][0]["tool_calls"]] == [
            ("apply_patch", True),
            ("read_file", False),
        ]
        assert "invalid-arguments" not in codes(result)
    assert calls(whole) == calls(streamed)


def sequential_events() -> list:
    """The patch's call whole, then the read's: each item added, its deltas, its restatements."""
    events = responses_events()
    added = {e[1]["output_index"]: e for e in events if e[0] == "response.output_item.added"}
    done = {e[1]["output_index"]: e for e in events if e[0] == "response.output_item.done"}
    deltas = [e for e in events if e[0].endswith(".delta")]
    custom_done = [e for e in events if e[0] == "response.custom_tool_call_input.done"]
    return [
        events[0],
        added[0],
        *[e for e in deltas if e[1]["output_index"] == 0],
        *custom_done,
        done[0],
        added[1],
        *[e for e in deltas if e[1]["output_index"] == 1],
        done[1],
        events[-1],
    ]


def test_the_test_bench_interleaves_a_custom_call_with_a_functions():
    body = named_sse(*sequential_events())
    before = analyze(body, "openai-responses")
    assert calls(before) == REBUILT and "recency-misroute" not in codes(before)
    out, report = rewrite("openai-responses", body, ["interleave"])
    after = analyze(b"".join(out), "openai-responses")
    assert calls(after) == REBUILT and report["calls_reordered"] == 2
    assert [c["interleaved"] for c in after["choices"][0]["tool_calls"]] == [True, True]
    assert "recency-misroute" in codes(after)
