"""OpenAI Responses API streams (``/v1/responses``; also Azure, Ollama, vLLM, LM Studio, OpenRouter).

A function call is an output item: ``output_item.added`` names it (``call_id``, ``name``), argument
deltas name it by ``output_index`` (kept even where ``item_id`` rotates on every event, as GitHub
Copilot's endpoint does) or else by ``item_id``. ``function_call_arguments.done`` and
``output_item.done`` restate the whole arguments: used when no delta came (LM Studio sends none),
compared with the deltas otherwise. A custom tool's call (a free-form tool, as Codex's ``apply_patch``) is
the same with ``custom_tool_call`` items and ``custom_tool_call_input`` events: its ``input``, raw text, is
its arguments. A call names the ``namespace`` that declared its tool where it has one (Codex declares each
MCP server's tools in one). The calls of OpenAI's built-in tools that the client runs are calls too, whole
in their items (read at ``output_item.done``), each named by its tool's type, its arguments the item's
object as JSON: a client-executed tool search (``tool_search_call`` with ``execution: client``: Codex
searches its deferred MCP tools so; its ``arguments``), ``shell_call`` (its ``action``; not a hosted
shell's, whose item names a container), ``local_shell_call`` (``action``), ``apply_patch_call``
(``operation``), ``computer_call`` (``action``, or ``actions``).

Requests: flat ``tools[]`` (``name``, ``parameters``; a ``namespace``'s tools too, a name two namespaces
declare differently without a schema to judge; the built-in tools above by their type), and the tools
loaded by the ``tool_search_output`` and ``additional_tools`` items of ``input[]``; a request continuing a stored
response (``previous_response_id``, ``conversation``) with a client tool search may have loaded more
(``tools_open``). ``parallel_tool_calls``, ``tool_choice`` of type ``function`` or ``custom``; echoes
are ``input[]`` items (``function_call``, ``custom_tool_call``, the built-in calls, and their
``_output``). Rewriting: a run is the span of consecutive call items (a
function's or a custom tool's), ``sequence_number`` renumbered on the way out.
"""

from __future__ import annotations

import zlib

import orjson

from ..framing import FramedEvent
from ..ops import Finish, Meta, ProviderError, StreamEnd, TextDelta, ToolCallDelta, Usage
from ..rewrite.reorder import BOUNDARY, END, FRAGMENT, PASS, START
from ..usage import UsageParts, dig
from ..warnings import WarningLog
from .base import (
    JsonDialect,
    RewriteSupport,
    WebSocketSupport,
    WireFormat,
    as_dict,
    as_int,
    as_list,
    as_str,
    forced_by_type,
)

_TEXT_EVENTS = {
    "response.output_text.delta": "text",
    "response.refusal.delta": "refusal",
    "response.reasoning_summary_text.delta": "reasoning",
    "response.reasoning_text.delta": "reasoning",
}
_TERMINAL = ("response.completed", "response.incomplete", "response.failed")
# The output items that are a call the client runs, and the field holding their arguments.
_CALL_ITEMS = {"function_call": "arguments", "custom_tool_call": "input"}
_CALL_TYPES = tuple(_CALL_ITEMS)  # to test any JSON value against (a list is unhashable)
_DELTAS = ("response.function_call_arguments.delta", "response.custom_tool_call_input.delta")
# OpenAI's built-in tools whose calls the client runs, whole in their items (a shell call's commands also
# stream, in response.shell_call_command.* events, and its item restates them): item type -> the call's name
# (its tool's type) and the item's field holding its arguments, an object.
_SEARCH = "tool_search"
_SHELL = "shell"
_COMPUTER = "computer"
_BUILTIN_CALLS = {
    "tool_search_call": (_SEARCH, "arguments"),
    "shell_call": (_SHELL, "action"),
    "local_shell_call": ("local_shell", "action"),
    "apply_patch_call": ("apply_patch", "operation"),
    "computer_call": (_COMPUTER, "action"),
}
# The tool types declaring them (``computer_use_preview``: the computer tool before its release).
_BUILTIN_TOOLS = {
    _SEARCH: _SEARCH,
    _SHELL: _SHELL,
    "local_shell": "local_shell",
    "apply_patch": "apply_patch",
    _COMPUTER: _COMPUTER,
    "computer_use_preview": _COMPUTER,
}
# The answers, and the field holding each one's result.
_OUTPUT_ITEMS = {
    "function_call_output": "output",
    "custom_tool_call_output": "output",
    "tool_search_output": "tools",  # a tool search's result is the tools it loaded
    "shell_call_output": "output",
    "local_shell_call_output": "output",
    "apply_patch_call_output": "output",
    "computer_call_output": "output",
}
# The input items that load tools for the turns after them (a tool search's result, tools added mid-way).
_LOADING_ITEMS = ("tool_search_output", "additional_tools")
# Over a WebSocket: the tool-loading items and the response ids a connection remembers (the latest).
LOADED_CAP = 256
IDS_CAP = 4096


def _json_text(value):
    """A built-in call's ``arguments`` (a JSON object on the wire) as the JSON text a call's arguments are;
    a string as it is; None for none."""
    if value is None or type(value) is str:
        return value
    try:
        return orjson.dumps(value).decode()
    except (TypeError, orjson.JSONEncodeError):
        return None


def _builtin(item: dict) -> tuple[str, str | None] | None:
    """(name, arguments as JSON text) of a built-in tool's call the client runs; None for any other item (a
    server-executed tool search, a hosted shell's call: its item names a container)."""
    kind = item.get("type")
    found = _BUILTIN_CALLS.get(kind) if type(kind) is str else None
    if found is None:
        return None
    name, field = found
    if name == _SEARCH:
        if item.get("execution") != "client":
            return None
    elif name == _SHELL:
        environment = item.get("environment")
        if type(environment) is dict and environment.get("type") not in (None, "local"):
            return None
    value = item.get(field)
    if value is None and name == _COMPUTER:
        value = item.get("actions")  # a batch of actions, in the computer tool's released shape
    return name, _json_text(value)


def _answer(item: dict) -> tuple[str, object, bool | None] | None:
    """(call id, result, failed) of an answer in ``input[]``; None for any other item. A local shell's
    output names its call by ``id``; an applied patch says whether it failed (``status``)."""
    kind = item.get("type")
    field = _OUTPUT_ITEMS.get(kind) if type(kind) is str else None
    if field is None:
        return None
    call_id = item.get("call_id")
    if call_id is None and kind == "local_shell_call_output":
        call_id = item.get("id")
    if type(call_id) is not str:
        return None
    status = item.get("status") if kind == "apply_patch_call_output" else None
    failed = None if status not in ("completed", "failed") else status == "failed"
    return call_id, item.get(field), failed


class ResponsesDialect(JsonDialect):
    def __init__(self, warnings: WarningLog) -> None:
        super().__init__(warnings)
        self._index_of_item: dict[str, int] = {}  # item_id -> output_index, from output_item.added
        self._streamed: dict[int | None, list[int]] = {}  # output_index -> [length, crc32] of its deltas
        self._names: dict[int | None, str | None] = {}  # output_index -> name, for the mismatch warning

    def ops(self, event: FramedEvent, number: int) -> list:
        if event.data == b"[DONE]":  # some clones add one; the terminal event is the end marker
            return []
        obj = self._load(event.data, number)
        return [] if obj is None else self.obj_ops(obj, event.type, number)

    def obj_ops(self, obj: dict, kind: str | None, number: int) -> list:
        kind = as_str(obj.get("type")) or kind
        out: list = []
        if kind in _DELTAS:
            index = self._index(obj)
            delta = obj.get("delta")
            if type(delta) is str:
                seen = self._streamed.get(index)
                if seen is None:
                    seen = self._streamed[index] = [0, 0]
                seen[0] += len(delta)
                seen[1] = zlib.crc32(delta.encode(), seen[1])
            custom = kind == "response.custom_tool_call_input.delta"
            out.append(ToolCallDelta(number, 0, None, index, None, delta, custom=custom))
        elif kind in _TEXT_EVENTS:
            delta = obj.get("delta")
            if type(delta) is str and delta:
                out.append(TextDelta(number, 0, _TEXT_EVENTS[kind], delta))
        elif kind == "response.output_item.added":
            item = as_dict(obj.get("item"))
            item_type = item.get("type")
            if item_type in _CALL_TYPES:
                index = as_int(obj.get("output_index"))
                if type(item.get("id")) is str and index is not None:
                    self._index_of_item[item["id"]] = index
                self._names[index] = item.get("name")
                call_id = item.get("call_id") or item.get("id")
                custom = item_type == "custom_tool_call"
                namespace = item.get("namespace")
                out.append(
                    ToolCallDelta(
                        number, 0, call_id, index, item.get("name"), None, custom=custom, namespace=namespace
                    )
                )
        elif kind == "response.function_call_arguments.done":
            self._final(self._index(obj), obj.get("arguments"), number, out, False)
        elif kind == "response.custom_tool_call_input.done":
            self._final(self._index(obj), obj.get("input"), number, out, True)
        elif kind == "response.output_item.done":
            item = as_dict(obj.get("item"))
            item_type = item.get("type")
            if item_type in _CALL_TYPES:
                field = _CALL_ITEMS[item_type]
                custom = item_type == "custom_tool_call"
                self._final(as_int(obj.get("output_index")), item.get(field), number, out, custom)
            elif (builtin := _builtin(item)) is not None:
                # Whole in its item, which names it: a call of its own, as every client takes it
                call_id = item.get("call_id") or item.get("id")
                name, arguments = builtin
                index = as_int(obj.get("output_index"))
                out.append(
                    ToolCallDelta(number, 0, call_id, index, name, arguments, whole=True, builtin=name)
                )
        elif kind in _TERMINAL:
            self._terminal(kind, as_dict(obj.get("response")), number, out)
        elif kind in ("response.created", "response.in_progress", "response.queued"):
            response = as_dict(obj.get("response"))
            if response.get("model") or response.get("id"):
                out.append(Meta(number, response.get("model") or None, response.get("id") or None))
        elif kind == "error":
            # Both shapes seen: top-level code/message (SDK type), or nested under "error".
            out.append(
                ProviderError(number, obj.get("error") or {k: v for k, v in obj.items() if k != "type"})
            )
        return out

    def _index(self, obj: dict) -> int | None:
        index = as_int(obj.get("output_index"))
        if index is None and type(obj.get("item_id")) is str:
            index = self._index_of_item.get(obj["item_id"])
        return index

    def _final(self, index: int | None, arguments, number: int, out: list, custom: bool) -> None:
        if type(arguments) is not str or index is None:
            return
        seen = self._streamed.get(index)
        if seen is None:
            # No delta carried these arguments: the restatement is all there is. Mark it streamed so
            # output_item.done, restating them again, does not add them twice.
            self._streamed[index] = [len(arguments), zlib.crc32(arguments.encode())]
            out.append(ToolCallDelta(number, 0, None, index, None, arguments, custom=custom))
        elif seen != [len(arguments), zlib.crc32(arguments.encode())]:
            self._warn.add(
                "arguments-mismatch",
                f"event {number}: the final arguments of output item {index} ({self._names.get(index)}) "
                "differ from what its deltas carried",
                event=number,
                output_index=index,
                name=self._names.get(index),
                final=arguments[:4096],
            )
            seen[:] = [len(arguments), zlib.crc32(arguments.encode())]  # warn once per restatement

    def _terminal(self, kind: str, response: dict, number: int, out: list) -> None:
        if response.get("model") or response.get("id"):
            out.append(Meta(number, response.get("model") or None, response.get("id") or None))
        if type(response.get("usage")) is dict:
            out.append(Usage(number, response["usage"]))
        if kind == "response.failed":
            out.append(ProviderError(number, response.get("error") or {"status": "failed"}))
        status = as_str(response.get("status")) or kind.rsplit(".", 1)[1]
        out.append(Finish(number, 0, status))
        out.append(StreamEnd(number))

    def message_ops(self, body: bytes) -> list:
        obj = self._load(body, 1)
        if obj is None:
            return []
        out: list = []
        if type(obj.get("error")) is dict and obj.get("object") != "response":
            # A whole message, ended: an error, not a truncated stream.
            return [ProviderError(1, obj["error"]), StreamEnd(1)]
        for position, item in enumerate(as_list(obj.get("output"))):
            if type(item) is not dict:
                continue
            kind = item.get("type")
            if kind in _CALL_TYPES:
                arguments = item.get(_CALL_ITEMS[kind])
                call_id = item.get("call_id") or item.get("id")
                custom = kind == "custom_tool_call"
                name, namespace = item.get("name"), item.get("namespace")
                out.append(
                    ToolCallDelta(
                        1, 0, call_id, position, name, arguments, custom=custom, namespace=namespace
                    )
                )
            elif (builtin := _builtin(item)) is not None:
                call_id = item.get("call_id") or item.get("id")
                name, arguments = builtin
                out.append(ToolCallDelta(1, 0, call_id, position, name, arguments, builtin=name))
            elif kind == "message":
                for part in as_list(item.get("content")):
                    if type(part) is dict and part.get("type") == "output_text" and part.get("text"):
                        out.append(TextDelta(1, 0, "text", part["text"]))
                    elif type(part) is dict and part.get("type") == "refusal" and part.get("refusal"):
                        out.append(TextDelta(1, 0, "refusal", part["refusal"]))
            elif kind == "reasoning":
                for part in [*as_list(item.get("summary")), *as_list(item.get("content"))]:
                    if type(part) is dict and type(part.get("text")) is str and part["text"]:
                        out.append(TextDelta(1, 0, "reasoning", part["text"]))
        self._terminal("response." + str(obj.get("status") or "completed"), obj, 1, out)
        return out


# -- rewriting -----------------------------------------------------------------------------------------------

_FRAGMENTS = (
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.custom_tool_call_input.delta",
    "response.custom_tool_call_input.done",
)


class ItemKeys:
    def __init__(self) -> None:
        self._index_of_item: dict[str, int] = {}

    def __call__(self, unit) -> tuple[int, object]:
        if unit.quiet:
            return PASS, None
        obj = unit.obj
        if type(obj) is not dict:
            return BOUNDARY, None
        kind = obj.get("type")
        if type(kind) is not str:
            kind = unit.name
        if kind in _FRAGMENTS:
            key = self._key(obj)
            return (FRAGMENT, key) if key is not None else (BOUNDARY, None)
        if kind in ("response.output_item.added", "response.output_item.done"):
            item = obj.get("item")
            index = obj.get("output_index")
            if type(item) is dict and item.get("type") in _CALL_TYPES and type(index) is int:
                if kind.endswith("added"):
                    if type(item.get("id")) is str:
                        self._index_of_item[item["id"]] = index
                    return START, index
                return END, index
        return BOUNDARY, None

    def _key(self, obj: dict) -> int | None:
        index = obj.get("output_index")
        if type(index) is int:
            return index
        item_id = obj.get("item_id")
        return self._index_of_item.get(item_id) if type(item_id) is str else None


class SequenceNumbers:
    """Numbers the events that leave 1, 2, 3... on from the first one's own number; an event whose number
    is already right keeps its bytes."""

    name = "sequence"

    def __init__(self, counts: dict) -> None:
        self._last: int | None = None
        self.counts = counts

    def push(self, unit) -> list:
        if unit.quiet:
            return [unit]
        for i, obj in enumerate(unit.objs):
            if type(obj) is not dict:
                continue
            number = obj.get("sequence_number")
            if type(number) is not int:
                continue
            wanted = number if self._last is None else self._last + 1
            self._last = wanted
            if wanted != number:
                obj["sequence_number"] = wanted
                unit.rewrite(i, obj)
                self.counts["sequence_number"] = self.counts.get("sequence_number", 0) + 1
        return [unit]


# -- requests ------------------------------------------------------------------------------------------------


def _tools(request: dict) -> dict | None:
    """Flat ``tools[]`` (``name``, ``parameters``), the tools a ``namespace`` holds (Codex declares its
    sub-agent tools and each MCP server's so: a call names the tool, its namespace beside it), the built-in
    tools a client runs by their type (a client ``tool_search`` with its ``parameters``; the others with no
    schema), and the tools ``input[]`` items loaded (a tool search's output,
    ``additional_tools``); None without a ``tools`` key. A name declared twice with different schemas
    (two MCP servers' ``search``) keeps none: which one a call meant is not known."""
    tools = request.get("tools")
    if tools is None:
        return None
    declared: dict = {}
    ambiguous: set = set()
    _declare_all(declared, ambiguous, tools)
    items = request.get("input")
    if type(items) is list:
        for item in items:
            if type(item) is dict and item.get("type") in _LOADING_ITEMS:
                _declare_all(declared, ambiguous, item.get("tools"))
    return declared


def _declare_all(declared: dict, ambiguous: set, tools) -> None:
    for tool in as_list(tools):
        if type(tool) is not dict:
            continue
        kind = tool.get("type")
        if kind == "namespace":
            for inner in as_list(tool.get("tools")):
                if type(inner) is dict:
                    _declare_one(declared, ambiguous, inner.get("name"), inner.get("parameters"))
        elif kind == _SEARCH:
            if tool.get("execution") == "client":
                _declare_one(declared, ambiguous, _SEARCH, tool.get("parameters"))
        elif type(kind) is str and kind in _BUILTIN_TOOLS:
            _declare_one(declared, ambiguous, _BUILTIN_TOOLS[kind], None)
        else:
            _declare_one(declared, ambiguous, tool.get("name"), tool.get("parameters"))


def _declare_one(declared: dict, ambiguous: set, name, schema) -> None:
    if type(name) is not str or name in ambiguous:
        return
    schema = schema if type(schema) is dict else None
    known = declared.get(name)
    if known is None:
        declared[name] = schema  # new, or a schema where the first declaration gave none
    elif schema is not None and schema != known:
        declared[name] = None
        ambiguous.add(name)


def _tools_open(request: dict) -> bool | None:
    """True where a client tool search may have loaded tools in a stored earlier turn this request does not
    carry (it continues one: ``previous_response_id``, ``conversation``)."""
    if not (request.get("previous_response_id") or request.get("conversation")):
        return None
    for tool in as_list(request.get("tools")):
        if type(tool) is dict and tool.get("type") == _SEARCH and tool.get("execution") == "client":
            return True
    return None


def _echoes(request: dict, add_call, add_result) -> None:
    items = request.get("input")
    if type(items) is not list:
        return
    for turn, item in enumerate(items, 1):  # a flat list of items: each one a turn of its own
        if type(item) is not dict:
            continue
        kind = item.get("type")
        if kind == "function_call":
            add_call(item.get("call_id"), item.get("name"), item.get("arguments"), turn)
        elif kind == "custom_tool_call":
            add_call(item.get("call_id"), item.get("name"), item.get("input"), turn)
        elif (builtin := _builtin(item)) is not None:
            add_call(item.get("call_id"), builtin[0], builtin[1], turn)
        elif (answer := _answer(item)) is not None:
            add_result(*answer)


# -- over a WebSocket ----------------------------------------------------------------------------------------


class ResponsesSession:
    """Responses over a WebSocket ("WebSocket mode", Codex's transport): each client ``response.create``
    starts a response (``generate: false``: a prewarm that makes none); the server's events are this
    module's, one per message, and carry no response id: they belong to the oldest running response of
    their ``stream_id`` lane (one lane without it: responses in turn). A ``response.create`` that follows
    a response (``previous_response_id``) answers its calls with ``function_call_output`` (and
    ``custom_tool_call_output``, a built-in call's output) items: the client's evidence, and that response's
    evidence is then in. A response that follows one of this connection's sends only its new items: the
    tools that earlier requests on the connection loaded (a tool search's output, any lane's) are still
    declared, and its calls are checked with them."""

    def __init__(self, connection) -> None:
        self.connection = connection
        self.loaded: list = []  # the tool-loading input items of this connection's requests, the latest
        self.trimmed = False  # some were dropped (LOADED_CAP): tools may be declared out of sight
        self.ids: dict = {}  # ids of the responses this connection made, the latest (an ordered set)

    def client(self, obj: dict, number: int) -> None:
        if obj.get("type") != "response.create":
            return  # response.steer, response.processed, response.append: nothing to rebuild
        connection = self.connection
        lane = obj.get("stream_id") if type(obj.get("stream_id")) is str else None
        items = as_list(obj.get("input"))
        outputs = [answer[0] for item in items if type(item) is dict and (answer := _answer(item))]
        previous = obj.get("previous_response_id")
        answered = connection.answer(outputs, previous) if outputs else []
        named = connection.named(previous)
        connection.settle(answered + ([named] if named is not None else []))
        connection.start(request=self._request(obj, items), lane=lane, prewarm=obj.get("generate") is False)

    def _request(self, obj: dict, items: list | tuple) -> dict:
        """The request to check this response's calls against: ``obj``, with the tools loaded earlier on
        this connection where it continues one of its responses (as if they were in its input)."""
        earlier = self.loaded
        loading = [item for item in items if type(item) is dict and item.get("type") in _LOADING_ITEMS]
        if loading:
            self.loaded = earlier + loading
            if len(self.loaded) > LOADED_CAP:
                self.loaded, self.trimmed = self.loaded[-LOADED_CAP:], True
        previous = obj.get("previous_response_id")
        if type(previous) is not str or previous not in self.ids or self.trimmed:
            return obj  # a conversation begun elsewhere: what it loaded is out of sight (tools_open)
        request = {key: value for key, value in obj.items() if key != "previous_response_id"}
        request["input"] = earlier + list(items)
        return request

    def server(self, obj: dict, number: int) -> None:
        connection = self.connection
        lane = obj.get("stream_id") if type(obj.get("stream_id")) is str else None
        kind = obj.get("type")
        if kind == "response.created":
            response_id = as_dict(obj.get("response")).get("id")
            if type(response_id) is str:
                self.ids[response_id] = None
                if len(self.ids) > IDS_CAP:
                    del self.ids[next(iter(self.ids))]
        response = connection.oldest(lane)
        if response is None:
            if kind == "error" or type(kind) is not str or not kind.startswith("response."):
                if kind == "error":
                    connection.warn(
                        "provider-error",
                        f"message {number}: provider error with no response running: "
                        f"{obj.get('error') or obj}",
                        ws_message=number,
                        error=obj.get("error") or obj,
                    )
                return  # codex.rate_limits and other events of no response
            response = connection.start(lane=lane)  # its response.create was not seen
        connection.feed(response, obj)
        if kind in _TERMINAL or kind == "error":
            connection.end(response)


def _ws_sniff(from_client: bool, obj: dict) -> bool:
    kind = obj.get("type")
    if from_client:
        return kind == "response.create"
    return kind in ("response.created", "response.queued")


def _sniff(event, obj) -> bool:
    if (event.type or "").startswith("response."):
        return True
    return obj is not None and type(obj.get("type")) is str and obj["type"].startswith("response.")


def _sniff_message(obj: dict) -> bool:
    return (obj.get("object") or obj.get("type")) == "response"


def usage_parts(raw: dict) -> UsageParts:
    """The response's ``usage``: ``input_tokens`` includes the cached ones."""
    return {
        "input": (dig(raw, "input_tokens"),),
        "output": (dig(raw, "output_tokens"),),
        "cache_read": (dig(raw, "input_tokens_details.cached_tokens"),),
        "cache_write": (dig(raw, "input_tokens_details.cache_write_tokens"),),
        "reasoning": (dig(raw, "output_tokens_details.reasoning_tokens"),),
        "total": (dig(raw, "total_tokens"),),
    }


FORMAT = WireFormat(
    name="openai-responses",
    dialect=ResponsesDialect,
    framings=("sse",),
    paths=((r"/responses$", False),),
    sniff=_sniff,
    sniff_message=_sniff_message,
    tools=_tools,
    tools_open=_tools_open,
    parallel=lambda request: False if request.get("parallel_tool_calls") is False else None,
    forced=lambda request: forced_by_type(request, "function") or forced_by_type(request, "custom"),
    echoes=_echoes,
    usage=usage_parts,
    provider="openai",
    genai_provider="openai",
    rewrite=RewriteSupport(
        key="output_index",
        name_whole_in="response.output_item.added",
        keys=lambda purpose: ItemKeys(),
        fixups=lambda counts: SequenceNumbers(counts),
    ),
    websocket=WebSocketSupport(
        paths=(r"/responses$",), session=ResponsesSession, sniff=_ws_sniff, rewrite_as="openai-responses"
    ),
)
