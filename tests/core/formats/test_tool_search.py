"""Tool search and namespaces in Responses, as Codex uses them for MCP tools: a client-executed tool search
(``tool_search_call``, ``execution: client``) is a call the client runs, said ``builtin``; the tools its
output loads (``tool_search_output`` items, and ``additional_tools``) are declared for the turns after it,
over a WebSocket for the rest of the connection; a call names the ``namespace`` of its tool; a name two
namespaces declare differently keeps no schema; a request continuing a stored response with a client tool
search may have loaded tools out of sight (``tools_open``): no ``undeclared-tool`` for those."""

from __future__ import annotations

import json

import pytest
from schemas import check_result
from streams import codes, named_sse

from accumulator import analyze, analyze_message
from accumulator.echo import ObservedCalls, tool_results
from accumulator.request import request_facts
from accumulator.websocket import Connection

SEARCH_SCHEMA = {
    "type": "object",
    "properties": {"query": {"type": "string"}, "limit": {"type": "number"}},
    "required": ["query"],
    "additionalProperties": False,
}
SEARCH_TOOL = {"type": "tool_search", "execution": "client", "parameters": SEARCH_SCHEMA}
LOOKUP_SCHEMA = {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}
LOADED = {
    "type": "namespace",
    "name": "mcp__archive",
    "tools": [{"type": "function", "name": "lookup", "parameters": LOOKUP_SCHEMA}],
}
SHELL = {"type": "function", "name": "exec_command", "parameters": {"type": "object"}}


def search_item(arguments=None, *, execution: str = "client", call_id: str = "call_ts") -> dict:
    return {
        "id": "tsc_1",
        "type": "tool_search_call",
        "call_id": call_id,
        "execution": execution,
        "status": "completed",
        "arguments": {"query": "archive lookup", "limit": 8} if arguments is None else arguments,
    }


def search_events(item: dict | None = None, response_id: str = "resp_1") -> list:
    """A turn whose only output is a tool search: its item added (no arguments yet), then done."""
    item = search_item() if item is None else item
    return [
        ("response.created", {"response": {"id": response_id, "model": "gpt-5.5", "status": "in_progress"}}),
        ("response.output_item.added", {"output_index": 0, "item": {**item, "status": "in_progress", "arguments": {}}}),
        ("response.output_item.done", {"output_index": 0, "item": item}),
        ("response.completed", {"response": {"id": response_id, "status": "completed"}}),
    ]  # fmt: skip


def lookup_events(
    arguments: str = '{"key": "k1"}', response_id: str = "resp_2", namespace="mcp__archive"
) -> list:
    """A turn calling the loaded tool (its namespace named) beside the shell, interleaved."""
    lookup = {"id": "fc_l", "type": "function_call", "call_id": "call_l", "name": "lookup", "arguments": ""}
    if namespace is not None:
        lookup["namespace"] = namespace
    shell = {
        "id": "fc_s",
        "type": "function_call",
        "call_id": "call_s",
        "name": "exec_command",
        "arguments": "",
    }
    half = len(arguments) // 2
    return [
        ("response.created", {"response": {"id": response_id, "model": "gpt-5.5", "status": "in_progress"}}),
        ("response.output_item.added", {"output_index": 0, "item": lookup}),
        ("response.output_item.added", {"output_index": 1, "item": shell}),
        ("response.function_call_arguments.delta", {"item_id": "fc_l", "output_index": 0, "delta": arguments[:half]}),
        ("response.function_call_arguments.delta", {"item_id": "fc_s", "output_index": 1, "delta": '{"cmd": '}),
        ("response.function_call_arguments.delta", {"item_id": "fc_l", "output_index": 0, "delta": arguments[half:]}),
        ("response.function_call_arguments.delta", {"item_id": "fc_s", "output_index": 1, "delta": '"echo hi"}'}),
        ("response.output_item.done", {"output_index": 0, "item": {**lookup, "arguments": arguments}}),
        ("response.output_item.done", {"output_index": 1, "item": {**shell, "arguments": '{"cmd": "echo hi"}'}}),
        ("response.completed", {"response": {"id": response_id, "status": "completed"}}),
    ]  # fmt: skip


def calls(result: dict) -> list[tuple]:
    return [
        (c["id"], c["name"], c["arguments"], c.get("namespace"), c.get("builtin"))
        for c in result["choices"][0]["tool_calls"]
    ]


def loaded_by_search(*, answered: bool = True) -> list:
    """The input of the request after a client tool search: its echo and, answered, its output."""
    items = [{"type": "message", "role": "user", "content": "look up k1"}, search_item()]
    if answered:
        items.append(
            {"type": "tool_search_output", "call_id": "call_ts", "execution": "client", "tools": [LOADED]}
        )
    return items


def test_a_client_tool_search_is_a_call_named_by_its_type_its_arguments_as_json():
    request = {"model": "gpt-5.5", "tools": [SHELL, SEARCH_TOOL], "input": "look up k1"}
    result = analyze(named_sse(*search_events()), "openai-responses", request=request)
    check_result(result)
    assert calls(result) == [
        ("call_ts", "tool_search", '{"query":"archive lookup","limit":8}', None, "tool_search")
    ]
    assert codes(result) == []  # declared by its type, its arguments valid against its parameters
    # Checked as any call's: arguments its parameters refuse are said so.
    bad = analyze(named_sse(*search_events(search_item({"limit": 8}))), "openai-responses", request=request)
    assert codes(bad) == ["schema-mismatch"]


def test_a_server_executed_tool_search_is_not_a_call_of_the_client():
    result = analyze(
        named_sse(*search_events(search_item(execution="server", call_id=None))), "openai-responses"
    )
    check_result(result)
    assert calls(result) == []


def test_a_tool_search_in_a_whole_response():
    body = {"object": "response", "id": "resp_1", "status": "completed", "output": [search_item()]}
    result = analyze_message(json.dumps(body).encode(), "openai-responses")
    check_result(result)
    assert calls(result) == [
        ("call_ts", "tool_search", '{"query":"archive lookup","limit":8}', None, "tool_search")
    ]


def test_a_call_names_the_namespace_of_its_tool_streamed_and_whole():
    result = analyze(named_sse(*lookup_events()), "openai-responses")
    check_result(result)
    assert calls(result) == [
        ("call_l", "lookup", '{"key": "k1"}', "mcp__archive", None),
        ("call_s", "exec_command", '{"cmd": "echo hi"}', None, None),
    ]
    assert "namespace" not in result["choices"][0]["tool_calls"][1]  # a call without one: as before
    item = {"type": "function_call", "call_id": "call_l", "name": "lookup", "namespace": "mcp__archive",
            "arguments": '{"key": "k1"}'}  # fmt: skip
    whole = analyze_message(json.dumps({"object": "response", "output": [item]}).encode(), "openai-responses")
    assert calls(whole) == [("call_l", "lookup", '{"key": "k1"}', "mcp__archive", None)]


def test_the_tools_a_search_loaded_are_declared_for_the_turns_after_it():
    request = {"model": "gpt-5.5", "tools": [SHELL, SEARCH_TOOL], "input": loaded_by_search()}
    result = analyze(named_sse(*lookup_events()), "openai-responses", request=request)
    assert "undeclared-tool" not in codes(result)
    # With their schemas: arguments the loaded tool's schema refuses are said so.
    bad = analyze(named_sse(*lookup_events('{"id": 1}')), "openai-responses", request=request)
    assert "schema-mismatch" in codes(bad)
    # Not loaded (the search not answered): the call names a tool the request did not declare.
    unloaded = {**request, "input": loaded_by_search(answered=False)}
    result = analyze(named_sse(*lookup_events()), "openai-responses", request=unloaded)
    assert [w["name"] for w in result["warnings"] if w["code"] == "undeclared-tool"] == ["lookup"]


def test_additional_tools_items_declare_their_tools():
    items = [{"type": "additional_tools", "role": "developer", "tools": [LOADED]}]
    facts = request_facts({"tools": [SHELL], "input": items}, "openai-responses")
    assert facts is not None and facts.tools == {"exec_command": {"type": "object"}, "lookup": LOOKUP_SCHEMA}


def test_a_name_two_namespaces_declare_differently_keeps_no_schema():
    other = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}
    second = {"type": "namespace", "name": "mcp__tickets", "tools": [{"type": "function", "name": "lookup", "parameters": other}]}  # fmt: skip
    request = {"tools": [SHELL, LOADED, second]}
    assert request_facts(request, "openai-responses").tools["lookup"] is None
    # Either server's arguments: no schema-mismatch for a schema that may not be the call's.
    for arguments in ('{"key": "k1"}', '{"id": 7}'):
        result = analyze(named_sse(*lookup_events(arguments)), "openai-responses", request=request)
        assert codes(result) == ["recency-misroute"]
    # The same schema twice is still one to judge by.
    twice = {"tools": [SHELL, LOADED, {**LOADED, "name": "mcp__copy"}]}
    assert request_facts(twice, "openai-responses").tools["lookup"] == LOOKUP_SCHEMA


def test_a_stored_conversation_with_a_client_tool_search_may_have_loaded_tools_out_of_sight():
    for key, value in (("previous_response_id", "resp_1"), ("conversation", "conv_1")):
        request = {"tools": [SHELL, SEARCH_TOOL], "input": [], key: value}
        assert request_facts(request, "openai-responses").tools_open is True
        result = analyze(named_sse(*lookup_events()), "openai-responses", request=request)
        assert "undeclared-tool" not in codes(result)
    # Without a tool search, nothing could have been loaded: the check stands.
    request = {"tools": [SHELL], "input": [], "previous_response_id": "resp_1"}
    assert request_facts(request, "openai-responses").tools_open is False
    assert "undeclared-tool" in codes(
        analyze(named_sse(*lookup_events()), "openai-responses", request=request)
    )
    # Nor does it pass a call with no name.
    nameless = [
        ("response.output_item.added", {"output_index": 0, "item": {"type": "function_call", "call_id": "c"}}),
        ("response.completed", {"response": {"status": "completed"}}),
    ]  # fmt: skip
    open_request = {"tools": [SEARCH_TOOL], "previous_response_id": "resp_1"}
    assert "undeclared-tool" in codes(analyze(named_sse(*nameless), "openai-responses", request=open_request))


def test_a_tool_searchs_echo_and_output_are_checked_as_a_calls():
    streamed = analyze(named_sse(*search_events()), "openai-responses")
    index = ObservedCalls()
    index.record(streamed, "flow-1")
    request = {"tools": [SHELL, SEARCH_TOOL], "input": loaded_by_search()}
    warnings, evidence = index.examine(json.dumps(request).encode(), "openai-responses")
    assert warnings == [] and evidence["matched"] == 1
    # Its result is the tools it loaded (what a session's turn says was sent back).
    (result,) = [
        r for r in tool_results(json.dumps(request).encode(), "openai-responses") if r["id"] == "call_ts"
    ]
    assert result["size"] == len(json.dumps([LOADED], separators=(",", ":")))
    # Echoed with other arguments than the stream's: the client's version differs.
    changed = loaded_by_search()
    changed[1] = search_item({"query": "something else"})
    warnings, _ = index.examine(json.dumps({"input": changed}).encode(), "openai-responses")
    assert [(w["code"], w["id"]) for w in warnings] == [("client-misassembled", "call_ts")]


def websocket_turns(connection: Connection, third_input: list, *, first_previous=None) -> list:
    """A search, the loaded tool's call, then a turn that only answers it (previous_response_id)."""
    settled = []
    first = {"type": "response.create", "model": "gpt-5.5", "tools": [SHELL, SEARCH_TOOL], "input": []}
    if first_previous:
        first["previous_response_id"] = first_previous
    connection.message(True, json.dumps(first).encode(), True)
    for name, payload in search_events():
        connection.message(False, json.dumps({"type": name, **payload}).encode(), True)
    second = {**first, "previous_response_id": "resp_1", "input": loaded_by_search()[2:]}
    settled += connection.message(True, json.dumps(second).encode(), True)
    for name, payload in lookup_events():
        connection.message(False, json.dumps({"type": name, **payload}).encode(), True)
    third = {**first, "previous_response_id": "resp_2", "input": third_input}
    settled += connection.message(True, json.dumps(third).encode(), True)
    for name, payload in lookup_events(response_id="resp_3"):
        connection.message(False, json.dumps({"type": name, **payload}).encode(), True)
    settled += connection.finish()
    return settled


ANSWERS = [
    {"type": "function_call_output", "call_id": "call_l", "output": "found"},
    {"type": "function_call_output", "call_id": "call_s", "output": "hi"},
]


def test_over_a_websocket_the_tools_loaded_stay_declared_for_the_connections_later_turns():
    connection = Connection("openai-responses", path="/v1/responses")
    search, lookup, again = websocket_turns(connection, ANSWERS)
    assert calls(search) == [
        ("call_ts", "tool_search", '{"query":"archive lookup","limit":8}', None, "tool_search")
    ]
    assert search["websocket"]["evidence"]["answered"] == ["call_ts"]  # by its tool_search_output
    # The third turn carries only its answers: the tool loaded two turns before is still declared.
    for result in (lookup, again):
        check_result(result)
        assert "undeclared-tool" not in codes(result), result["warnings"]
    assert lookup["websocket"]["evidence"]["answered"] == ["call_l", "call_s"]


def test_over_a_websocket_a_conversation_begun_elsewhere_is_open_one_begun_here_is_not():
    # Begun on an earlier connection: its loaded tools were never seen here.
    connection = Connection("openai-responses", path="/v1/responses")
    first = {
        "type": "response.create",
        "tools": [SHELL, SEARCH_TOOL],
        "previous_response_id": "resp_0",
        "input": [],
    }
    connection.message(True, json.dumps(first).encode(), True)
    for name, payload in lookup_events(response_id="resp_9"):
        connection.message(False, json.dumps({"type": name, **payload}).encode(), True)
    (result,) = connection.finish()
    assert "undeclared-tool" not in codes(result)
    # Begun here, nothing loaded: a call to a tool never declared on this connection is said so.
    connection = Connection("openai-responses", path="/v1/responses")
    start = {"type": "response.create", "tools": [SHELL, SEARCH_TOOL], "input": []}
    connection.message(True, json.dumps(start).encode(), True)
    for name, payload in search_events():
        connection.message(False, json.dumps({"type": name, **payload}).encode(), True)
    follow = {
        **start,
        "previous_response_id": "resp_1",
        "input": [{"type": "function_call_output", "call_id": "x"}],
    }
    connection.message(True, json.dumps(follow).encode(), True)
    for name, payload in lookup_events():
        connection.message(False, json.dumps({"type": name, **payload}).encode(), True)
    last = connection.finish()[-1]
    assert [w["name"] for w in last["warnings"] if w["code"] == "undeclared-tool"] == ["lookup"]


@pytest.mark.parametrize(
    "item",
    [
        {"type": "tool_search_call", "execution": ["client"], "call_id": "x", "arguments": {}},
        {"type": "tool_search_call", "execution": "client", "call_id": ["x"], "arguments": [1, {"a": None}]},
        {"type": "tool_search_call", "execution": "client", "arguments": "not an object"},
        {"type": "function_call", "call_id": "y", "name": "f", "namespace": {"a": 1}, "arguments": "{}"},
        {"type": "function_call", "call_id": "y", "name": "f", "namespace": 7, "arguments": "{}"},
    ],
)
def test_hostile_shapes_are_no_exception(item):
    events = [
        ("response.output_item.added", {"output_index": 0, "item": item}),
        ("response.output_item.done", {"output_index": 0, "item": item}),
        ("response.completed", {"response": {"status": "completed"}}),
    ]
    request = {
        "tools": [
            SEARCH_TOOL,
            {"type": "namespace", "tools": "x"},
            {"type": "namespace", "tools": [1, {"name": 2}]},
        ],
        "input": [
            {"type": "tool_search_output", "tools": {"a": 1}},
            {"type": "additional_tools", "tools": [None]},
        ],
        "previous_response_id": ["x"],
    }
    result = analyze(named_sse(*events), "openai-responses", request=request)
    check_result(result)
    assert "internal-error" not in codes(result)
    for call in result["choices"][0]["tool_calls"]:
        assert "namespace" not in call or isinstance(call["namespace"], str)


def test_the_fake_providers_agent_searches_then_calls_the_tool_found_in_its_namespace(monkeypatch):
    # What the live Codex test runs against, read here without an agent: the search turn, then the call.
    from fake_provider import agent
    from fake_provider.renderers import WIRE_FORMATS

    monkeypatch.setitem(agent.settings, "search", "lookup")
    wire = WIRE_FORMATS["openai-responses"]
    request = {
        "model": "agent",
        "tools": [SHELL, SEARCH_TOOL],
        "input": [{"type": "message", "content": "hi"}],
    }
    rendered = agent.render("openai-responses", request)
    searched = analyze(b"".join(wire.frame(rendered.out)), "openai-responses", request=request)
    whole = analyze_message(json.dumps(rendered.final()).encode(), "openai-responses", request=request)
    for result in (searched, whole):
        check_result(result)
        assert [(c["name"], c.get("builtin"), json.loads(c["arguments"])) for c in result["choices"][0]["tool_calls"]] == [
            ("tool_search", "tool_search", {"query": "lookup", "limit": 8})
        ]  # fmt: skip
        assert codes(result) == []
    following = {**request, "input": [*request["input"], search_item(), *loaded_by_search()[2:]]}
    rendered = agent.render("openai-responses", following)
    called = analyze(b"".join(wire.frame(rendered.out)), "openai-responses", request=following)
    check_result(called)
    assert [(c["name"], c.get("namespace"), c["arguments"]) for c in called["choices"][0]["tool_calls"]] == [
        ("exec_command", None, '{"command":"echo hi"}'),
        ("lookup", "mcp__archive", '{"key":"k1"}'),
    ]
    assert codes(called) == ["recency-misroute"]  # interleaved; declared by the search's output
    assert [entry["answer"] for entry in agent.log[-2:]] == ["search", "calls"]


def test_the_addon_ships_the_facts_to_its_worker_whole():
    # The addon reads a request's facts as it passes and sends them to its analysis worker as a tuple.
    from accumulator.limits import DEFAULT_LIMITS
    from accumulator.request import RequestFacts
    from toolcall_lens.worker import remote_settings

    facts = request_facts(
        {"tools": [SHELL, SEARCH_TOOL], "previous_response_id": "resp_1"}, "openai-responses"
    )
    shipped = remote_settings("openai-responses", facts, None, 0.0, DEFAULT_LIMITS)["facts"]
    assert RequestFacts(*shipped) == facts and facts.tools_open is True
