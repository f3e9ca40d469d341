"""Google Gemini streams (``:streamGenerateContent``), as SSE (``alt=sse``, CRLF) or a JSON array.

Parts carry no index: each ``functionCall`` part is one whole call (``args`` an object), numbered here in
order per candidate. Vertex's streamed arguments are the exception: a part ``{name, willContinue}``
opens a call, ``partialArgs`` parts (values by JSON path, strings appended) fill the call opened last,
and an empty ``functionCall`` (or ``partialArgs`` without ``willContinue``) closes it. The arguments are
assembled here and handed on as one object. ``finishReason`` is ``STOP`` even when tools were called.

Requests: ``tools[].functionDeclarations[]`` (``parametersJsonSchema``, else an OpenAPI ``parameters``
whose types are in capitals), ``toolConfig.functionCallingConfig`` (mode ``ANY`` with one allowed name
forces it); echoes are ``functionCall`` / ``functionResponse`` parts of ``contents[]``.
"""

from __future__ import annotations

import re
from typing import Any

from ..framing import FramedEvent
from ..ops import Finish, Meta, ProviderError, StreamEnd, TextDelta, ToolCallDelta, Usage
from ..usage import UsageParts, dig
from ..warnings import WarningLog
from .base import JsonDialect, RewriteSupport, WireFormat, as_dict, as_int, as_list, declare, message_blocks

_PATH_TOKEN = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]|\['([^']*)'\]|\[\"([^\"]*)\"\]")
_VALUE_FIELDS = ("stringValue", "numberValue", "boolValue")
# Keys only a GenerateContentResponse has (a chunk may carry usage or the model version alone).
_GEMINI_KEYS = frozenset(("candidates", "usageMetadata", "modelVersion", "promptFeedback"))


class GeminiDialect(JsonDialect):
    fragments = False
    empty_arguments = "{}"

    def __init__(self, warnings: WarningLog) -> None:
        super().__init__(warnings)
        self._calls: dict[int, int] = {}  # candidate -> calls opened so far (the index of the next)
        self._open: dict[int, tuple[int, dict]] = {}  # candidate -> (call index, arguments being built)
        self._meta: tuple = (None, None)

    def ops(self, event: FramedEvent, number: int) -> list:
        if event.type == "array-end":  # the closing "]" of a JSON-array stream: its end marker
            return self._close_all(number) + [StreamEnd(number)]
        if event.data == b"[DONE]":
            return []
        obj = self._load(event.data, number)
        return [] if obj is None else self._chunk_ops(obj, number)

    def _chunk_ops(self, obj: dict, number: int) -> list:
        out: list = []
        if obj.get("error"):
            out.append(ProviderError(number, obj["error"]))
        meta = (obj.get("modelVersion") or None, obj.get("responseId") or None)
        if meta != self._meta and any(meta):
            self._meta = meta
            out.append(Meta(number, *meta))
        if type(obj.get("usageMetadata")) is dict:
            out.append(Usage(number, obj["usageMetadata"]))  # cumulative: the last one wins
        for candidate in as_list(obj.get("candidates")):
            if type(candidate) is not dict:
                continue
            choice = as_int(candidate.get("index")) or 0
            for part in as_list(as_dict(candidate.get("content")).get("parts")):
                if type(part) is dict:
                    self._part(part, choice, number, out)
            if type(candidate.get("finishReason")) is str:
                out.extend(self._close(choice, number))
                out.append(Finish(number, choice, candidate["finishReason"]))
        return out

    def _part(self, part: dict, choice: int, number: int, out: list) -> None:
        call = part.get("functionCall")
        if type(call) is dict:
            self._function_call(call, choice, number, out)
        elif type(part.get("text")) is str and part["text"]:
            out.append(
                TextDelta(number, choice, "reasoning" if part.get("thought") else "text", part["text"])
            )

    def _function_call(self, call: dict, choice: int, number: int, out: list) -> None:
        if call.get("name"):
            out.extend(self._close(choice, number))  # a new call closes one left open
            index = self._calls.get(choice, 0)
            self._calls[choice] = index + 1
            out.append(
                ToolCallDelta(
                    number, choice, call.get("id"), index, call["name"], call.get("args"), whole=True
                )
            )
            if call.get("willContinue") and "args" not in call:
                self._open[choice] = (index, {})
            return
        partial = call.get("partialArgs")
        if type(partial) is list:
            opened = self._open.get(choice)
            if opened is None:
                self._malformed(
                    number, repr(call).encode(), "continues a function call that was never opened"
                )
                return
            for value in partial:
                if type(value) is dict:
                    _set_path(opened[1], value)
            if not call.get("willContinue"):
                out.extend(self._close(choice, number))
        elif not call:  # {} closes the open call
            out.extend(self._close(choice, number))

    def _close(self, choice: int, number: int) -> list:
        opened = self._open.pop(choice, None)
        if opened is None:
            return []
        return [ToolCallDelta(number, choice, None, opened[0], None, opened[1])]

    def _close_all(self, number: int) -> list:
        return [op for choice in list(self._open) for op in self._close(choice, number)]

    def finish(self, number: int) -> list:
        # A stream cut while a call's arguments were still streaming: show what had arrived.
        return self._close_all(number)

    def message_ops(self, body: bytes) -> list:
        obj = self._load(body, 1)
        if obj is None:
            return []
        return self._chunk_ops(obj, 1) + self._close_all(1) + [StreamEnd(1)]


def _set_path(root: dict, value: dict) -> None:
    """Put one ``partialArgs`` value at its JSON path; a string continuing a string is appended."""
    path = value.get("jsonPath")
    if type(path) is not str or not path.startswith("$"):
        return
    # An index only where the path says [N]; a key that is digits (.0, ['0']) stays a key.
    keys = [
        int(index) if index is not None else next(g for g in (name, single, double) if g is not None)
        for name, index, single, double in (match.groups() for match in _PATH_TOKEN.finditer(path, 1))
    ]
    if not keys:
        return
    new = None
    for field in _VALUE_FIELDS:
        if field in value:
            new = value[field]
            break
    node: Any = root  # an object or an array, by the key that led to it
    for key, after in zip(keys, keys[1:] + [None], strict=True):
        if after is None:
            break
        child = node[key] if _has(node, key) else None
        if not isinstance(child, (dict, list)):
            child = [] if type(after) is int else {}
            _put(node, key, child)
        node = child
    last = keys[-1]
    if type(new) is str and _has(node, last) and type(node[last]) is str:
        new = node[last] + new
    _put(node, last, new)


def _has(node, key) -> bool:
    if type(node) is dict:
        return key in node
    return type(key) is int and key < len(node)


def _put(node, key, value) -> None:
    if type(node) is dict:
        if type(key) is str:  # an index into an object is no place: the value is left out
            node[key] = value
    elif type(key) is int:
        while len(node) <= key:
            node.append(None)
        node[key] = value


# -- requests ------------------------------------------------------------------------------------------------


def _tools(request: dict) -> dict | None:
    tools = request.get("tools")
    if tools is None:
        return None
    declared: dict = {}
    for tool in tools if type(tools) is list else ():
        if type(tool) is not dict:
            continue
        for key in ("functionDeclarations", "function_declarations"):
            for declaration in as_list(tool.get(key)):
                if type(declaration) is dict:
                    schema = declaration.get("parametersJsonSchema")
                    if schema is None:
                        schema = _openapi_types(declaration.get("parameters"))
                    declare(declared, declaration, schema)
    return declared


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


def _forced(request: dict) -> str | None:
    config = request.get("toolConfig")
    calling = config.get("functionCallingConfig") if type(config) is dict else None
    if type(calling) is dict and calling.get("mode") == "ANY":
        allowed = calling.get("allowedFunctionNames")
        if type(allowed) is list and len(allowed) == 1 and type(allowed[0]) is str:
            return allowed[0]
    return None


def _echoes(request: dict, add_call, add_result) -> None:
    for turn, part in message_blocks(request, "contents", "parts"):
        if type(part.get("functionCall")) is dict:
            call = part["functionCall"]
            add_call(call.get("id"), call.get("name"), call.get("args"), turn)
        elif type(part.get("functionResponse")) is dict:
            answer = part["functionResponse"]
            response = answer.get("response")
            # By convention a failed tool's response holds "error" (the SDKs' automatic calling does so).
            # The API's calls carry no id: a result is told by its name then.
            failed = type(response) is dict and "error" in response
            add_result(answer.get("id"), response, failed, answer.get("name"))


def usage_parts(raw: dict) -> UsageParts:
    """``usageMetadata`` (cumulative: the last wins). ``promptTokenCount`` includes the cached tokens;
    the tool-use prompt is input too, and thoughts are output (``candidatesTokenCount`` leaves them out).
    A count of 0 is left out of the JSON (proto3): the fields present are added up."""
    thoughts = dig(raw, "thoughtsTokenCount")
    return {
        "input": (dig(raw, "promptTokenCount"), dig(raw, "toolUsePromptTokenCount")),
        "output": (dig(raw, "candidatesTokenCount"), thoughts),
        "cache_read": (dig(raw, "cachedContentTokenCount"),),
        "reasoning": (thoughts,),
        "total": (dig(raw, "totalTokenCount"),),
    }


FORMAT = WireFormat(
    name="gemini",
    dialect=GeminiDialect,
    # A JSON array written progressively, unless the request asked for alt=sse: the first byte tells.
    framings=("jsonarray", "sse"),
    paths=((r":streamGenerateContent$", True), (r":generateContent$", False)),
    sniff=lambda event, obj: obj is not None and not _GEMINI_KEYS.isdisjoint(obj),
    sniff_message=lambda obj: "candidates" in obj,
    tools=_tools,
    forced=_forced,
    echoes=_echoes,
    usage=usage_parts,
    provider="google",
    genai_provider="gcp.gemini",
    genai_operation="generate_content",
    rewrite=RewriteSupport(whole="a functionCall part"),
)
