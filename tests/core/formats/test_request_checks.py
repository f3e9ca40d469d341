"""Calls checked against what the request declared: names, JSON schemas, parallel calls, a forced tool.
Each check has a positive and a negative case, for several formats' request shapes, through the CLI."""

from __future__ import annotations

import json

import pytest
from streams import DATA, call, choice, chunk, codes, named_sse, sse, tool_chunk, warning, without_timing

from accumulator import StreamAccumulator, analyze
from accumulator.cli import main
from accumulator.request import request_facts

PRODUCTION = (
    DATA / "production_interleaved.sse"
)  # search_circulars {"query": ...}, get_user_profile {"user_id": ...}
ANTHROPIC = DATA / "anthropic_messages_parallel.sse"  # get_weather {"city": "Paris"}, get_time {"tz": ...}

STRING_QUERY = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
INTEGER_QUERY = {"type": "object", "properties": {"query": {"type": "integer"}}, "required": ["query"]}


def chat_request(schema: dict, **extra) -> dict:
    return {
        "model": "m",
        "stream": True,
        "tools": [
            {"type": "function", "function": {"name": "search_circulars", "parameters": schema}},
            {"type": "function", "function": {"name": "get_user_profile", "parameters": {"type": "object"}}},
            {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
        ],
        **extra,
    }


def anthropic_request(**extra) -> dict:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    return {
        "model": "claude",
        "max_tokens": 100,
        "tools": [
            {"name": "get_weather", "input_schema": schema},
            {"name": "get_time", "input_schema": {"type": "object", "required": ["tz"]}},
        ],
        **extra,
    }


def cli(tmp_path, body, request: dict, capsys) -> tuple[int, list[str]]:
    path = tmp_path / "request.json"
    path.write_text(json.dumps(request))
    status = main([str(body), "--request", str(path), "--json", "--strategies", "none"])
    (result,) = json.loads(capsys.readouterr().out)["results"]
    return status, codes(result)


CASES = [
    # (check, body, request that trips it, request that does not)
    ("schema-mismatch", PRODUCTION, chat_request(INTEGER_QUERY), chat_request(STRING_QUERY)),
    (
        "schema-mismatch",
        ANTHROPIC,
        {
            **anthropic_request(),
            "tools": [
                {"name": "get_weather", "input_schema": {"type": "object", "required": ["zip"]}},
                {"name": "get_time"},
            ],
        },
        anthropic_request(),
    ),
    (
        "parallel-disabled",
        PRODUCTION,
        chat_request(STRING_QUERY, parallel_tool_calls=False),
        chat_request(STRING_QUERY, parallel_tool_calls=True),
    ),
    (
        "parallel-disabled",
        ANTHROPIC,
        anthropic_request(tool_choice={"type": "auto", "disable_parallel_tool_use": True}),
        anthropic_request(tool_choice={"type": "auto"}),
    ),
    (
        "tool-choice-ignored",
        PRODUCTION,
        chat_request(STRING_QUERY, tool_choice={"type": "function", "function": {"name": "get_weather"}}),
        chat_request(
            STRING_QUERY, tool_choice={"type": "function", "function": {"name": "search_circulars"}}
        ),
    ),
    (
        "tool-choice-ignored",
        ANTHROPIC,
        anthropic_request(tool_choice={"type": "tool", "name": "get_news"}),
        anthropic_request(tool_choice={"type": "tool", "name": "get_time"}),
    ),
    (
        "undeclared-tool",
        PRODUCTION,
        {"tools": [{"type": "function", "function": {"name": "search_circulars"}}]},
        chat_request(STRING_QUERY),
    ),
]


@pytest.mark.parametrize("check,body,tripping,clean", CASES, ids=[f"{c[0]}-{c[1].stem}" for c in CASES])
def test_each_request_check_through_the_cli(tmp_path, capsys, check, body, tripping, clean):
    status, found = cli(tmp_path, body, tripping, capsys)
    assert check in found and status == 1
    status, found = cli(tmp_path, body, clean, capsys)
    assert found == [] and status == 0


@pytest.mark.parametrize("check,body,tripping,clean", CASES, ids=[f"{c[0]}-{c[1].stem}" for c in CASES])
def test_the_requests_facts_read_once_give_the_result_its_body_gives(check, body, tripping, clean):
    # The addon reads the facts as the request passes and gives the stream's analysis those, not the body.
    fmt = "anthropic-messages" if body is ANTHROPIC else "openai-chat"
    stream = body.read_bytes()
    for request in (tripping, clean):
        facts = request_facts(json.dumps(request).encode(), fmt)
        acc = StreamAccumulator(fmt, request=facts)
        acc.feed(stream)
        assert without_timing(acc.finish()) == without_timing(analyze(stream, fmt, request=request))
        assert request_facts(facts, fmt) is facts


def test_one_call_with_parallel_calls_off_is_fine():
    one = sse(
        tool_chunk(call(0, "call_1", "search_circulars", '{"query": "RBI circulars"}')),
        chunk(choice(0, "tool_calls")),
    )
    request = chat_request(STRING_QUERY, parallel_tool_calls=False)
    assert analyze(one, "openai-chat", request=request, strategies=())["warnings"] == []
    two = sse(
        tool_chunk(call(0, "call_1", "search_circulars", '{"query": "RBI circulars"}')),
        tool_chunk(call(1, "call_2", "get_user_profile", "{}")),
        chunk(choice(0, "tool_calls")),
    )
    assert codes(analyze(two, "openai-chat", request=request, strategies=())) == ["parallel-disabled"]


def test_schema_mismatch_names_the_place_and_the_reason():
    result = analyze(
        PRODUCTION.read_bytes(), "openai-chat", request=chat_request(INTEGER_QUERY), strategies=()
    )
    mismatch = warning(result, "schema-mismatch")
    assert mismatch["name"] == "search_circulars" and mismatch["path"] == "query"
    assert "is not of type 'integer'" in mismatch["error"]


def test_a_schema_that_is_itself_invalid_gives_no_verdict():
    request = chat_request({"type": "no-such-type"})
    result = analyze(PRODUCTION.read_bytes(), "openai-chat", request=request, strategies=())
    assert result["warnings"] == []


def test_forced_tool_is_not_judged_on_a_cut_stream():
    body = PRODUCTION.read_bytes()
    cut = body[: body.index(b'finish_reason": "tool_calls')]
    request = chat_request(
        STRING_QUERY, tool_choice={"type": "function", "function": {"name": "get_weather"}}
    )
    result = analyze(cut, "openai-chat", request=request, strategies=())
    assert "tool-choice-ignored" not in codes(result) and "truncated-stream" in codes(result)


@pytest.mark.parametrize(
    "request_body,tools,parallel,forced",
    [
        (  # OpenAI Responses
            {
                "tools": [
                    {"type": "function", "name": "f", "parameters": {"type": "object"}},
                    {"type": "web_search"},
                ],
                "parallel_tool_calls": False,
                "tool_choice": {"type": "function", "name": "f"},
            },
            {"f": {"type": "object"}},
            False,
            "f",
        ),
        (  # Gemini: capitalised OpenAPI types are read as JSON Schema
            {
                "tools": [
                    {
                        "functionDeclarations": [
                            {
                                "name": "g",
                                "parameters": {"type": "OBJECT", "properties": {"a": {"type": "STRING"}}},
                            }
                        ]
                    }
                ],
                "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["g"]}},
            },
            {"g": {"type": "object", "properties": {"a": {"type": "string"}}}},
            None,
            "g",
        ),
        (  # Bedrock Converse
            {
                "toolConfig": {
                    "tools": [{"toolSpec": {"name": "b", "inputSchema": {"json": {"type": "object"}}}}],
                    "toolChoice": {"tool": {"name": "b"}},
                }
            },
            {"b": {"type": "object"}},
            None,
            "b",
        ),
        (  # Cohere v2 and Ollama: Chat's shape
            {"tools": [{"type": "function", "function": {"name": "c"}}]},
            {"c": None},
            None,
            None,
        ),
        ({"messages": []}, None, None, None),  # no tools key: nothing declared, nothing to check
    ],
)
def test_every_formats_request_shape_is_read(request_body, tools, parallel, forced):
    facts = request_facts(json.dumps(request_body).encode())
    assert (facts.tools, facts.parallel, facts.forced) == (tools, parallel, forced)


def test_gemini_schema_is_enforced_after_translation():
    request = {
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": "get_weather",
                        "parameters": {"type": "OBJECT", "properties": {"city": {"type": "INTEGER"}}},
                    },
                    {"name": "get_time", "parameters": {"type": "OBJECT"}},
                ]
            }
        ]
    }
    result = analyze((DATA / "gemini_parallel.sse").read_bytes(), "gemini", request=request)
    assert codes(result) == ["schema-mismatch"]


def test_a_bedrock_system_tool_declares_its_name():
    # Nova's server-side tools come as toolConfig.tools[].systemTool: {"name": ...}, with no schema.
    body = (DATA / "bedrock_converse_parallel.bin").read_bytes()
    spec = {"toolSpec": {"name": "get_weather", "inputSchema": {"json": {"type": "object"}}}}
    request = {"toolConfig": {"tools": [spec, {"systemTool": {"name": "get_time"}}]}}
    assert codes(analyze(body, "bedrock-converse", request=request)) == []
    assert request_facts(request, "bedrock-converse").tools == {
        "get_weather": {"type": "object"},
        "get_time": None,
    }
    # Without it, the same call is undeclared: the check still speaks.
    request = {"toolConfig": {"tools": [spec]}}
    assert codes(analyze(body, "bedrock-converse", request=request)) == ["undeclared-tool"]


def test_wrong_types_where_lists_belong_are_read_as_nothing():
    from accumulator.echo import extract_echoes

    body = {"messages": [{"tool_calls": True}], "functions": 1, "tools": [{"functionDeclarations": True}]}
    assert request_facts(body).tools == {}
    assert extract_echoes(body) == ([], [])


def test_a_responses_namespace_declares_the_tools_it_holds():
    # Codex declares its sub-agent tools in a namespace (multi_agent_v1): a call to one of them names the
    # tool, not the namespace, and is checked against the tool's own schema.
    spawn = {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}
    request = {
        "tools": [
            {"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
            {"type": "namespace", "name": "multi_agent_v1", "description": "sub-agents", "tools": [
                {"type": "function", "name": "spawn_agent", "parameters": spawn},
                {"type": "function", "name": "close_agent", "parameters": {"type": "object"}},
                "not a tool",
            ]},
            {"type": "namespace", "name": "empty", "tools": "not a list"},
        ]
    }  # fmt: skip
    facts = request_facts(request, "openai-responses")
    assert sorted(facts.tools) == ["close_agent", "exec_command", "spawn_agent"]
    assert facts.tools["spawn_agent"] == spawn

    def stream(arguments: str) -> bytes:
        item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "spawn_agent",
                "namespace": "multi_agent_v1", "arguments": ""}  # fmt: skip
        events = [
            ("response.output_item.added", {"output_index": 0, "item": item}),
            ("response.function_call_arguments.delta", {"output_index": 0, "item_id": "fc_1", "delta": arguments}),
            ("response.output_item.done", {"output_index": 0, "item": {**item, "arguments": arguments}}),
            ("response.completed", {"response": {"status": "completed"}}),
        ]  # fmt: skip
        return named_sse(*events)

    assert codes(analyze(stream('{"message": "go"}'), "openai-responses", request=request)) == []
    assert "schema-mismatch" in codes(analyze(stream('{"message": 1}'), "openai-responses", request=request))
