"""OpenAI's built-in tools whose calls the client runs (the OpenAI Agents SDK's ShellTool, ApplyPatchTool,
LocalShellTool and ComputerTool): ``shell_call``, ``apply_patch_call``, ``local_shell_call`` and
``computer_call`` items are calls, whole in their items, each named by its tool's type and said
``builtin``, its arguments the item's object as JSON; declared by the request's tool of that type;
echoed and answered by their ``_output`` items. A hosted shell's call (its item names a container) is the
server's, not a call."""

from __future__ import annotations

import json

import pytest
from schemas import check_result
from streams import codes, named_sse

from accumulator import analyze, analyze_message
from accumulator.echo import ObservedCalls, tool_results
from accumulator.websocket import Connection

TOOLS = [{"type": "shell", "environment": {"type": "local"}}, {"type": "apply_patch"}]
ACTION = {"commands": ["echo hi", "ls"], "timeout_ms": None, "max_output_length": None}
OPERATION = {"type": "create_file", "path": "patched.txt", "diff": "+patched\n"}


def shell_item(*, done: bool = True, environment=None, call_id: str = "call_sh") -> dict:
    action = ACTION if done else {**ACTION, "commands": []}
    item = {"id": "sh_1", "type": "shell_call", "call_id": call_id, "action": action,
            "status": "completed" if done else "in_progress"}  # fmt: skip
    if environment is not None:
        item["environment"] = environment
    return item


def patch_item(*, call_id: str = "call_ap") -> dict:
    return {"id": "apc_1", "type": "apply_patch_call", "call_id": call_id, "operation": OPERATION,
            "status": "completed"}  # fmt: skip


def events(shell: dict | None = None, *, end: bool = True) -> list:
    """A shell call and a patch in parallel: the shell's commands streamed in its own events, one after
    the other, interleaved with the patch's item; each item whole once done."""
    shell = shell_item() if shell is None else shell
    out = [
        ("response.created", {"response": {"id": "resp_1", "model": "gpt-5.5", "status": "in_progress"}}),
        ("response.output_item.added", {"output_index": 0, "item": {**shell, "status": "in_progress", "action": {**ACTION, "commands": []}}}),
        ("response.shell_call_command.added", {"output_index": 0, "command_index": 0, "command": ""}),
        ("response.output_item.added", {"output_index": 1, "item": {**patch_item(), "status": "in_progress"}}),
        ("response.shell_call_command.delta", {"output_index": 0, "command_index": 0, "delta": "echo "}),
        ("response.shell_call_command.delta", {"output_index": 0, "command_index": 0, "delta": "hi"}),
        ("response.shell_call_command.done", {"output_index": 0, "command_index": 0, "command": "echo hi"}),
        ("response.shell_call_command.added", {"output_index": 0, "command_index": 1, "command": "ls"}),
        ("response.shell_call_command.done", {"output_index": 0, "command_index": 1, "command": "ls"}),
        ("response.output_item.done", {"output_index": 1, "item": patch_item()}),
        ("response.output_item.done", {"output_index": 0, "item": shell}),
    ]  # fmt: skip
    if end:
        out.append(("response.completed", {"response": {"id": "resp_1", "status": "completed"}}))
    return out


def calls(result: dict) -> list[tuple]:
    return [
        (c["id"], c["name"], json.loads(c["arguments"]), c.get("builtin"))
        for c in result["choices"][0]["tool_calls"]
    ]


EXPECTED = [
    ("call_ap", "apply_patch", OPERATION, "apply_patch"),  # in the order their items were done
    ("call_sh", "shell", ACTION, "shell"),
]


def test_a_shell_call_and_a_patch_are_calls_named_by_their_tools_type():
    request = {"model": "gpt-5.5", "tools": TOOLS, "input": "say hi, add a file"}
    result = analyze(named_sse(*events()), "openai-responses", request=request)
    check_result(result)
    assert calls(result) == EXPECTED
    # Declared by their types; whole in items that name them: no client routes them by recency.
    assert codes(result) == []
    assert "built-in shell, run by the client" in _report(result)
    # Undeclared: said so, as any call's tool.
    bare = analyze(named_sse(*events()), "openai-responses", request={"tools": [], "input": "x"})
    assert sorted(w["name"] for w in bare["warnings"] if w["code"] == "undeclared-tool") == [
        "apply_patch",
        "shell",
    ]


def _report(result: dict) -> str:
    from accumulator.report import format_report

    return format_report(result)


def test_in_a_whole_response_too():
    body = {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": "gpt-5.5",
        "output": [patch_item(), shell_item()],
    }
    result = analyze_message(json.dumps(body).encode(), "openai-responses", request={"tools": TOOLS})
    check_result(result)
    assert calls(result) == EXPECTED and codes(result) == []


def test_a_hosted_shells_call_is_the_servers():
    hosted = shell_item(environment={"type": "container_reference", "container_id": "cntr_1"})
    result = analyze(named_sse(*events(hosted)), "openai-responses")
    assert [c["name"] for c in result["choices"][0]["tool_calls"]] == ["apply_patch"]
    # A local environment named, or none: the client's.
    for environment in ({"type": "local"}, None):
        local = analyze(named_sse(*events(shell_item(environment=environment))), "openai-responses")
        assert calls(local) == EXPECTED


def test_a_stream_cut_before_the_items_are_done_keeps_no_half_call():
    cut = [event for event in events(end=False) if event[0] != "response.output_item.done"]
    result = analyze(named_sse(*cut), "openai-responses")
    check_result(result)
    assert not [call for choice in result["choices"] for call in choice["tool_calls"]]
    assert "truncated-stream" in codes(result)


@pytest.mark.parametrize(
    ("item", "name", "arguments"),
    [
        (
            {"type": "local_shell_call", "id": "lsh_1", "call_id": "call_ls",
             "action": {"type": "exec", "command": ["echo", "hi"], "env": {}}},
            "local_shell",
            {"type": "exec", "command": ["echo", "hi"], "env": {}},
        ),
        (
            {"type": "computer_call", "id": "cu_1", "call_id": "call_cu", "pending_safety_checks": [],
             "action": {"type": "click", "x": 1, "y": 2, "button": "left"}},
            "computer",
            {"type": "click", "x": 1, "y": 2, "button": "left"},
        ),
        (
            {"type": "computer_call", "id": "cu_1", "call_id": "call_cu", "pending_safety_checks": [],
             "actions": [{"type": "screenshot"}, {"type": "type", "text": "hi"}]},
            "computer",
            [{"type": "screenshot"}, {"type": "type", "text": "hi"}],
        ),
    ],
)  # fmt: skip
def test_a_local_shell_and_a_computers_calls(item, name, arguments):
    declared = {"tools": [{"type": "local_shell"}, {"type": "computer_use_preview", "display_width": 1}]}
    stream = [
        ("response.output_item.added", {"output_index": 0, "item": item}),
        ("response.output_item.done", {"output_index": 0, "item": item}),
        ("response.completed", {"response": {"status": "completed"}}),
    ]
    result = analyze(named_sse(*stream), "openai-responses", request=declared)
    check_result(result)
    assert calls(result) == [(item["call_id"], name, arguments, name)] and codes(result) == []
    # The computer tool's released type declares it too.
    assert codes(analyze(named_sse(*stream), "openai-responses", request={"tools": [{"type": "computer"}, {"type": "local_shell"}]})) == []  # fmt: skip


def next_input(*, patch_status: str = "completed") -> list:
    """The next request's input, as the Agents SDK sends it: each call echoed, then its output."""
    return [
        {"type": "message", "role": "user", "content": "say hi, add a file"},
        patch_item(),
        shell_item(),
        {"type": "shell_call_output", "call_id": "call_sh", "max_output_length": None,
         "output": [{"stdout": "hi\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]},
        {"type": "apply_patch_call_output", "call_id": "call_ap", "status": patch_status,
         "output": "created patched.txt"},
    ]  # fmt: skip


def test_their_echoes_and_outputs_are_checked_as_a_calls():
    streamed = analyze(named_sse(*events()), "openai-responses")
    index = ObservedCalls()
    index.record(streamed, "flow-1")
    request = json.dumps({"tools": TOOLS, "input": next_input()}).encode()
    warnings, evidence = index.examine(request, "openai-responses")
    assert warnings == [] and evidence["matched"] == 2 and evidence["unanswered"] == []
    results = {r["id"]: r for r in tool_results(request, "openai-responses")}
    assert results["call_ap"] == {"id": "call_ap", "size": len("created patched.txt"), "error": False}
    assert results["call_sh"]["error"] is None and results["call_sh"]["size"] > 0
    # A patch that failed says so.
    failed = json.dumps({"input": next_input(patch_status="failed")}).encode()
    assert {r["id"]: r["error"] for r in tool_results(failed, "openai-responses")}["call_ap"] is True
    # Echoed with another command than the stream's: the client's version differs.
    changed = next_input()
    changed[2] = {**shell_item(), "action": {**ACTION, "commands": ["rm -rf /"]}}
    warnings, _ = index.examine(json.dumps({"input": changed}).encode(), "openai-responses")
    assert [(w["code"], w["id"]) for w in warnings] == [("client-misassembled", "call_sh")]
    # Left unanswered: said so.
    unanswered = next_input()[:4]
    warnings, evidence = index.examine(json.dumps({"input": unanswered}).encode(), "openai-responses")
    assert evidence["unanswered"] == ["call_ap"]


def test_a_local_shells_output_names_its_call_by_id():
    request = {"input": [{"type": "local_shell_call_output", "id": "call_ls", "output": "hi\n"}]}
    assert tool_results(json.dumps(request).encode(), "openai-responses") == [
        {"id": "call_ls", "size": 3, "error": None}
    ]


def test_over_a_websocket_their_outputs_answer_them():
    connection = Connection("openai-responses", path="/v1/responses")
    start = {"type": "response.create", "model": "gpt-5.5", "tools": TOOLS, "input": []}
    connection.message(True, json.dumps(start).encode(), True)
    for name, payload in events():
        connection.message(False, json.dumps({"type": name, **payload}).encode(), True)
    follow = {**start, "previous_response_id": "resp_1", "input": next_input()[3:]}
    (settled,) = connection.message(True, json.dumps(follow).encode(), True)
    check_result(settled)
    assert calls(settled) == EXPECTED
    assert settled["websocket"]["evidence"]["answered"] == ["call_ap", "call_sh"]
    connection.finish()


@pytest.mark.parametrize(
    "item",
    [
        {"type": "shell_call", "call_id": "x", "action": "not an object", "environment": ["local"]},
        {"type": "shell_call", "call_id": ["x"], "action": {"commands": [1, None]}, "environment": {"type": []}},
        {"type": "apply_patch_call", "call_id": 7, "operation": None},
        {"type": "computer_call", "call_id": "c", "action": None, "actions": "x"},
        {"type": ["shell_call"], "call_id": "x"},
        {"type": "local_shell_call"},
    ],
)  # fmt: skip
def test_hostile_shapes_are_no_exception(item):
    stream = [
        ("response.output_item.added", {"output_index": 0, "item": item}),
        ("response.output_item.done", {"output_index": 0, "item": item}),
        ("response.completed", {"response": {"status": "completed"}}),
    ]
    request = {
        "tools": [{"type": "shell", "environment": "x"}, {"type": ["apply_patch"]}, {"type": "computer"}],
        "input": [
            {"type": "shell_call_output", "call_id": ["x"], "output": {"a": 1}},
            {"type": "apply_patch_call_output", "call_id": "x", "status": ["failed"]},
            {"type": "local_shell_call_output", "id": 7},
            item,
        ],
    }
    result = analyze(named_sse(*stream), "openai-responses", request=request)
    check_result(result)
    assert "internal-error" not in codes(result)
    assert tool_results(json.dumps(request).encode(), "openai-responses") is not None


def test_the_fake_providers_agent_calls_the_built_in_tools_and_ends_on_their_outputs():
    # What the live Agents SDK test runs against, read here without the SDK.
    from fake_provider import agent
    from fake_provider.renderers import WIRE_FORMATS

    wire = WIRE_FORMATS["openai-responses"]
    request = {"model": "agent", "tools": TOOLS, "input": [{"type": "message", "content": "hi"}]}
    rendered = agent.render("openai-responses", request)
    streamed = analyze(b"".join(wire.frame(rendered.out)), "openai-responses", request=request)
    whole = analyze_message(json.dumps(rendered.final()).encode(), "openai-responses", request=request)
    for result in (streamed, whole):
        check_result(result)
        assert [(c["name"], c.get("builtin"), json.loads(c["arguments"])) for c in result["choices"][0]["tool_calls"]] == [
            ("shell", "shell", {"commands": ["echo hi"], "timeout_ms": None, "max_output_length": None}),
            ("apply_patch", "apply_patch", agent.PATCH_OPERATION),
        ]  # fmt: skip
        assert codes(result) == []
    # The commands streamed in their own events, the patch whole.
    kinds = [event.get("type") for _, event in rendered.out]
    assert kinds.count("response.shell_call_command.delta") == 2
    # Only a shell declared: a second shell call reads the file.
    alone = {**request, "tools": TOOLS[:1]}
    rendered = agent.render("openai-responses", alone)
    result = analyze(b"".join(wire.frame(rendered.out)), "openai-responses", request=alone)
    assert [json.loads(c["arguments"])["commands"] for c in result["choices"][0]["tool_calls"]] == [
        ["echo hi"],
        [f"cat {agent.settings['file']}"],
    ]
    # A hosted shell is not the client's: no call for it.
    hosted = {**request, "tools": [{"type": "shell", "environment": {"type": "container_auto"}}]}
    assert agent.plan({}, [], payload=hosted)[1] == "no tools"
    # Their outputs answered: the final text.
    answered = {**request, "input": [*request["input"], *next_input()[1:]]}
    agent.render("openai-responses", answered)
    assert agent.log[-1]["answer"] == "results" and agent.log[-1]["results"] == ["call_sh", "call_ap"]
