"""What a mutation run found untested in echo.py (docs/mutation.md): the bound on responses without ids,
calls cut at the cap and flows recorded twice, the format a check reads, the details of glued ids and of
calls matched by position, every turn's dropped calls, splices named in order, and echoes whose id or
arguments are not text."""

from __future__ import annotations

import json

from test_echo import (
    GEMINI_NO_IDS,
    PRODUCTION,
    RIGHT,
    _gemini_stream,
    chat_follow_up,
    gemini_follow_up,
    observed,
)

from accumulator.echo import ANONYMOUS_RESPONSES, ObservedCalls


def _chat_result(*calls: tuple[str, str, str]) -> dict:
    tool_calls = [{"id": i, "name": n, "arguments": a} for i, n, a in calls]
    return {"format": "openai-chat", "choices": [{"index": 0, "tool_calls": tool_calls}]}


def _chat_body(messages: list[dict]) -> bytes:
    return json.dumps({"model": "m", "messages": [{"role": "user", "content": "go"}, *messages]}).encode()


def _assistant(*calls: tuple[object, str, object]) -> dict:
    return {
        "role": "assistant",
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in calls
        ],
    }


def _tool(call_id: str) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": "ok"}


def _gemini_turns(*turns: list[tuple[str, object]]) -> bytes:
    """Gemini CLI's request with several model turns, each answered, its ids made up per turn."""
    contents: list[dict] = [{"role": "user", "parts": [{"text": "go"}]}]
    for t, calls in enumerate(turns):
        ids = [f"{name}_{t}_{n}" for n, (name, _) in enumerate(calls)]
        contents.append(
            {
                "role": "model",
                "parts": [{"functionCall": {"id": i, "name": n, "args": a}} for i, (n, a) in zip(ids, calls)],
            }
        )
        contents.append(
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"id": i, "name": n, "response": {"output": "ok"}}}
                    for i, (n, _) in zip(ids, calls)
                ],
            }
        )
    return json.dumps({"contents": contents}).encode()


# The index: responses without ids, calls cut at the cap, eviction.


def test_only_the_last_responses_without_ids_are_kept_for_matching():
    index = observed(_gemini_stream(("alpha", {"x": 1})))
    beta = _gemini_stream(("beta", {"x": 1}))
    for n in range(ANONYMOUS_RESPONSES):
        index.record(beta, f"later-{n}")
    warnings, evidence = index.examine(gemini_follow_up([("alpha", {"x": 1})]), "gemini")
    assert warnings == [] and evidence["earlier_flows"] == [] and evidence["reason"] is not None


def test_a_gemini_call_cut_at_the_argument_cap_is_not_compared_with_its_echo():
    cut = _gemini_stream(("run_shell_command", {"command": "ls"}))
    cut["choices"][0]["tool_calls"][0]["arguments_truncated"] = True
    warnings, evidence = observed(cut).examine(
        gemini_follow_up([("run_shell_command", {"command": "ls -la /a/much/longer/path"})]), "gemini"
    )
    assert warnings == [] and evidence["matched"] == 1


def test_a_flow_recorded_twice_keeps_the_index_within_its_bound():
    # One flow with two responses (a WebSocket session's): evicting the first's call must not fail.
    index = ObservedCalls(size=1)
    index.record(_chat_result(("a", "f", "{}")), "ws")
    index.record(_chat_result(("b", "f", "{}")), "ws")
    assert len(index) == 1 and index.get("b") is not None and index.get("a") is None


def test_a_call_whose_flow_lost_its_entry_is_still_checked():
    # The session's second response evicted, its first response's call echoed back still.
    index = ObservedCalls(size=2)
    index.record(_chat_result(("a", "f", "{}")), "ws")
    index.record(_chat_result(("b", "g", "{}")), "ws")
    index.check(_chat_body([_assistant(("a", "f", "{}")), _tool("a")]))  # a used again: b goes first
    index.record(_chat_result(("c", "h", "{}")), "other")
    assert index.siblings("never-recorded") == []
    warnings, evidence = index.examine(_chat_body([_assistant(("a", "f", "{}")), _tool("a")]))
    assert warnings == [] and evidence["matched"] == 1 and evidence["earlier_flows"] == ["ws"]


def test_a_response_with_a_call_evicted_still_has_its_dropped_calls_found():
    index = ObservedCalls(size=3)
    index.record(_chat_result(("a", "f", "{}"), ("b", "g", "{}"), ("c", "h", "{}")), "flow-0")
    index.record(_chat_result(("d", "k", "{}")), "flow-1")  # a goes
    warnings, evidence = index.examine(_chat_body([_assistant(("b", "g", "{}")), _tool("b")]))
    assert evidence["unanswered"] == ["c"]
    assert [(w["code"], w["id"], w["name"]) for w in warnings] == [("unanswered-call", "c", "h")]


def test_a_dropped_call_with_an_id_is_named():
    (found,) = observed(PRODUCTION).check(chat_follow_up(RIGHT[:1]))
    assert found["code"] == "unanswered-call" and found["id"] == "call_xyz"
    assert found["name"] == "get_user_profile" and found["earlier_flow"] == "flow-0"


# What a check reads.


def test_check_and_examine_read_only_the_format_asked():
    wrong = chat_follow_up([{**RIGHT[0], "arguments": '{"query": "other"}'}, RIGHT[1]])
    assert observed(PRODUCTION).check(wrong, "anthropic-messages") == []
    warnings, evidence = observed(PRODUCTION).examine(wrong, "anthropic-messages")
    assert warnings == [] and evidence["checked"] == 0
    assert [w["code"] for w in observed(PRODUCTION).check(wrong, "openai-chat")] == ["client-misassembled"]


def test_results_alone_name_an_unknown_id():
    body = _chat_body([_tool("call_abc"), _tool("call_zzz")])
    warnings, evidence = observed(PRODUCTION).examine(body)
    assert evidence["unknown"] == ["call_zzz"]
    assert ("unknown-tool-call-id", "call_zzz") in [(w["code"], w["id"]) for w in warnings]


def test_an_unknown_id_beside_a_glued_one_is_unknown():
    glued = ("call_abccall_xyz", "search_circulars", RIGHT[0]["arguments"])
    body = _chat_body([_assistant(glued, ("call_zzz", "f", "{}")), _tool("call_abccall_xyz")])
    _, evidence = observed(PRODUCTION).examine(body)
    assert evidence["unknown"] == ["call_zzz"]


def test_a_glued_id_names_its_flow_and_both_versions():
    index = observed(PRODUCTION)
    first = index.get("call_abc")
    body = chat_follow_up([{**RIGHT[0], "id": "call_abccall_xyz"}])
    (found,) = [w for w in index.check(body) if w["code"] == "client-misassembled"]
    assert found["earlier_flow"] == "flow-0" and found["glued_ids"] == ["call_abc", "call_xyz"]
    assert found["observed"] == {"name": first.name, "arguments": first.arguments}
    assert found["echoed"] == {"name": RIGHT[0]["name"], "arguments": RIGHT[0]["arguments"]}


def test_an_echo_with_a_known_id_is_not_matched_by_position_as_well():
    same_names = _gemini_stream(("search_circulars", {"query": "x"}), ("get_user_profile", {"user_id": "y"}))
    index = observed(same_names, PRODUCTION)
    warnings, evidence = index.examine(chat_follow_up(RIGHT))
    assert warnings == [] and evidence["matched"] == 2 and evidence["earlier_flows"] == ["flow-1"]


def test_a_misassembled_call_with_an_id_carries_no_position():
    doubled = [{**RIGHT[0], "name": "search_circularssearch_circulars"}, RIGHT[1]]
    (found,) = observed(PRODUCTION).check(chat_follow_up(doubled))
    assert "position" not in found


# Calls without ids: matched by position and name.


def test_evidence_from_calls_without_ids_lists_no_unknown_ids():
    right = [("run_shell_command", {"command": "ls"}), ("read_file", {"path": "a.txt"})]
    warnings, evidence = observed(GEMINI_NO_IDS).examine(gemini_follow_up(right), "gemini")
    assert warnings == [] and evidence["unknown"] == [] and evidence["unanswered"] == []


def test_a_gemini_echo_with_wrong_arguments_names_its_flow_and_position():
    wrong = [("run_shell_command", {"command": "rm"}), ("read_file", {"path": "a.txt"})]
    (found,) = observed(GEMINI_NO_IDS).check(gemini_follow_up(wrong), "gemini")
    assert found["code"] == "client-misassembled" and found["earlier_flow"] == "flow-0"
    assert found["position"] == 0


def test_a_dropped_gemini_call_names_its_flow_and_no_id():
    (found,) = observed(GEMINI_NO_IDS).check(gemini_follow_up([("run_shell_command", {"command": "ls"})]))
    assert found["code"] == "unanswered-call" and found["earlier_flow"] == "flow-0"
    assert "id" in found and found["id"] is None and found["position"] == 1


def test_two_gemini_calls_of_one_name_echoed_right_raise_nothing():
    twice = [("read_file", {"path": "a.txt"}), ("read_file", {"path": "b.txt"})]
    warnings, evidence = observed(_gemini_stream(*twice)).examine(gemini_follow_up(twice), "gemini")
    assert warnings == [] and evidence["matched"] == 2 and evidence["unanswered"] == []


def test_the_dropped_calls_of_every_gemini_turn_are_listed():
    older = _gemini_stream(("run_shell_command", {"command": "ls"}), ("read_file", {"path": "a.txt"}))
    newer = _gemini_stream(("run_shell_command", {"command": "pwd"}), ("read_file", {"path": "b.txt"}))
    body = _gemini_turns([("read_file", {"path": "a.txt"})], [("read_file", {"path": "b.txt"})])
    _, evidence = observed(older, newer).examine(body, "gemini")
    assert evidence["unanswered"] == ["flow-1#0", "flow-0#0"]


def test_a_turn_matched_by_glued_names_keeps_the_drops_of_the_newer_turn():
    older = _gemini_stream(("run_shell_command", {"command": "ls"}), ("read_file", {"path": "a.txt"}))
    newer = _gemini_stream(("run_shell_command", {"command": "pwd"}), ("read_file", {"path": "b.txt"}))
    body = _gemini_turns(
        [("run_shell_commandread_file", {"command": "ls"})], [("read_file", {"path": "b.txt"})]
    )
    _, evidence = observed(older, newer).examine(body, "gemini")
    assert evidence["unanswered"] == ["flow-1#0"]


def test_more_gemini_echoes_than_streamed_calls_are_flagged():
    echoes = [("run_shell_command", {"command": "ls"}), ("read_file", {"path": "a.txt"})] * 2
    warnings = observed(GEMINI_NO_IDS).check(gemini_follow_up(echoes[:3]), "gemini")
    (extra,) = warnings
    assert extra["code"] == "client-misassembled" and extra["position"] == 2 and extra["observed"] is None


def test_echoes_around_a_glued_gemini_echo_are_compared_and_both_carry_their_details():
    streamed = _gemini_stream(
        ("run_shell_command", {"command": "ls"}),
        ("read_file", {"path": "a.txt"}),
        ("read_file", {"path": "b.txt"}),
    )
    echoes = [("run_shell_commandread_file", {"command": "ls"}), ("read_file", {"path": "WRONG"})]
    glued, wrong = observed(streamed).check(gemini_follow_up(echoes), "gemini")
    assert glued["id"] == "run_shell_commandread_file_1767225600000_0"
    assert glued["echoed"] == {"name": "run_shell_commandread_file", "arguments": '{"command":"ls"}'}
    assert glued["name_concatenation"] == ["run_shell_command", "read_file"]
    assert wrong["code"] == "client-misassembled" and wrong["position"] == 2
    assert wrong["id"] == "read_file_1767225600000_1"


def test_a_gemini_echo_whose_arguments_splice_two_streamed_calls_names_the_splice():
    other = _gemini_stream(("list_directory", {"path": "."}))
    streamed = _gemini_stream(("run_shell_command", {"command": "ls"}), ("read_file", {"path": "a.txt"}))
    texts = [c["arguments"] for c in streamed["choices"][0]["tool_calls"]]
    spliced = [("run_shell_command", texts[0] + texts[1]), ("read_file", {"path": "a.txt"})]
    (found,) = observed(other, streamed).check(gemini_follow_up(spliced), "gemini")
    assert found["earlier_flow"] == "flow-1" and found["position"] == 0
    assert "arguments_splice" in found


def test_a_splice_of_two_gemini_calls_says_which_calls_were_spliced():
    streamed = _gemini_stream(("run_shell_command", {"command": "ls"}), ("read_file", {"path": "a.txt"}))
    texts = [c["arguments"] for c in streamed["choices"][0]["tool_calls"]]
    spliced = [("run_shell_command", texts[0] + texts[1]), ("read_file", {"path": "a.txt"})]
    (found,) = observed(streamed).check(gemini_follow_up(spliced), "gemini")
    # Calls without ids are named as unanswered names them: FLOW#POSITION (it said ", " before).
    assert found["arguments_splice"] == ["flow-0#0", "flow-0#1"], found["arguments_splice"]
    assert "a splice of the arguments of flow-0#0, flow-0#1" in found["message"]


# Splices among several siblings.


def test_a_splice_is_named_in_the_order_streamed_among_three_calls():
    a, b, c = '{"q": "x"}', '{"user": "y"}', '{"z": 12345678}'
    index = observed(_chat_result(("c0", "f", a), ("c1", "g", b), ("c2", "h", c)))
    (found,) = index.check(
        _chat_body([_assistant(("c1", "g", a + b)), _tool("c0"), _tool("c1"), _tool("c2")])
    )
    assert found["arguments_splice"] == ["c0", "c1"]


def test_arguments_that_are_no_interleaving_are_not_called_a_splice():
    a, b = "{}", '{"q":1}'
    index = observed(_chat_result(("c0", "f", a), ("c1", "g", b)))
    (found,) = index.check(_chat_body([_assistant(("c1", "g", '{}{}q":1}')), _tool("c0"), _tool("c1")]))
    assert found["code"] == "client-misassembled" and "arguments_splice" not in found


# Echoes whose id or arguments are not text.


def test_an_echo_with_null_arguments_is_compared_as_empty():
    body = _chat_body([_assistant(("call_abc", "search_circulars", None)), _tool("call_abc")])
    found = [w for w in observed(PRODUCTION).check(body) if w["code"] == "client-misassembled"]
    assert [w["echoed"] for w in found] == [{"name": "search_circulars", "arguments": ""}]


def test_an_echo_whose_id_is_no_text_is_read_as_without_an_id():
    body = _chat_body([_assistant((7, "search_circulars", RIGHT[0]["arguments"]))])
    warnings, evidence = observed(PRODUCTION).examine(body)
    assert warnings == [] and evidence["checked"] == 1 and evidence["reason"] is not None
