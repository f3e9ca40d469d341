"""OpenAI Chat Completions (and the many servers that copy it): everything toolcall-lens knows of it.

Streams: SSE ``chat.completion.chunk`` objects, ``data: [DONE]`` at the end. Every quirk about the shape of
a chunk lives here: the Azure prompt-filter chunk, the ``choices: []`` usage chunk, Groq's
``x_groq.usage``, ``reasoning`` vs ``reasoning_content``, Magistral's content arrays, the deprecated
``function_call``, mid-stream ``{"error": ...}``, a custom tool's call (``custom``: its ``name``, its
``input`` as raw text). Requests: ``tools[].function`` (and ``custom``), ``functions``,
``parallel_tool_calls``, ``tool_choice.function`` (or ``custom``); echoes in ``messages[].tool_calls`` and
``tool_call_id``. Rewriting: the reorder keys, and the edits only this format allows (a name sent in two
pieces, the name and id repeated, every call on index 0, indices given back), with calls told apart by
the assembly's own identity routing.
"""

from __future__ import annotations

import sys
from typing import Any

from ..assembly import Assembly
from ..framing import FramedEvent
from ..ops import Finish, Meta, ProviderError, StreamEnd, TextDelta, ToolCallDelta, Usage
from ..rewrite.reorder import BOUNDARY, FINAL, FRAGMENT, PASS
from ..usage import UsageParts, dig
from ..warnings import WarningLog
from .base import (
    JsonDialect,
    RewriteSupport,
    WireFormat,
    as_dict,
    as_list,
    declare,
    message_list,
    named,
    snippet,
)

_REASONING_KEYS = ("reasoning_content", "reasoning")


class ChatCompletionsDialect(JsonDialect):
    def __init__(self, warnings: WarningLog) -> None:
        super().__init__(warnings)
        self._model: Any = None  # the last model and id named, as the wire sent them
        self._response_id: Any = None

    def ops(self, event: FramedEvent, number: int) -> list:
        """The operations of one stream event (a ``chat.completion.chunk``)."""
        data = event.data
        if data == b"[DONE]":
            return [StreamEnd(number)]
        obj = self._load(data, number)
        return [] if obj is None else self._chunk_ops(obj, number)

    def message_ops(self, body: bytes) -> list:
        """A non-streamed response (a ``chat.completion``), as the operations of a one-event stream."""
        obj = self._load(body, 1)
        if obj is None:
            return []
        choices = obj.get("choices")
        if type(choices) is list:
            # Same shape as a chunk once "message" is read as the whole "delta" (calls indexed by position).
            as_deltas = []
            for choice in choices:
                if type(choice) is not dict:
                    continue
                message = choice.get("message")
                if type(message) is dict and type(message.get("tool_calls")) is list:
                    message = dict(message)
                    message["tool_calls"] = [
                        {"index": n, **entry} if type(entry) is dict and "index" not in entry else entry
                        for n, entry in enumerate(message["tool_calls"])
                    ]
                as_deltas.append({**choice, "delta": message})
            obj = {**obj, "choices": as_deltas}
        out = self._chunk_ops(obj, 1)
        out.append(StreamEnd(1))
        return out

    def _chunk_ops(self, obj: dict, number: int) -> list:
        out: list = []
        error = obj.get("error")
        if error:
            out.append(ProviderError(number, error))
        model = obj.get("model")
        response_id = obj.get("id")
        # Azure's first chunk has empty id/model/object; every chunk repeats them: emit on change only.
        if (model and model != self._model) or (response_id and response_id != self._response_id):
            if model:
                self._model = model
            if response_id:
                self._response_id = response_id
            out.append(Meta(number, model or None, response_id or None))
        usage = obj.get("usage")
        if usage and type(usage) is dict:
            out.append(Usage(number, usage))
        groq = obj.get("x_groq")
        if groq and type(groq) is dict and type(groq.get("usage")) is dict:
            out.append(Usage(number, groq["usage"]))
        choices = obj.get("choices")
        if choices and type(choices) is list:
            for choice in choices:
                if type(choice) is dict:
                    self._choice(choice, number, out)
        return out

    def _choice(self, choice: dict, number: int, out: list) -> None:
        index = choice.get("index")
        if type(index) is not int:
            index = 0
        delta = choice.get("delta")
        if delta and type(delta) is dict:
            # A delta holds one or two of these keys: walk what is there rather than ask for each.
            reasoning_seen = False
            for key, value in delta.items():
                if not value:
                    continue
                if key == "tool_calls":
                    if type(value) is list:
                        self._tool_calls(value, number, index, out)
                    else:  # the API sends a list; no client reads another shape (Portkey's Cohere route)
                        self._warn.add(
                            "malformed-event",
                            f"event {number} has tool_calls that are not a list: its calls were not read",
                            event=number,
                            data=snippet(repr(value).encode()),
                        )
                elif key == "content":
                    if type(value) is str:
                        out.append(TextDelta(number, index, "text", value))
                    elif type(value) is list:
                        _content_parts(value, number, index, out)
                elif key in _REASONING_KEYS:
                    # Some servers send both names with the same text: read one.
                    if type(value) is str and not reasoning_seen:
                        reasoning_seen = True
                        out.append(TextDelta(number, index, "reasoning", value))
                elif key == "refusal":
                    if type(value) is str:
                        out.append(TextDelta(number, index, "refusal", value))
                elif key == "function_call" and type(value) is dict:  # deprecated: no id, no index
                    out.append(
                        ToolCallDelta(number, index, None, None, value.get("name"), value.get("arguments"))
                    )
        reason = choice.get("finish_reason")
        if reason and type(reason) is str:
            out.append(Finish(number, index, reason))

    def _tool_calls(self, entries: list, number: int, index: int, out: list) -> None:
        for entry in entries:
            if type(entry) is not dict:
                self._warn.add(
                    "malformed-event",
                    f"event {number} has a tool_calls entry that is not an object",
                    event=number,
                    data=snippet(repr(entry).encode()),
                )
                continue
            function = entry.get("function")
            custom = False
            if type(function) is dict:
                name = function.get("name")
                arguments = function.get("arguments")
            elif type(custom_call := entry.get("custom")) is dict:  # a custom tool's: its input is raw text
                name = custom_call.get("name")
                arguments = custom_call.get("input")
                custom = True
            else:
                name = arguments = None
            call_index = entry.get("index")
            if type(call_index) is not int:
                call_index = None
            out.append(
                ToolCallDelta(number, index, entry.get("id"), call_index, name, arguments, custom=custom)
            )


def _content_parts(parts: list, number: int, index: int, out: list) -> None:
    # Mistral's Magistral streams content as typed parts: text, and thinking holding text parts.
    for part in parts:
        if type(part) is not dict:
            continue
        kind = part.get("type")
        if kind == "text" and type(part.get("text")) is str and part["text"]:
            out.append(TextDelta(number, index, "text", part["text"]))
        elif kind == "thinking":
            for inner in as_list(part.get("thinking")):
                if type(inner) is dict and type(inner.get("text")) is str and inner["text"]:
                    out.append(TextDelta(number, index, "reasoning", inner["text"]))


# -- rewriting -----------------------------------------------------------------------------------------------


class CallRouter:
    """Identity routing of tool-call entries, per choice: the assembly's own rules (``Assembly.route``),
    on an assembly that keeps no text."""

    __slots__ = ("_assembly",)

    def __init__(self) -> None:
        self._assembly = Assembly(WarningLog(), [], max_calls=sys.maxsize)

    @property
    def count(self) -> int:
        """Calls routed so far, every choice (the rewriter's calls cap reads it)."""
        return self._assembly.calls_total

    def route(self, choice: int, entry: dict):
        """(the call, whether this entry opened it), or (None, False) for an entry no call can claim."""
        index = entry.get("index")
        op = ToolCallDelta(
            0, choice, entry.get("id"), index if type(index) is int else None, _name(entry), None
        )
        return self._assembly.route(op)


def _name(entry: dict) -> str | None:
    function = entry.get("function")
    if type(function) is dict:
        name = function.get("name")
        if type(name) is str and name:
            return name
    return None


def tool_entries(obj) -> list[tuple[int, dict]]:
    """(choice index, entry) of every tool-call entry in a chunk, in order."""
    out: list[tuple[int, dict]] = []
    if type(obj) is not dict:
        return out
    choices = obj.get("choices")
    if type(choices) is not list:
        return out
    for choice in choices:
        if type(choice) is not dict:
            continue
        delta = choice.get("delta")
        if type(delta) is not dict:
            continue
        entries = delta.get("tool_calls")
        if type(entries) is not list:
            continue
        index = choice.get("index")
        index = index if type(index) is int else 0
        out += [(index, entry) for entry in entries if type(entry) is dict]
    return out


def _finishes(obj: dict) -> bool:
    choices = obj.get("choices")
    if type(choices) is not list:
        return False
    return any(
        type(c) is dict and type(c.get("finish_reason")) is str and c["finish_reason"] for c in choices
    )


def _carries_more(obj: dict) -> bool:
    """Whether a delta carries something besides tool calls (text, reasoning, a refusal...)."""
    for choice in obj["choices"]:
        delta = choice.get("delta") if type(choice) is dict else None
        if type(delta) is dict and any(v for k, v in delta.items() if k != "tool_calls" and k != "role"):
            return True
    return False


def _role(unit) -> int | None:
    """BOUNDARY, PASS, FINAL, or None for a tool-call chunk (whose key the caller works out)."""
    if unit.quiet:
        return PASS
    finishes = False
    tools = False
    for obj in unit.objs:
        if type(obj) is not dict or "error" in obj:
            return BOUNDARY  # [DONE], a mid-stream error, or a payload we cannot read
        finishes = finishes or _finishes(obj)
        if tool_entries(obj):
            if _carries_more(obj):
                # Text passes in place while calls are held: text riding with a call's fragment must
                # not be moved behind text that came after it.
                return BOUNDARY
            tools = True
    if tools:
        return FINAL if finishes else None
    return BOUNDARY if finishes else PASS


class IndexKeys:
    """Keys for ``interleave``: a chunk belongs to (choice, index) of its first entry. Calls that share an
    index stay in one group, in their order: interleaving them would leave their id-less fragments no
    longer routable, even by a correct client."""

    def __call__(self, unit) -> tuple[int, object]:
        role = _role(unit)
        if role is not None and role != FINAL:
            return role, None
        for obj in unit.objs:
            for choice, entry in tool_entries(obj):
                index = entry.get("index")
                return (role or FRAGMENT), (choice, index if type(index) is int else None)
        return BOUNDARY, None


class CallKeys:
    """Keys for ``serialize``: a chunk belongs to the call (identity routing) of its first entry."""

    def __init__(self) -> None:
        self._router = CallRouter()

    @property
    def calls_seen(self) -> int:
        return self._router.count

    def __call__(self, unit) -> tuple[int, object]:
        key = None
        for obj in unit.objs:  # every entry, whatever the chunk's role: the router must see each call start
            for choice, entry in tool_entries(obj):
                call, _ = self._router.route(choice, entry)
                if key is None and call is not None:
                    key = (choice, call.ordinal)
        role = _role(unit)
        if role is not None and role != FINAL:
            return role, None
        if key is None:
            return BOUNDARY, None  # fragments no call can claim: not ours to move
        return (role or FRAGMENT), key


def _head_chunk(obj: dict, choices: list) -> dict:
    """A chunk with ``obj``'s envelope (id, model, ...) and these choices: no usage, no finish."""
    head = {**obj, "choices": choices}
    if type(head.get("usage")) is dict:
        head["usage"] = None
    head.pop("x_groq", None)
    return head


def split_final(unit):
    """A chunk carrying both tool-call entries and a finish_reason, as two units: the entries (no finish),
    then everything else. None when there is nothing to split."""
    fragments, rest = [], []
    keep = {id(part[1]): part[0] for part in unit.parts}
    for obj in unit.objs:
        if type(obj) is not dict:
            return None
        if not _finishes(obj):
            (rest if not tool_entries(obj) else fragments).append(obj)
            continue
        if not tool_entries(obj):
            rest.append(obj)
            continue
        carried, left = [], []
        for choice in obj["choices"]:
            delta = choice.get("delta") if type(choice) is dict else None
            if type(delta) is dict and type(delta.get("tool_calls")) is list and delta["tool_calls"]:
                index = {"index": choice["index"]} if "index" in choice else {}
                carried.append({**index, "delta": {"tool_calls": delta["tool_calls"]}, "finish_reason": None})
                left.append({**choice, "delta": {k: v for k, v in delta.items() if k != "tool_calls"}})
            else:
                left.append(choice)
        fragments.append(_head_chunk(obj, carried))
        rest.append({**obj, "choices": left})
    if not fragments or not rest:
        return None
    return unit.derive(fragments, keep), unit.derive(rest, keep)


def _cut(name: str) -> int | None:
    """Where to cut a name so that a correct client (equal: ignore; a longer one starting with it:
    replace; else append) rebuilds it: near the middle, the second piece never starting with the first."""
    if len(name) < 2:
        return None
    for k in (len(name) // 2, len(name) // 2 + 1):
        if 0 < k < len(name) and not name[k:].startswith(name[:k]):
            return k
    return None


class ChatEdits:
    """The injections that edit chunks: ``split-names``, ``repeat-names``, ``collide-index``,
    ``seed-args``. Calls are routed on the chunks as they arrive, before any edit."""

    name = "edits"

    def __init__(self, split: bool, repeat: bool, collide: bool, seed: bool, counts: dict) -> None:
        self._split, self._repeat, self._collide, self._seed = split, repeat, collide, seed
        self._router = CallRouter()
        self.counts = counts
        self.names_split = 0

    @property
    def calls_seen(self) -> int:
        return self._router.count

    def push(self, unit) -> list:
        if unit.quiet:
            return [unit]
        changed: dict[int, list] = {}  # part -> the first chunks of the names it splits
        for i, obj in enumerate(unit.objs):
            if type(obj) is not dict:
                continue
            edited = False
            heads: list = []
            for choice, entry in tool_entries(obj):
                call, created = self._router.route(choice, entry)
                if call is None:
                    continue
                name = _name(entry)
                head = None
                first_name = name is not None and not call.name
                if name:
                    call.name = _grown(call.name, name)
                if name and first_name and self._split:  # name: a name is there (first_name says so)
                    head = self._split_name(entry, name)
                    if head is not None:
                        heads.append((choice, head))
                        edited = True
                        self.names_split += 1
                        self._count("split-names")
                if name and first_name and self._seed:
                    if head is not None:  # the name split too: its first piece comes with the seed
                        head["function"]["arguments"] = "{}"
                    else:
                        head = self._seed_arguments(entry, name)
                        if head is not None:
                            heads.append((choice, head))
                    if head is not None:
                        edited = True
                        self._count("seed-args")
                if self._repeat and (head is not None or not created) and self._repeat_identity(entry, call):
                    edited = True
                    self._count("repeat-names")
                if self._collide and call.id is not None:
                    collided = self._collide_index(entry, call)
                    if head is not None:
                        collided = self._collide_index(head, call) or collided
                    if collided:
                        edited = True
                        self._count("collide-index")
            if edited:
                changed[i] = heads
        if not changed:
            return [unit]
        objs = []
        keep: dict[int, bytes] = {}
        for i, (data, obj) in enumerate(unit.parts):
            part_heads = changed.get(i)
            if part_heads:
                by_choice: dict[int, list] = {}
                for choice, head in part_heads:
                    by_choice.setdefault(choice, []).append(head)
                choices = [
                    {"index": c, "delta": {"tool_calls": entries}, "finish_reason": None}
                    for c, entries in by_choice.items()
                ]
                objs.append(_head_chunk(obj, choices))
            elif part_heads is None:
                keep[id(obj)] = data
            objs.append(obj)
        return [unit.derive(objs, keep)]

    def _count(self, name: str) -> None:
        self.counts[name] = self.counts.get(name, 0) + 1

    @staticmethod
    def _split_name(entry: dict, name: str) -> dict | None:
        """Replace the entry by its name's second piece; return the first chunk's entry (None: no cut)."""
        k = _cut(name)
        if k is None or type(entry.get("index")) is not int:
            return None
        head = {"index": entry["index"]}
        if "id" in entry:
            head["id"] = entry.pop("id")
        head["type"] = entry.pop("type", "function")
        head["function"] = {"name": name[:k], "arguments": ""}
        entry["function"] = {**entry["function"], "name": name[k:]}
        return head

    @staticmethod
    def _seed_arguments(entry: dict, name: str) -> dict | None:
        """A translator's seed: the call opens with ``{}`` as its arguments (Anthropic's empty input, as
        some translate it into Chat Completions), then the entry, without its id and name, goes on with
        the real ones. Returns the opening chunk's entry (None: no index to continue by)."""
        if type(entry.get("index")) is not int:
            return None
        head = {"index": entry["index"]}
        if "id" in entry:
            head["id"] = entry.pop("id")
        head["type"] = entry.pop("type", "function")
        head["function"] = {"name": name, "arguments": "{}"}
        entry["function"] = {k: v for k, v in entry["function"].items() if k != "name"}
        return head

    @staticmethod
    def _repeat_identity(entry: dict, call) -> bool:
        if call.id is None or not call.name:
            return False
        function = entry.get("function")
        function = function if type(function) is dict else {}
        if entry.get("id") == call.id and entry.get("type") == "function" and function.get("name"):
            return False
        rest = {k: v for k, v in entry.items() if k not in ("index", "id", "type", "function")}
        index = {"index": entry["index"]} if "index" in entry else {}
        named = {"name": call.name, **{k: v for k, v in function.items() if k != "name"}}
        if function.get("name"):
            named["name"] = function["name"]
        entry.clear()
        entry.update({**index, "id": call.id, "type": "function", "function": named, **rest})
        return True

    @staticmethod
    def _collide_index(entry: dict, call) -> bool:
        if entry.get("index") == 0 and entry.get("id") == call.id:
            return False
        rest = {k: v for k, v in entry.items() if k not in ("index", "id")}
        entry.clear()
        entry.update({"index": 0, "id": call.id, **rest})
        return True


class Reindex:
    """The ``reindex`` repair: each distinct call (per choice) gets its own index, 0, 1, 2... in order of
    first appearance; an entry without id goes, through its index, to the call that took it last. With its
    own index a continuation needs no id, and a name it repeats verbatim adds nothing: both are dropped,
    since clients that concatenate every field (openai-python's ``accumulate_delta``) would double them."""

    name = "reindex"

    def __init__(self, counts: dict) -> None:
        self._router = CallRouter()
        self.counts = counts

    @property
    def calls_seen(self) -> int:
        return self._router.count

    def push(self, unit) -> list:
        if unit.quiet:
            return [unit]
        for i, obj in enumerate(unit.objs):
            if type(obj) is not dict:
                continue
            edited = False
            for choice, entry in tool_entries(obj):
                call, created = self._router.route(choice, entry)
                if call is None:
                    continue
                repeated = not created and self._drop_repeats(entry, call)
                name = _name(entry)
                if name:
                    call.name = _grown(call.name, name)
                if entry.get("index") != call.ordinal:
                    rest = {k: v for k, v in entry.items() if k != "index"}
                    entry.clear()
                    entry.update({"index": call.ordinal, **rest})
                    self.counts["reindex"] = self.counts.get("reindex", 0) + 1
                    edited = True
                elif repeated:
                    edited = True
            if edited:
                unit.rewrite(i, obj)
        return [unit]

    def _drop_repeats(self, entry: dict, call) -> bool:
        dropped = False
        if call.id is not None and entry.get("id") == call.id:
            del entry["id"]
            dropped = True
        function = entry.get("function")
        if type(function) is dict and call.name and function.get("name") == call.name:
            entry["function"] = {k: v for k, v in function.items() if k != "name"}
            dropped = True
        if dropped:
            self.counts["reindex-dropped-repeats"] = self.counts.get("reindex-dropped-repeats", 0) + 1
        return dropped


def _grown(current: str | None, piece: str) -> str:
    """A call's name after one more piece, as a correct client grows it (equal: ignore; a longer one starting with it: replace; else append)."""
    return piece if not current or piece.startswith(current) else current + piece


# -- requests ------------------------------------------------------------------------------------------------


def request_tools(request: dict) -> dict | None:
    """``tools[].function`` (and ``custom``), and the legacy ``functions``. Cohere and Ollama share it."""
    tools = request.get("tools")
    if tools is None and "functions" not in request:
        return None  # tools may come from elsewhere (a gateway, a saved prompt): nothing to check
    declared: dict = {}
    for tool in tools if type(tools) is list else ():
        if type(tool) is not dict:
            continue
        for key in ("function", "custom"):
            inner = tool.get(key)
            if type(inner) is dict:
                declare(declared, inner, inner.get("parameters"))
    for function in as_list(request.get("functions")):
        if type(function) is dict:
            declare(declared, function, function.get("parameters"))
    return declared


def request_parallel(request: dict) -> bool | None:
    return False if request.get("parallel_tool_calls") is False else None


def request_forced(request: dict) -> str | None:
    choice = request.get("tool_choice")
    if type(choice) is not dict:
        return None
    return named(choice.get("function")) or named(choice.get("custom"))


def request_echoes(request: dict, add_call, add_result) -> None:
    """``messages[].tool_calls`` and the ``tool_call_id`` of tool results. Cohere and Ollama share it: a
    tool result of Ollama's libraries has no ``tool_call_id``, only its tool's name (``tool_name``)."""
    for turn, message in enumerate(message_list(request, "messages"), 1):
        for entry in as_list(message.get("tool_calls")):
            if type(entry) is dict:
                if type(custom := entry.get("custom")) is dict and "function" not in entry:
                    add_call(entry.get("id"), custom.get("name"), custom.get("input"), turn)
                    continue
                function = as_dict(entry.get("function"))
                add_call(entry.get("id"), function.get("name"), function.get("arguments"), turn)
        if type(message.get("tool_call_id")) is str:
            add_result(message["tool_call_id"], message.get("content"), None)  # no failure flag in this shape
        elif type(message.get("tool_name")) is str:
            add_result(None, message.get("content"), None, message["tool_name"])


def _sniff(event, obj) -> bool:
    return obj is not None and ("choices" in obj or obj.get("object") == "chat.completion.chunk")


def usage_parts(raw: dict) -> UsageParts:
    """Chat's usage (Groq's ``x_groq.usage`` too): ``prompt_tokens`` includes the cached ones."""
    return {
        "input": (dig(raw, "prompt_tokens"),),
        "output": (dig(raw, "completion_tokens"),),
        "cache_read": (dig(raw, "prompt_tokens_details.cached_tokens"),),
        "cache_write": (dig(raw, "prompt_tokens_details.cache_write_tokens"),),
        "reasoning": (dig(raw, "completion_tokens_details.reasoning_tokens"),),
        "total": (dig(raw, "total_tokens"),),
    }


def usage_asked(request: dict) -> bool | None:
    """False for a streamed request without ``stream_options.include_usage``: no usage chunk comes."""
    if request.get("stream") is not True:
        return None
    options = request.get("stream_options")
    return type(options) is dict and options.get("include_usage") is True


FORMAT = WireFormat(
    name="openai-chat",
    dialect=ChatCompletionsDialect,
    framings=("sse",),
    # OpenAI (/v1/...), Azure (/openai/deployments/{d}/...), OpenRouter (/api/v1/...), Gemini's
    # OpenAI-compatible endpoint (/v1beta/openai/...), Groq (/openai/v1/...), DeepSeek, local servers.
    paths=((r"/chat/completions$", False),),
    sniff=_sniff,
    sniff_message=lambda obj: obj.get("object") == "chat.completion",
    tools=request_tools,
    parallel=request_parallel,
    forced=request_forced,
    echoes=request_echoes,
    usage=usage_parts,
    tool_finish=frozenset({"tool_calls", "function_call"}),  # function_call: the deprecated functions
    provider="openai",
    genai_provider="openai",
    usage_asked=usage_asked,
    rewrite=RewriteSupport(
        key="id and index",
        keys=lambda purpose: IndexKeys() if purpose == "interleave" else CallKeys(),
        split_final=split_final,
        edits=lambda split, repeat, collide, seed, counts: ChatEdits(split, repeat, collide, seed, counts),
        reindex=lambda counts: Reindex(counts),
    ),
)
