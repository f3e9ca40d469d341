"""What every JSON-speaking dialect shares: decoding an event's payload with warnings, the tools a
request declares (every format's request shape), and small value helpers."""

from __future__ import annotations

from ..framing import MALFORMED, parse_json
from ..warnings import WarningLog

_SNIPPET = 200


class JsonDialect:
    """Base of the dialects. A subclass sets ``format`` and ``framing`` and implements ``ops``."""

    format = ""
    framing = "sse"  # "sse", "ndjson", "eventstream", or "gemini" (a JSON array, else SSE)
    # What a call with no argument text amounts to: "" where arguments are a string the client gets
    # as is (Chat, Responses, Cohere); "{}" where they are an object (Anthropic input, Bedrock, Gemini).
    empty_arguments = ""
    # Whether calls stream in fragments a client must route (else every call arrives whole and the
    # hazard strategies have nothing to get wrong).
    fragments = True

    def __init__(self, warnings: WarningLog) -> None:
        self._warn = warnings

    def ops(self, event, number: int) -> list:
        raise NotImplementedError

    def message_ops(self, body: bytes) -> list:
        """A non-streamed response of the same API, as the operations of a one-event stream."""
        raise NotImplementedError

    def finish(self, number: int) -> list:
        """Operations still held when the input ends (a dialect that assembles values itself)."""
        return []

    def _load(self, data: bytes, number: int) -> dict | None:
        obj, bad_utf8 = parse_json(data)
        if bad_utf8:
            self._warn.add("invalid-utf8", f"event {number} holds bytes that are not UTF-8", event=number)
        if obj is MALFORMED or type(obj) is not dict:
            self._malformed(number, data)
            return None
        return obj

    def _malformed(self, number: int, data: bytes, why: str = "is not a JSON object") -> None:
        self._warn.add(
            "malformed-event", f"event {number} {why}: {snippet(data)}", event=number, data=snippet(data)
        )

    @staticmethod
    def declared_tools(request: dict) -> set[str] | None:
        return declared_tool_names(request)


def declared_tool_names(request: dict) -> set[str] | None:
    """Names of the functions a request declares, in any format's shape; None when it declares no
    tools at all (tools may come from elsewhere, e.g. a gateway: nothing to check)."""
    tools = request.get("tools")
    config = request.get("toolConfig")
    if type(config) is dict and "tools" in config:  # Bedrock Converse
        tools = config["tools"]
    if tools is None and "functions" not in request:
        return None
    names: set[str] = set()
    for tool in tools if type(tools) is list else ():
        if type(tool) is not dict:
            continue
        _add_name(names, tool)  # Anthropic, Responses
        for key in ("function", "custom", "toolSpec"):  # Chat, Cohere, Ollama; Bedrock
            if type(tool.get(key)) is dict:
                _add_name(names, tool[key])
        for key in ("functionDeclarations", "function_declarations"):  # Gemini
            for declaration in tool.get(key) or ():
                if type(declaration) is dict:
                    _add_name(names, declaration)
    for function in request.get("functions") or ():  # Chat's legacy form
        if type(function) is dict:
            _add_name(names, function)
    return names


def _add_name(names: set[str], obj: dict) -> None:
    name = obj.get("name")
    if type(name) is str:
        names.add(name)


def as_int(value) -> int | None:
    return value if type(value) is int else None


def as_dict(value) -> dict:
    return value if type(value) is dict else {}


def snippet(data: bytes) -> str:
    text = data[: _SNIPPET * 4].decode("utf-8", "replace")
    return text if len(text) <= _SNIPPET else text[:_SNIPPET] + "…"
