"""The client's next request, checked against what was streamed: echoes extracted from every format's
request shape, the bounded index, and each kind of evidence (names, arguments, ids)."""

from __future__ import annotations

import functools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streams import DATA, warning

from accumulator import analyze
from accumulator import echo as echo_module
from accumulator.echo import ObservedCall, ObservedCalls, extract_echoes

PRODUCTION = analyze((DATA / "production_interleaved.sse").read_bytes())  # call_abc, call_xyz


def observed(*results) -> ObservedCalls:
    index = ObservedCalls()
    for n, result in enumerate(results):
        index.record(result, f"flow-{n}")
    return index


def assistant(calls: list[dict]) -> dict:
    """A Chat assistant message echoing these calls."""
    return {
        "role": "assistant",
        "tool_calls": [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in calls
        ],
    }


def chat_follow_up(calls: list[dict], results: list[str] | None = None) -> bytes:
    messages = [{"role": "user", "content": "Find the circulars and my profile."}, assistant(calls)]
    messages += [
        {"role": "tool", "tool_call_id": i, "content": "ok"} for i in results or [c["id"] for c in calls]
    ]
    return json.dumps({"model": "m", "messages": messages}).encode()


RIGHT = [
    {"id": "call_abc", "name": "search_circulars", "arguments": '{"query": "RBI circulars"}'},
    {"id": "call_xyz", "name": "get_user_profile", "arguments": '{"user_id": "u123"}'},
]


def test_a_faithful_echo_raises_nothing_even_reformatted():
    reformatted = [{**RIGHT[0], "arguments": '{"query":"RBI circulars"}'}, RIGHT[1]]  # same JSON value
    assert observed(PRODUCTION).check(chat_follow_up(RIGHT)) == []
    assert observed(PRODUCTION).check(chat_follow_up(reformatted)) == []


def test_recency_built_calls_are_caught_with_the_splice_named():
    recency = [
        {**RIGHT[0], "arguments": ""},
        {**RIGHT[1], "arguments": '{"query": "RBI{"user_id": "u circulars"}123"}'},
    ]
    found = observed(PRODUCTION).check(chat_follow_up(recency))
    assert [w["code"] for w in found] == ["client-misassembled", "client-misassembled"]
    spliced = found[1]
    assert spliced["severity"] == "warning" and spliced["earlier_flow"] == "flow-0"
    assert spliced["arguments_splice"] == ["call_abc", "call_xyz"]
    assert spliced["observed"]["arguments"] == '{"user_id": "u123"}'
    assert spliced["echoed"]["arguments"] == recency[1]["arguments"]
    assert "splice of the arguments of call_abc, call_xyz" in spliced["message"]


def test_a_concatenated_name_is_named_as_such():
    # The production incident: the follow-up requests carried search_circularsearch_circular.
    doubled = [{**RIGHT[0], "name": "search_circularssearch_circulars"}, RIGHT[1]]
    (found,) = observed(PRODUCTION).check(chat_follow_up(doubled))
    assert found["name_concatenation"] == ["search_circulars", "search_circulars"]
    assert "arguments_splice" not in found


def test_ids_glued_from_observed_ids_are_caught():
    glued = [{**RIGHT[0], "id": "call_abccall_abc"}, RIGHT[1]]
    found = observed(PRODUCTION).check(chat_follow_up(glued))
    # call_abc itself was never answered: the client answered a glued id in its place.
    assert [(w["code"], w["id"]) for w in found] == [
        ("client-misassembled", "call_abccall_abc"),
        ("unanswered-call", "call_abc"),
    ]
    assert found[0]["glued_ids"] == ["call_abc", "call_abc"]


def test_unknown_ids_only_in_a_conversation_we_saw():
    invented = [RIGHT[0], {**RIGHT[1], "id": "call_made_up"}]
    found = observed(PRODUCTION).check(chat_follow_up(invented, ["call_abc", "call_made_up", "call_other"]))
    assert [(w["code"], w["severity"], w["id"]) for w in found] == [
        ("unknown-tool-call-id", "info", "call_made_up"),
        ("unknown-tool-call-id", "info", "call_other"),
        ("unanswered-call", "warning", "call_xyz"),  # the call the made-up id stood in for
    ]
    # History from elsewhere: no id of it was ever observed, so nothing is said.
    foreign = [
        {"id": "call_1", "name": "f", "arguments": "{}"},
        {"id": "call_2", "name": "g", "arguments": "{}"},
    ]
    assert observed(PRODUCTION).check(chat_follow_up(foreign)) == []


def test_a_call_cut_at_the_argument_cap_is_not_compared_with_its_echo():
    # call_abc's arguments (26 characters) are cut at 20; call_xyz's (19) are whole.
    cut = analyze((DATA / "production_interleaved.sse").read_bytes(), max_argument_chars=20)
    assert [c["arguments_truncated"] for c in cut["choices"][0]["tool_calls"]] == [True, False]
    # The client got the whole arguments: its echo differs from what was kept, and is no evidence.
    assert observed(cut).check(chat_follow_up(RIGHT)) == []
    assert (
        observed(cut).check(chat_follow_up([{**RIGHT[0], "arguments": '{"query": "other"}'}, RIGHT[1]])) == []
    )
    # The whole call is still compared, and so is the cut call's name, which was never cut.
    wrong_whole = observed(cut).check(chat_follow_up([RIGHT[0], {**RIGHT[1], "arguments": "{}"}]))
    assert [(w["code"], w["id"]) for w in wrong_whole] == [("client-misassembled", "call_xyz")]
    wrong_name = observed(cut).check(chat_follow_up([{**RIGHT[0], "name": "search"}, RIGHT[1]]))
    assert [(w["code"], w["id"]) for w in wrong_name] == [("client-misassembled", "call_abc")]


def test_the_index_stays_within_its_bound():
    index = ObservedCalls(size=3)
    for n in range(50):
        result = {
            "format": "openai-chat",
            "choices": [
                {"tool_calls": [{"id": f"c{n}_{k}", "name": "f", "arguments": "{}"} for k in range(2)]}
            ],
        }
        index.record(result, f"flow-{n}")
        assert len(index) <= 3
    assert index.get("c49_1") is not None and index.get("c0_0") is None
    assert len(index._by_flow) <= 3


def test_ids_a_provider_uses_again_keep_the_index_bounded_and_each_flow_its_own_calls():
    # The fake provider (and a local model's ``call_0``) sends the same ids in every response: the index
    # kept a list per flow for ever (the proxy's and the worker's, a flow each), and an earlier flow's
    # siblings named the later flow's calls.
    index = ObservedCalls(size=100)
    for n in range(5_000):
        calls = [{"id": f"call_{k}", "name": f"f{n}", "arguments": "{}"} for k in range(2)]
        index.record({"format": "openai-chat", "choices": [{"tool_calls": calls}]}, f"flow-{n}")
    assert len(index) == 2 and list(index._by_flow) == ["flow-4999"]
    assert [c.name for c in index.siblings("flow-4999")] == ["f4999", "f4999"]
    assert index.siblings("flow-4998") == []
    # One of two ids used again: the earlier flow keeps the other.
    index.record(
        {
            "format": "openai-chat",
            "choices": [{"tool_calls": [{"id": "call_0", "name": "g", "arguments": "{}"}]}],
        },
        "flow-5000",
    )
    assert [c.id for c in index.siblings("flow-4999")] == ["call_1"]
    assert [c.name for c in index.siblings("flow-5000")] == ["g"]


def held_bytes(index: ObservedCalls) -> tuple[int, int]:
    """The argument characters the index holds, counted from what it holds: (calls with ids, without)."""
    with_ids = [*index._calls.values(), *(c for versions in index._earlier.values() for c in versions)]
    without = [c for _, _, calls, _ in index._anonymous for c in calls]
    return sum(len(c.arguments) for c in with_ids), sum(len(c.arguments) for c in without)


def test_the_index_holds_at_most_its_bytes_of_arguments_whatever_the_number_of_calls():
    # An agent writing files: each call's arguments a file's content, 40 KiB. Bounded in calls alone, the
    # index kept 10,000 of them: 400 MiB, in the proxy and again in its worker.
    index = ObservedCalls(max_bytes=1024 * 1024)
    content = "x" * 40_000
    for n in range(200):
        call = {"id": f"call_{n}", "name": "write_file", "arguments": json.dumps({"content": content})}
        index.record(chat_result([call]), f"flow-{n}")
        assert index._bytes <= 1024 * 1024 and held_bytes(index) == (index._bytes, 0)
    kept = len(index)
    assert kept == 1024 * 1024 // len(json.dumps({"content": content}))  # 26 of 200
    assert index.get("call_199") is not None and index.get(f"call_{199 - kept}") is None
    assert list(index._by_flow) == [f"flow-{n}" for n in range(200 - kept, 200)]
    # Small calls are bounded by their number, as before.
    index = ObservedCalls(size=100, max_bytes=1024 * 1024)
    for n in range(2_000):
        index.record(chat_result([{"id": f"small_{n}", "name": "f", "arguments": "{}"}]), f"small-{n}")
    assert len(index) == 100 and held_bytes(index) == (index._bytes, 0) == (200, 0)


def test_the_bytes_bound_counts_an_ids_earlier_calls_and_a_call_told_twice_once():
    index = ObservedCalls(max_bytes=100)
    for n in range(30):  # an id used again every turn, 10 characters a call: ten turns fit
        index.record(
            chat_result([{"id": "call_0", "name": "f", "arguments": f'{{"n": {n:03}}}'[:10]}]), f"f{n}"
        )
        assert index._bytes <= 100 and held_bytes(index) == (index._bytes, 0)
    assert len(index) == 1 and index._versions == 9
    # The same response recorded again (the proxy tells its worker of a result it made): counted once.
    again = chat_result([{"id": "call_0", "name": "f", "arguments": '{"n": 029}'[:10]}])
    before = index._bytes
    index.record(again, "f29")
    assert index._bytes == before == held_bytes(index)[0]
    # An id's earlier calls beyond EARLIER_CALLS leave the count of bytes as they leave the index.
    index = ObservedCalls()
    for n in range(100):
        index.record(chat_result([{"id": "call_0", "name": "f", "arguments": "a" * n}]), f"flow-{n}")
    assert index._versions == echo_module.EARLIER_CALLS and held_bytes(index) == (index._bytes, 0)
    assert index._bytes == sum(range(100 - echo_module.EARLIER_CALLS - 1, 100))


def test_responses_without_ids_hold_at_most_their_own_bytes_of_arguments():
    index = ObservedCalls(max_bytes=50_000)
    for n in range(40):
        gemini = {
            "format": "gemini",
            "choices": [{"index": 0, "tool_calls": [{"id": None, "name": "w", "arguments": "y" * 12_000}]}],
        }
        index.record(gemini, f"flow-{n}")
        assert index._anonymous_bytes <= 50_000 and held_bytes(index) == (0, index._anonymous_bytes)
    assert [flow for flow, *_ in index._anonymous] == ["flow-36", "flow-37", "flow-38", "flow-39"]
    # Past ANONYMOUS_RESPONSES, the oldest leave the count as the deque lets them go.
    index = ObservedCalls()
    for n in range(echo_module.ANONYMOUS_RESPONSES + 10):
        index.record(
            {
                "format": "gemini",
                "choices": [{"index": 0, "tool_calls": [{"id": None, "name": "w", "arguments": "zz"}]}],
            },
            f"flow-{n}",
        )
    assert held_bytes(index) == (0, index._anonymous_bytes) == (0, 2 * echo_module.ANONYMOUS_RESPONSES)


def turns_follow_up(turns: list[list[dict]]) -> bytes:
    """A Chat follow-up carrying several tool-calling turns, each answered in full."""
    messages: list[dict] = [{"role": "user", "content": "List the repository."}]
    for calls in turns:
        messages.append(assistant(calls))
        messages += [{"role": "tool", "tool_call_id": c["id"], "content": "ok"} for c in calls]
    return json.dumps({"model": "m", "messages": messages}).encode()


def chat_result(calls: list[dict]) -> dict:
    return {"format": "openai-chat", "choices": [{"index": 0, "tool_calls": calls}]}


# kimi-k3 on Fireworks names each call ``{tool}:{position in its turn}`` and starts again every turn
# (fw-ai/fireconnect#16); other OpenAI-compatible backends send ``call_0``, ``call_1`` in every response
# (NVIDIA-NeMo/Switchyard#502).
TURN_1 = [
    {"id": "list_dir:0", "name": "list_dir", "arguments": '{"path": "."}'},
    {"id": "read_file:1", "name": "read_file", "arguments": '{"path": "README.md"}'},
]
TURN_2 = [{"id": "list_dir:0", "name": "list_dir", "arguments": '{"path": "/"}'}]
TURN_3 = [{"id": "list_dir:0", "name": "list_dir", "arguments": '{"path": "/etc"}'}]


def test_ids_a_provider_numbers_per_turn_pair_each_echo_with_its_own_turns_call():
    # The same id, three turns, three calls: the follow-up echoes each turn's call as streamed. Checked
    # against the newest call of that id alone, the first two were "client-misassembled".
    index = ObservedCalls()
    for n, calls in enumerate([TURN_1, TURN_2, TURN_3]):
        index.record(chat_result(calls), f"flow-{n}")
    warnings, evidence = index.examine(turns_follow_up([TURN_1, TURN_2, TURN_3]), "openai-chat")
    assert warnings == []
    assert evidence["checked"] == 8 and evidence["matched"] == 4 and evidence["unanswered"] == []
    assert evidence["earlier_flows"] == ["flow-0", "flow-1", "flow-2"]
    # A client that did misassemble an earlier turn's call is told so against that turn's call.
    wrong = [{**TURN_2[0], "arguments": '{"path": "/etc/"}'}]
    warnings, evidence = index.examine(turns_follow_up([TURN_1, wrong, TURN_3]), "openai-chat")
    (warning,) = warnings
    assert warning["code"] == "client-misassembled" and warning["earlier_flow"] == "flow-1"
    assert warning["observed"]["arguments"] == '{"path": "/"}' and evidence["matched"] == 3
    # Echoed in another order than streamed, each echo still finds its call.
    warnings, evidence = index.examine(turns_follow_up([TURN_1, TURN_3, TURN_2]), "openai-chat")
    assert warnings == [] and evidence["matched"] == 4


def test_the_earlier_calls_of_an_id_count_in_the_index_bound():
    index = ObservedCalls(size=10)
    for n in range(50):
        index.record(chat_result([{"id": "call_0", "name": "f", "arguments": f'{{"n": {n}}}'}]), f"flow-{n}")
        assert len(index) + index._versions <= 10
    assert sum(len(v) for v in index._earlier.values()) == index._versions == 9
    # The newest ten turns are paired; the turns whose calls went are not checked (no warning either).
    turns = [[{"id": "call_0", "name": "f", "arguments": f'{{"n": {n}}}'}] for n in range(50)]
    warnings, evidence = index.examine(turns_follow_up(turns), "openai-chat")
    assert warnings == [] and evidence["matched"] == 10
    assert evidence["earlier_flows"] == [f"flow-{n}" for n in range(40, 50)]
    # More than EARLIER_CALLS turns of one id: the oldest go first, within a larger bound too.
    index = ObservedCalls(size=1_000)
    for n in range(100):
        index.record(chat_result([{"id": "call_0", "name": "f", "arguments": f'{{"n": {n}}}'}]), f"flow-{n}")
    assert index._versions == echo_module.EARLIER_CALLS and len(index) == 1


def test_an_echoed_call_is_used_again_and_outlives_calls_recorded_after_it():
    # Least recently used, not first in first out: the oldest call, echoed back, is kept, and the
    # call recorded after it, never echoed, goes when a new one comes.
    index = ObservedCalls(size=3)
    for n in range(3):
        one = {"id": f"call_{n}", "name": "f", "arguments": "{}"}
        index.record({"format": "openai-chat", "choices": [{"tool_calls": [one]}]}, f"flow-{n}")
    assert index.check(chat_follow_up([{"id": "call_0", "name": "f", "arguments": "{}"}])) == []
    index.record(
        {
            "format": "openai-chat",
            "choices": [{"tool_calls": [{"id": "call_3", "name": "f", "arguments": "{}"}]}],
        },
        "flow-3",
    )
    assert index.get("call_0") is not None and index.get("call_1") is None
    assert {c for c in ("call_0", "call_2", "call_3") if index.get(c)} == {"call_0", "call_2", "call_3"}


@pytest.mark.parametrize(
    "request_body,calls,results",
    [
        (  # OpenAI Responses
            {
                "input": [
                    {"role": "user", "content": "hi"},
                    {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"a":1}'},
                    {"type": "function_call_output", "call_id": "c1", "output": "ok"},
                ]
            },
            [("c1", "f", '{"a":1}')],
            ["c1"],
        ),
        (  # Anthropic
            {
                "messages": [
                    {
                        "role": "assistant",
                        "content": [
                            {"type": "text", "text": "x"},
                            {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}},
                        ],
                    },
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
                    },
                ]
            },
            [("t1", "f", '{"a":1}')],
            ["t1"],
        ),
        (  # Gemini
            {
                "contents": [
                    {
                        "role": "model",
                        "parts": [{"functionCall": {"id": "g1", "name": "f", "args": {"a": 1}}}],
                    },
                    {
                        "role": "user",
                        "parts": [{"functionResponse": {"id": "g1", "name": "f", "response": {}}}],
                    },
                ]
            },
            [("g1", "f", '{"a":1}')],
            ["g1"],
        ),
        (  # Bedrock Converse
            {
                "messages": [
                    {
                        "role": "assistant",
                        "content": [{"toolUse": {"toolUseId": "b1", "name": "f", "input": {"a": 1}}}],
                    },
                    {
                        "role": "user",
                        "content": [{"toolResult": {"toolUseId": "b1", "content": [{"text": "ok"}]}}],
                    },
                ]
            },
            [("b1", "f", '{"a":1}')],
            ["b1"],
        ),
        (  # Chat, Cohere v2, Ollama
            {
                "messages": [
                    {
                        "role": "assistant",
                        "tool_calls": [{"id": "o1", "function": {"name": "f", "arguments": {"a": 1}}}],
                    },
                    {"role": "tool", "tool_call_id": "o1", "content": "ok"},
                ]
            },
            [("o1", "f", '{"a":1}')],
            ["o1"],
        ),
    ],
)
def test_echoes_are_read_from_every_formats_request(request_body, calls, results):
    echoed, answered = extract_echoes(json.dumps(request_body).encode())
    assert [(c.id, c.name, c.arguments) for c in echoed] == calls
    assert answered == results


def test_anthropic_echo_of_a_spliced_call_is_caught():
    body = (DATA / "anthropic_messages_parallel.sse").read_bytes()
    result = analyze(body, "anthropic-messages")
    request = {
        "messages": [
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "toolu_01A9sWq3Lk7Zr2Vb8Nx4Pd6T",
                        "name": "get_weather",
                        "input": {},
                    },
                    {
                        "type": "tool_use",
                        "id": "toolu_01H2cMv8Yt5Qe1Kw6Rz3Ju9B",
                        "name": "get_time",
                        "input": {"tz": "Europe/Paris"},
                    },
                ],
            }
        ]
    }
    found = observed(result).check(json.dumps(request))
    assert [w["id"] for w in found] == ["toolu_01A9sWq3Lk7Zr2Vb8Nx4Pd6T"]
    assert warning({"warnings": found}, "client-misassembled")["echoed"]["arguments"] == "{}"


def test_a_call_left_out_of_a_follow_up_that_answers_its_sibling_is_a_dropped_call():
    # opencode under collide-index: it ran and answered the first call, never the second.
    warnings, evidence = observed(PRODUCTION).examine(chat_follow_up(RIGHT[:1], ["call_abc"]))
    assert [(w["code"], w["severity"], w["id"], w["earlier_flow"]) for w in warnings] == [
        ("unanswered-call", "warning", "call_xyz", "flow-0")
    ]
    assert evidence["unanswered"] == ["call_xyz"] and evidence["matched"] == 1


def test_a_call_echoed_but_never_answered_is_unanswered_too():
    warnings, _ = observed(PRODUCTION).examine(chat_follow_up(RIGHT, ["call_abc"]))
    assert [(w["code"], w["id"]) for w in warnings] == [("unanswered-call", "call_xyz")]


def test_results_alone_are_evidence():
    # Responses with previous_response_id: the follow-up carries only function_call_output items.
    responses = analyze((DATA / "openai_responses_parallel.sse").read_bytes(), "openai-responses")
    ids = [c["id"] for c in responses["choices"][0]["tool_calls"]]
    follow_up = {"input": [{"type": "function_call_output", "call_id": ids[0], "output": "ok"}]}
    warnings, evidence = observed(responses).examine(json.dumps(follow_up).encode(), "openai-responses")
    assert [(w["code"], w["id"]) for w in warnings] == [("unanswered-call", ids[1])]
    assert evidence["checked"] == 1 and evidence["earlier_flows"] == ["flow-0"]


def test_a_correct_echo_leaves_a_trace_and_so_does_a_check_that_could_not_be_made():
    _, right = observed(PRODUCTION).examine(chat_follow_up(RIGHT))
    assert right == {
        "checked": 4,
        "matched": 2,
        "unanswered": [],
        "unknown": [],
        "earlier_flows": ["flow-0"],
        "reason": None,
    }
    _, nothing = observed(PRODUCTION).examine(json.dumps({"messages": [{"role": "user", "content": "hi"}]}))
    assert nothing["checked"] == 0 and "echoes no tool call" in nothing["reason"]
    foreign = [{"id": "call_1", "name": "f", "arguments": "{}"}]
    _, elsewhere = observed(PRODUCTION).examine(chat_follow_up(foreign))
    assert elsewhere["checked"] == 2 and "begun elsewhere" in elsewhere["reason"]


# Gemini streams name no call ids, and Gemini CLI makes its own (run_shell_command_<ms>_0): its echoes are
# matched by turn, position and name.
GEMINI_NO_IDS = analyze(
    json.dumps(
        [
            {
                "candidates": [
                    {
                        "content": {
                            "role": "model",
                            "parts": [
                                {"functionCall": {"name": "run_shell_command", "args": {"command": "ls"}}},
                                {"functionCall": {"name": "read_file", "args": {"path": "a.txt"}}},
                            ],
                        },
                        "finishReason": "STOP",
                    }
                ]
            }
        ]
    ).encode(),
    "gemini",
)


def gemini_follow_up(calls: list[tuple[str, dict]], answered: int | None = None) -> bytes:
    """Gemini CLI's next request: the model turn's calls with ids of its own, and their responses."""
    ids = [f"{name}_1767225600000_{n}" for n, (name, _) in enumerate(calls)]
    answered = len(calls) if answered is None else answered
    return json.dumps(
        {
            "contents": [
                {"role": "user", "parts": [{"text": "list and read"}]},
                {
                    "role": "model",
                    "parts": [
                        {"functionCall": {"id": i, "name": n, "args": a}}
                        for i, (n, a) in zip(ids, calls, strict=True)
                    ],
                },
                {
                    "role": "user",
                    "parts": [
                        {"functionResponse": {"id": i, "name": n, "response": {"output": "ok"}}}
                        for i, (n, _) in list(zip(ids, calls, strict=True))[:answered]
                    ],
                },
            ]
        }
    ).encode()


def test_gemini_echoes_are_matched_by_position_and_name():
    assert [c["id"] for c in GEMINI_NO_IDS["choices"][0]["tool_calls"]] == [None, None]
    right = [("run_shell_command", {"command": "ls"}), ("read_file", {"path": "a.txt"})]
    warnings, evidence = observed(GEMINI_NO_IDS).examine(gemini_follow_up(right), "gemini")
    assert warnings == [] and evidence["matched"] == 2 and evidence["earlier_flows"] == ["flow-0"]


def test_a_gemini_echo_with_a_glued_name_and_wrong_arguments_is_caught():
    glued = [("run_shell_commandread_file", {"command": "ls", "path": "a.txt"})]
    warnings, _ = observed(GEMINI_NO_IDS).examine(gemini_follow_up(glued), "gemini")
    (found,) = [w for w in warnings if w["code"] == "client-misassembled"]
    assert found["name_concatenation"] == ["run_shell_command", "read_file"]
    assert found["earlier_flow"] == "flow-0" and found["position"] == 0
    wrong = [("run_shell_command", {"command": "rm -rf /"}), ("read_file", {"path": "a.txt"})]
    warnings, evidence = observed(GEMINI_NO_IDS).examine(gemini_follow_up(wrong), "gemini")
    assert [(w["code"], w["position"]) for w in warnings] == [("client-misassembled", 0)]
    assert evidence["matched"] == 1


def test_a_gemini_client_that_drops_a_call_is_caught():
    warnings, evidence = observed(GEMINI_NO_IDS).examine(
        gemini_follow_up([("run_shell_command", {"command": "ls"})]), "gemini"
    )
    assert [(w["code"], w["name"], w["position"]) for w in warnings] == [("unanswered-call", "read_file", 1)]
    assert evidence["unanswered"] == ["flow-0#1"] and evidence["matched"] == 1


def test_a_gemini_client_that_drops_the_first_call_is_caught_as_a_drop_not_a_misassembly():
    warnings, evidence = observed(GEMINI_NO_IDS).examine(
        gemini_follow_up([("read_file", {"path": "a.txt"})]), "gemini"
    )
    assert [(w["code"], w["name"], w["position"]) for w in warnings] == [
        ("unanswered-call", "run_shell_command", 0)
    ]
    assert evidence["unanswered"] == ["flow-0#0"] and evidence["matched"] == 1
    # The echo is compared with the call of its name: wrong arguments there are still a misassembly.
    warnings, evidence = observed(GEMINI_NO_IDS).examine(
        gemini_follow_up([("read_file", {"path": "b.txt"})]), "gemini"
    )
    assert sorted((w["code"], w["position"]) for w in warnings) == [
        ("client-misassembled", 1),
        ("unanswered-call", 0),
    ]
    assert evidence["matched"] == 0


def test_the_calls_of_a_choice_the_client_did_not_carry_on_are_not_unanswered():
    # Chat with n=2: two choices, each with a call; the client goes on with choice 0 and answers its call.
    def chunk(index, call_id, name):
        call = {"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}
        return {"choices": [{"index": index, "delta": {"tool_calls": [call]}, "finish_reason": None}]}

    def done(index):
        return {"choices": [{"index": index, "delta": {}, "finish_reason": "tool_calls"}]}

    body = (
        b"".join(
            b"data: " + json.dumps(c).encode() + b"\n\n"
            for c in (chunk(0, "call_a", "f"), chunk(1, "call_b", "g"), done(0), done(1))
        )
        + b"data: [DONE]\n\n"
    )
    two_choices = analyze(body)
    warnings, evidence = observed(two_choices).examine(
        chat_follow_up([{"id": "call_a", "name": "f", "arguments": "{}"}], ["call_a"])
    )
    assert warnings == [] and evidence["unanswered"] == [] and evidence["matched"] == 1


# What a mutation run found untested: the splice check's own rules.


def _interleaving_by_brute_force(a: str, b: str, text: str) -> bool:
    @functools.cache
    def fits(i: int, j: int) -> bool:
        if i + j == len(text):
            return i == len(a) and j == len(b)
        c = text[i + j]
        return (i < len(a) and a[i] == c and fits(i + 1, j)) or (j < len(b) and b[j] == c and fits(i, j + 1))

    return len(a) + len(b) == len(text) and fits(0, 0)


@settings(max_examples=600, deadline=None)
@given(st.text("ab{}", max_size=6), st.text("ab{}", max_size=6), st.data())
def test_interleaves_is_exactly_a_cut_of_text_into_both_in_order(a, b, data):
    mixed = list(a + b)
    # Half the time a true interleaving (a random merge), else any shuffle of the same letters.
    if data.draw(st.booleans()):
        picks = data.draw(st.permutations([0] * len(a) + [1] * len(b)))
        rest = [list(a), list(b)]
        mixed = [rest[p].pop(0) for p in picks]
    else:
        mixed = data.draw(st.permutations(mixed))
    text = "".join(mixed)
    assert echo_module._interleaves(a, b, text) == _interleaving_by_brute_force(a, b, text)


def _observed(call_id: str, arguments: str, cut: bool = False) -> ObservedCall:
    return ObservedCall(call_id, "f", arguments, "flow-0", "openai-chat", arguments_cut=cut)


def test_a_splice_needs_two_whole_argument_texts_whose_lengths_add_up():
    a, b = _observed("a", '{"x": 1}'), _observed("b", '{"y": 2}')
    spliced = '{"x{"y": 2}": 1}'
    assert echo_module._splice_of(spliced, [a, b]) == ["a", "b"]
    assert echo_module._splice_of(spliced + " ", [a, b]) is None  # one letter more: no splice
    assert echo_module._splice_of(spliced[:-1], [a, b]) is None
    assert echo_module._splice_of(spliced, [a, _observed("b", '{"y": 2}', cut=True)]) is None
    assert echo_module._splice_of(spliced, [_observed("a", '{"x": 1}', cut=True), b]) is None
    assert echo_module._splice_of('{"x": 1}', [a, _observed("e", "")]) is None  # an empty one splices nothing
    assert echo_module._splice_of('{"x": 1}', [_observed("e", ""), a]) is None


def test_the_splice_check_looks_at_texts_up_to_its_cap(monkeypatch):
    monkeypatch.setattr(echo_module, "_SPLICE_CAP", 16)
    a, b = _observed("a", '{"x": 1}'), _observed("b", '{"y": 2}')
    assert echo_module._splice_of('{"x{"y": 2}": 1}', [a, b]) == ["a", "b"]  # 16 letters: at the cap
    monkeypatch.setattr(echo_module, "_SPLICE_CAP", 15)
    assert echo_module._splice_of('{"x{"y": 2}": 1}', [a, b]) is None


def test_an_echoed_id_never_streamed_beside_known_ones_is_unknown():
    stranger = {"id": "call_zzz", "name": "get_user_profile", "arguments": '{"user_id": "u123"}'}
    warnings, evidence = observed(PRODUCTION).examine(chat_follow_up([RIGHT[0], stranger]))
    assert ("unknown-tool-call-id", "call_zzz") in [(w["code"], w["id"]) for w in warnings]
    assert evidence["unknown"] == ["call_zzz"]


def test_an_echo_without_results_that_leaves_a_call_out_is_a_dropped_call():
    # Where the results name no call (a tool message without its id), the echoes say what was carried on.
    body = json.loads(chat_follow_up(RIGHT[:1]))
    body["messages"] = [m for m in body["messages"] if m["role"] != "tool"]
    body["messages"].append({"role": "tool", "content": "ok"})
    warnings, evidence = observed(PRODUCTION).examine(json.dumps(body).encode())
    assert [(w["code"], w["id"]) for w in warnings] == [("unanswered-call", "call_xyz")]
    assert evidence["unanswered"] == ["call_xyz"]


def test_an_echo_without_an_id_does_not_hide_the_echoes_after_it():
    nameless = {**RIGHT[0], "id": ""}
    _, evidence = observed(PRODUCTION).examine(chat_follow_up([nameless, RIGHT[1]], ["call_xyz"]))
    assert evidence["matched"] == 1 and evidence["earlier_flows"] == ["flow-0"]


def test_a_wrong_name_says_what_it_was_and_names_a_concatenation_only_of_two_or_more():
    glued = [{**RIGHT[0], "name": "search_circularsget_user_profile"}, RIGHT[1]]
    (found,) = observed(PRODUCTION).check(chat_follow_up(glued))
    assert (
        "name 'search_circularsget_user_profile' instead of 'search_circulars' "
        "(a concatenation of search_circulars + get_user_profile)" in found["message"]
    )
    swapped = [{**RIGHT[0], "name": "get_user_profile"}, RIGHT[1]]
    (found,) = observed(PRODUCTION).check(chat_follow_up(swapped))
    assert "name_concatenation" not in found and "concatenation" not in found["message"]


def test_a_gemini_echo_of_a_tool_never_streamed_is_left_unchecked():
    warnings, evidence = observed(GEMINI_NO_IDS).examine(
        gemini_follow_up([("web_search", {"q": "x"})]), "gemini"
    )
    assert warnings == [] and evidence["reason"] and evidence["matched"] == 0


def _gemini_stream(*calls: tuple[str, dict]) -> dict:
    parts = [{"functionCall": {"name": name, "args": args}} for name, args in calls]
    candidate = {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
    return analyze(json.dumps([{"candidates": [candidate]}]).encode(), "gemini")


def test_each_gemini_model_turn_is_matched_with_its_own_response():
    first = _gemini_stream(("run_shell_command", {"command": "ls"}), ("read_file", {"path": "a.txt"}))
    second = _gemini_stream(("run_shell_command", {"command": "cat a.txt"}))
    history = json.loads(
        gemini_follow_up([("run_shell_command", {"command": "ls"}), ("read_file", {"path": "a.txt"})])
    )
    history["contents"] += json.loads(gemini_follow_up([("run_shell_command", {"command": "cat a.txt"})]))[
        "contents"
    ][1:]
    warnings, evidence = observed(first, second).examine(json.dumps(history).encode(), "gemini")
    assert warnings == [] and evidence["matched"] == 3
    assert sorted(evidence["earlier_flows"]) == ["flow-0", "flow-1"]


def test_an_id_less_echo_checked_after_it_was_sent_is_matched_with_the_responses_that_ended_before():
    # The addon's worker checks a request as its response begins, not as it passes: a response of the
    # same tools that ended meanwhile (another agent's) is newer, and no client could have echoed it.
    right = [("run_shell_command", {"command": "ls"}), ("read_file", {"path": "a.txt"})]
    later = _gemini_stream(("run_shell_command", {"command": "ls -la"}), ("read_file", {"path": "a.txt"}))
    index = ObservedCalls()
    index.record(GEMINI_NO_IDS, "asked", ended=100.0)
    index.record(later, "meanwhile", ended=105.0)
    follow_up = gemini_follow_up(right)
    warnings, evidence = index.examine(follow_up, "gemini", sent=102.0)
    assert warnings == [] and evidence["matched"] == 2 and evidence["earlier_flows"] == ["asked"]
    # Checked as it passes (no time), or after both ended, the newest response is the one matched.
    for sent in (None, 106.0):
        warnings, evidence = index.examine(follow_up, "gemini", sent=sent)
        assert evidence["earlier_flows"] == ["meanwhile"]
        assert [w["code"] for w in warnings] == ["client-misassembled"]
    # A response whose end is not known is matched whenever the check is made.
    unknown = ObservedCalls()
    unknown.record(GEMINI_NO_IDS, "asked", ended=100.0)
    unknown.record(later, "untimed")
    assert unknown.examine(follow_up, "gemini", sent=102.0)[1]["earlier_flows"] == ["untimed"]


def test_an_id_less_echo_is_matched_only_with_responses_of_its_own_format():
    ollama = analyze(
        b'{"model":"m","message":{"role":"assistant","content":"","tool_calls":['
        b'{"function":{"name":"run_shell_command","arguments":{"command":"rm -rf /"}}},'
        b'{"function":{"name":"read_file","arguments":{"path":"b.txt"}}}]},"done":false}\n'
        b'{"model":"m","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop"}\n',
        "ollama-chat",
    )
    assert [c["id"] for c in ollama["choices"][0]["tool_calls"]] == [None, None]
    right = [("run_shell_command", {"command": "ls"}), ("read_file", {"path": "a.txt"})]
    # The Ollama response is the newer one, with the same names: a Gemini request is not its follow-up.
    warnings, evidence = observed(GEMINI_NO_IDS, ollama).examine(gemini_follow_up(right), "gemini")
    assert warnings == [] and evidence["matched"] == 2 and evidence["earlier_flows"] == ["flow-0"]


def test_after_a_glued_gemini_echo_the_next_echo_is_compared_with_the_call_after_those_it_joins():
    three = _gemini_stream(
        ("run_shell_command", {"command": "ls"}),
        ("read_file", {"path": "a.txt"}),
        ("web_fetch", {"url": "u"}),
    )
    glued = [("run_shell_commandread_file", {"command": "ls", "path": "a.txt"}), ("web_fetch", {"url": "u"})]
    warnings, evidence = observed(three).examine(gemini_follow_up(glued), "gemini")
    [(code, position, pieces)] = [(w["code"], w["position"], w.get("name_concatenation")) for w in warnings]
    assert (code, position, pieces) == ("client-misassembled", 0, ["run_shell_command", "read_file"])
    assert evidence["matched"] == 1 and evidence["unanswered"] == []
    # Glued, and the call after left out: that one was dropped.
    warnings, evidence = observed(three).examine(gemini_follow_up(glued[:1]), "gemini")
    assert sorted((w["code"], w["position"]) for w in warnings) == [
        ("client-misassembled", 0),
        ("unanswered-call", 2),
    ]
    assert evidence["unanswered"] == ["flow-0#2"]
    # An echo that is neither the call at its place nor a concatenation says so, without a concatenation.
    odd = [("run_shell_commandread_file", {}), ("read_file", {"path": "a.txt"})]
    warnings, _ = observed(three).examine(gemini_follow_up(odd), "gemini")
    second = next(w for w in warnings if w["position"] == 2)
    assert second["code"] == "client-misassembled" and "name_concatenation" not in second
    assert "concatenation" not in second["message"] and second["observed"]["name"] == "web_fetch"


def test_gemini_turns_answer_the_responses_newest_first():
    # Two turns calling the same tool: the newer turn is the follow-up of the newer response.
    older = _gemini_stream(("run_shell_command", {"command": "ls"}))
    newer = _gemini_stream(("run_shell_command", {"command": "cat a.txt"}))
    history = json.loads(gemini_follow_up([("run_shell_command", {"command": "ls"})]))
    history["contents"] += json.loads(gemini_follow_up([("run_shell_command", {"command": "cat a.txt"})]))[
        "contents"
    ][1:]
    warnings, evidence = observed(older, newer).examine(json.dumps(history).encode(), "gemini")
    assert warnings == [] and evidence["matched"] == 2


def test_a_gemini_turn_that_matches_nothing_does_not_stop_the_older_ones_being_checked():
    history = json.loads(
        gemini_follow_up([("run_shell_command", {"command": "ls"}), ("read_file", {"path": "a.txt"})])
    )
    history["contents"] += json.loads(gemini_follow_up([("web_search", {"q": "x"})]))["contents"][1:]
    warnings, evidence = observed(GEMINI_NO_IDS).examine(json.dumps(history).encode(), "gemini")
    assert warnings == [] and evidence["matched"] == 2 and evidence["earlier_flows"] == ["flow-0"]


def test_a_glued_gemini_echo_between_right_ones_is_the_only_one_flagged():
    four = _gemini_stream(
        ("run_shell_command", {"command": "ls"}),
        ("read_file", {"path": "a.txt"}),
        ("web_fetch", {"url": "u"}),
        ("glob", {"pattern": "*"}),
    )
    echo = [
        ("run_shell_command", {"command": "ls"}),
        ("read_fileweb_fetch", {"path": "a.txt", "url": "u"}),
        ("glob", {"pattern": "*"}),
    ]
    warnings, evidence = observed(four).examine(gemini_follow_up(echo), "gemini")
    assert [(w["code"], w["position"], w.get("name_concatenation")) for w in warnings] == [
        ("client-misassembled", 1, ["read_file", "web_fetch"])
    ]
    assert evidence["matched"] == 2 and evidence["unanswered"] == []


# Ollama's native stream names each call (`call_...`), but its own libraries keep no id on a tool call:
# the ollama Python library's next request echoes the calls without them and answers each by its tool's
# name (tests/live/test_e2e_sdks.py runs the library itself).
OLLAMA_CALLS = [("get_weather", {"city": "Paris"}), ("get_time", {"tz": "Europe/Paris"})]
OLLAMA_STREAM = analyze(
    b"".join(
        json.dumps(
            {
                "model": "qwen3:8b",
                "message": {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {"id": f"call_{n}x", "function": {"index": n, "name": name, "arguments": args}}
                    ],
                },
                "done": False,
            }
        ).encode()
        + b"\n"
        for n, (name, args) in enumerate(OLLAMA_CALLS)
    )
    + b'{"model":"qwen3:8b","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop"}\n',
    "ollama-chat",
)


def ollama_follow_up(calls: list[tuple[str, dict]], with_ids: bool = False) -> bytes:
    """The ollama library's next request: the assistant message's calls (no ids), a tool message each."""
    echoed = [
        {"function": {"name": name, "arguments": args}} | ({"id": f"call_{n}x"} if with_ids else {})
        for n, (name, args) in enumerate(calls)
    ]
    messages = [
        {"role": "user", "content": "weather and time in Paris"},
        {"role": "assistant", "content": "", "tool_calls": echoed},
        *({"role": "tool", "content": "ok", "tool_name": name} for name, _ in calls),
    ]
    return json.dumps({"model": "qwen3:8b", "messages": messages, "stream": True}).encode()


def test_ollama_echoes_without_the_streamed_ids_are_matched_by_position_and_name():
    assert [c["id"] for c in OLLAMA_STREAM["choices"][0]["tool_calls"]] == ["call_0x", "call_1x"]
    warnings, evidence = observed(OLLAMA_STREAM).examine(ollama_follow_up(OLLAMA_CALLS), "ollama-chat")
    assert warnings == [] and evidence["reason"] is None
    assert evidence["matched"] == 2 and evidence["earlier_flows"] == ["flow-0"]
    # Echoed with the ids (a client that keeps them): matched by id, once.
    warnings, evidence = observed(OLLAMA_STREAM).examine(ollama_follow_up(OLLAMA_CALLS, True), "ollama-chat")
    assert warnings == [] and evidence["matched"] == 2 and evidence["earlier_flows"] == ["flow-0"]


def test_an_ollama_client_that_drops_or_changes_a_call_is_caught_naming_the_streamed_id():
    warnings, evidence = observed(OLLAMA_STREAM).examine(ollama_follow_up(OLLAMA_CALLS[:1]), "ollama-chat")
    assert [(w["code"], w["id"], w["name"], w["position"]) for w in warnings] == [
        ("unanswered-call", "call_1x", "get_time", 1)
    ]
    assert "call 1 call_1x (get_time)" in warnings[0]["message"]
    assert evidence["unanswered"] == ["call_1x"] and evidence["matched"] == 1
    wrong = [OLLAMA_CALLS[0], ("get_time", {"tz": "Europe/Berlin"})]
    warnings, evidence = observed(OLLAMA_STREAM).examine(ollama_follow_up(wrong), "ollama-chat")
    [found] = warnings
    assert (found["code"], found["position"], found["id"]) == ("client-misassembled", 1, None)
    assert found["message"].startswith("call 1 (call_1x, the client echoed none): the client's echo differs")
    assert evidence["matched"] == 1


def test_a_chat_echo_without_ids_is_not_matched_by_position_with_calls_streamed_with_ids():
    # Chat clients keep the ids they were given: an echo without one is a history from elsewhere.
    echo = [{"id": None, **{k: v for k, v in call.items() if k != "id"}} for call in RIGHT]
    warnings, evidence = observed(PRODUCTION).examine(chat_follow_up(echo, []), "openai-chat")
    assert warnings == [] and evidence["earlier_flows"] == [] and evidence["reason"]
