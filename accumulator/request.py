"""What a request body declares about tools, read from every format's own shape: the functions and
their JSON schemas, whether parallel calls are allowed, and a tool it forces by name.

The shapes do not collide, so one reader serves all formats: Chat, Cohere and Ollama ``tools[].function``;
Responses ``tools[]`` (``name``, ``parameters``); Anthropic ``tools[]`` (``name``, ``input_schema``);
Gemini ``tools[].functionDeclarations[]``; Bedrock Converse ``toolConfig.tools[].toolSpec``.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson


@dataclass(slots=True, frozen=True)
class RequestFacts:
    tools: dict[str, dict | None] | None  # declared name -> its JSON schema (or None); None: no tools key
    parallel: bool | None  # False: the request turned parallel tool calls off
    forced: str | None  # the tool the request forces by name


def request_facts(request) -> RequestFacts | None:
    """The facts of a request body (bytes, str or a decoded dict), or None when it is not a JSON object."""
    if isinstance(request, (bytes, str)):
        try:
            request = orjson.loads(request)
        except orjson.JSONDecodeError:
            return None
    if type(request) is not dict:
        return None
    return RequestFacts(_tools(request), _parallel(request), _forced(request))


def _tools(request: dict) -> dict[str, dict | None] | None:
    tools = request.get("tools")
    config = request.get("toolConfig")
    if type(config) is dict and "tools" in config:  # Bedrock Converse
        tools = config["tools"]
    if tools is None and "functions" not in request:
        return None  # tools may come from elsewhere (a gateway, a saved prompt): nothing to check
    declared: dict[str, dict | None] = {}
    for tool in tools if type(tools) is list else ():
        if type(tool) is not dict:
            continue
        _declare(declared, tool, tool.get("parameters") or tool.get("input_schema"))  # Responses, Anthropic
        for key in ("function", "custom"):  # Chat, Cohere, Ollama
            inner = tool.get(key)
            if type(inner) is dict:
                _declare(declared, inner, inner.get("parameters"))
        spec = tool.get("toolSpec")  # Bedrock
        if type(spec) is dict:
            schema = spec.get("inputSchema")
            _declare(declared, spec, schema.get("json") if type(schema) is dict else None)
        for key in ("functionDeclarations", "function_declarations"):  # Gemini
            for declaration in tool.get(key) or ():
                if type(declaration) is dict:
                    schema = declaration.get("parametersJsonSchema")
                    if schema is None:
                        schema = _openapi_types(declaration.get("parameters"))
                    _declare(declared, declaration, schema)
    for function in request.get("functions") or ():  # Chat's legacy form
        if type(function) is dict:
            _declare(declared, function, function.get("parameters"))
    return declared


def _declare(declared: dict, obj: dict, schema) -> None:
    name = obj.get("name")
    if type(name) is str and (name not in declared or declared[name] is None):
        declared[name] = schema if type(schema) is dict else None


def _openapi_types(schema):
    # Gemini's Schema names types in capitals ("OBJECT"); JSON Schema wants them in lower case.
    if type(schema) is dict:
        return {
            key: (value.lower() if key == "type" and type(value) is str else _openapi_types(value))
            for key, value in schema.items()
        }
    if type(schema) is list:
        return [_openapi_types(item) for item in schema]
    return schema


def _parallel(request: dict) -> bool | None:
    if request.get("parallel_tool_calls") is False:  # Chat, Responses
        return False
    choice = request.get("tool_choice")
    if type(choice) is dict and choice.get("disable_parallel_tool_use") is True:  # Anthropic
        return False
    return None


def _forced(request: dict) -> str | None:
    choice = request.get("tool_choice")
    if type(choice) is dict:
        if type(choice.get("function")) is dict:  # Chat
            return _name(choice["function"])
        if choice.get("type") in ("function", "tool"):  # Responses, Anthropic
            return _name(choice)
    config = request.get("toolConfig")
    if type(config) is dict:
        tool = (
            (config.get("toolChoice") or {}).get("tool") if type(config.get("toolChoice")) is dict else None
        )
        if type(tool) is dict:  # Bedrock
            return _name(tool)
        calling = config.get("functionCallingConfig")  # Gemini: mode ANY with exactly one allowed name
        if type(calling) is dict and calling.get("mode") == "ANY":
            allowed = calling.get("allowedFunctionNames")
            if type(allowed) is list and len(allowed) == 1 and type(allowed[0]) is str:
                return allowed[0]
    return None


def _name(obj: dict) -> str | None:
    return obj["name"] if type(obj.get("name")) is str else None
