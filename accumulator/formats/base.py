"""The contract every wire format fulfils, written once: ``WireFormat`` (what a format module declares) and
``RewriteSupport`` (what the rewriter needs of its events); and what the dialects share (decoding an
event's payload with warnings, AWS frame kinds, small value helpers)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar, Final

import orjson
from mypy_extensions import mypyc_attr

from ..framing import MALFORMED, FramedEvent, parse_json
from ..ops import ProviderError
from ..warnings import WarningLog

_SNIPPET = 200
# Final: compiled, read from statics on each event, not from the module's dict.
_loads: Final = orjson.loads
_DecodeError: Final = orjson.JSONDecodeError

# The framings a body comes in (accumulator.framing): "sse", "ndjson", "jsonarray", "eventstream".
FRAMINGS = ("sse", "ndjson", "jsonarray", "eventstream")


def _never(*_args) -> bool:
    return False


def _none(_request: dict) -> None:
    return None


def _no_echoes(_request: dict, _calls, _results) -> None:
    return None


@dataclass(frozen=True, slots=True)
class RewriteSupport:
    """What the rewriter (``accumulator.rewrite``) needs to know of a format's events.

    ``key``: how a fragment names its call (said when a rewrite does not apply). ``whole``: where every
    call arrives whole (no fragment to move: only ``rechunk`` applies), else None. ``name_whole_in``: the
    event that carries a call's whole name (no ``split-names``). The factories build fresh per-stream
    stages: ``keys(purpose)`` a classifier for the ``interleave`` or ``serialize`` reorderer (unit ->
    (role, key), roles from ``rewrite.reorder``); ``split_final(unit)`` cuts a unit that carries both
    fragments and a finish; ``edits(split, repeat, collide, seed, counts)`` the injections that edit events;
    ``reindex(counts)`` the reindex repair; ``fixups(counts)`` the stage that keeps a rewritten stream
    valid (renumbering, say). None where the format has no such thing.
    """

    key: str = ""
    whole: str | None = None
    name_whole_in: str | None = None
    keys: Callable | None = None
    split_final: Callable | None = None
    edits: Callable | None = None
    reindex: Callable | None = None
    fixups: Callable | None = None


@dataclass(frozen=True, slots=True)
class WebSocketSupport:
    """How a format travels over a WebSocket (``accumulator.websocket``): one JSON event per message.

    ``paths``: regexes searched in the upgrade request's path (query aside) that say the connection
    speaks this format. ``sniff(from_client, obj)``: whether one of the first messages of a connection
    of unknown format (``obj`` its JSON object) is surely this format's. ``session``: the class that reads
    one connection's messages (``session(connection)`` with ``client(obj, number)`` and
    ``server(obj, number)``): it opens, feeds and closes the connection's responses and hands it the
    client's evidence (``accumulator.websocket.Connection``). ``rewrite_as``: the HTTP format whose
    rewriter reads its server messages for the test bench (``accumulator.rewrite.messages``), or None
    where calls come whole.
    """

    paths: tuple[str, ...]
    session: type
    sniff: Callable = _never
    rewrite_as: str | None = None
    compiled_paths: tuple = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "compiled_paths", tuple(re.compile(pattern) for pattern in self.paths))


@dataclass(frozen=True, slots=True)
class WireFormat:
    """Everything toolcall-lens knows about one wire format. Each module under ``formats/`` builds one,
    named ``FORMAT``; the registry (``formats/__init__.py``) builds every table from them, so no other
    module names a format.

    - ``name``: the result's ``format``.
    - ``dialect``: the class that turns framed events into operations (``ops``) and reads the
      non-streamed response of the same API (``message_ops``).
    - ``framings``: the framings its streams come in, the usual one first. With several, the first bytes
      decide (``framing_for``).
    - ``paths``: (regex searched in the path without its query, whether that path always streams); the
      registry tries every format's in order, first match wins.
    - ``sniff(event, obj)``: whether one framed event of an unknown stream (``obj`` its JSON object, or
      None) is surely this format's. ``sniff_message(obj)``: the same for a whole non-streamed body.
    - Request reading, each on a decoded request body: ``tools`` (declared name -> JSON schema or None;
      None when the request has no tools in this format's shape), ``parallel`` (False: parallel calls
      turned off), ``forced`` (the tool forced by name), ``echoes(request, add_call, add_result)`` (the
      assistant calls it echoes back, in order, with their turn, and the tool results it sends: their
      call id, size and whether the tool failed). ``usage_asked`` (False: a streamed request that did
      not ask for usage). ``tools_open`` (True: tools may be declared where the request does not show
      them, as a Responses request continuing a stored response whose tool search loaded some: a call
      to a tool not seen declared is then not judged). ``echoed_without_ids`` (True: its clients echo
      the calls it streamed without their ids, as the Ollama libraries do, whose tool calls have no id
      field: its responses' calls are then matched by turn, position and name too, as calls streamed
      without ids are). ``tool_finish``: the finish reasons with which a response says it ended to have
      its tools called (Chat's ``tool_calls``): a choice that ends so with no call read is said
      (``tool-calls-missing``).
    - ``usage(raw)``: where its usage object keeps the counts (``accumulator.usage``): figure -> the
      fields that add up to it. ``provider``: the provider its API belongs to, as the price tables
      (genai-prices) name it, for a response whose URL names none they know; None for local models.
      ``genai_provider`` and ``genai_operation``: the same as OpenTelemetry's GenAI conventions name them
      (``gen_ai.provider.name``, ``gen_ai.operation.name``).
    - ``rewrite``: what the rewriter needs, or None.
    - ``websocket``: how it travels over a WebSocket (``WebSocketSupport``), or None. A format that
      only travels over WebSockets (OpenAI Realtime, Gemini Live) has no ``framings`` and no ``paths``.
    """

    name: str
    dialect: type[JsonDialect]
    framings: tuple[str, ...]
    paths: tuple[tuple[str, bool], ...] = ()
    sniff: Callable = _never
    sniff_message: Callable = _never
    tools: Callable = _none
    parallel: Callable = _none
    forced: Callable = _none
    echoes: Callable = _no_echoes
    usage: Callable | None = None
    provider: str | None = None
    genai_provider: str | None = None
    genai_operation: str = "chat"
    usage_asked: Callable = _none
    tools_open: Callable = _none
    echoed_without_ids: bool = False
    tool_finish: frozenset = frozenset()
    rewrite: RewriteSupport = field(default_factory=RewriteSupport)
    websocket: WebSocketSupport | None = None
    compiled_paths: tuple = ()

    def __post_init__(self) -> None:
        unknown = [f for f in self.framings if f not in FRAMINGS]
        if (not self.framings and self.websocket is None) or unknown:
            raise ValueError(f"{self.name}: framings {self.framings!r}; known: {FRAMINGS}")
        object.__setattr__(
            self, "compiled_paths", tuple((re.compile(pattern), always) for pattern, always in self.paths)
        )

    @property
    def needs_head(self) -> bool:
        """Whether its framing is told by the first bytes (several framings) rather than known at once."""
        return len(self.framings) > 1

    @property
    def over_http(self) -> bool:
        """Whether its responses come as HTTP bodies (it has framings), not only over WebSockets."""
        return bool(self.framings)

    def framing_for(self, head: bytes) -> str:
        """The framing of a body that starts with ``head``: the first of its framings the first
        non-blank byte allows (``[`` or ``{`` a JSON framing, a NUL an AWS frame, anything else SSE)."""
        if len(self.framings) == 1:
            return self.framings[0]
        allowed = framings_allowed(head)
        return next((f for f in self.framings if f in allowed), self.framings[0])


def framings_allowed(head: bytes) -> tuple[str, ...]:
    """The framings a body starting with ``head`` may be in, from its first non-blank byte."""
    if head[:1] == b"\x00":
        return ("eventstream",)
    first = head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    if first == b"[":
        return ("jsonarray",)
    if first == b"{":
        return ("ndjson", "jsonarray")
    return ("sse",)


# A format module may be outside the compiled core (a new format, a test's): its dialect subclasses these.
@mypyc_attr(allow_interpreted_subclasses=True)
class JsonDialect:
    """Base of the dialects: one per format, turning its events into normalized operations."""

    # What a call with no argument text amounts to: "" where arguments are a string the client gets
    # as is (Chat, Responses, Cohere); "{}" where they are an object (Anthropic input, Bedrock, Gemini).
    empty_arguments: ClassVar[str] = ""
    # Whether calls stream in fragments a client must route (else every call arrives whole and the
    # hazard strategies have nothing to get wrong).
    fragments: ClassVar[bool] = True

    def __init__(self, warnings: WarningLog) -> None:
        self._warn = warnings

    def ops(self, event: FramedEvent, number: int) -> list:
        """The operations of one framed event (its JSON payload read here)."""
        obj = self._load(event.data, number)
        return [] if obj is None else self.obj_ops(obj, event.type, number)

    def obj_ops(self, obj: dict, kind: str | None, number: int) -> list:
        """The operations of one event already read as a JSON object (``kind``: its framing's event type,
        if any); a WebSocket message comes here directly."""
        raise NotImplementedError

    def message_ops(self, body: bytes) -> list:
        """A non-streamed response of the same API, as the operations of a one-event stream."""
        raise NotImplementedError

    def finish(self, number: int) -> list:
        """Operations still held when the input ends (a dialect that assembles values itself)."""
        return []

    def _load(self, data: bytes, number: int) -> dict | None:
        try:
            obj = _loads(data)  # the common case: a JSON object, without the careful path's frames
        except _DecodeError:
            obj = None
        if type(obj) is dict:
            return obj
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


@mypyc_attr(allow_interpreted_subclasses=True)
class EventStreamDialect(JsonDialect):
    """A dialect of the AWS binary event stream: frame kinds (exceptions, bad frames) are read here, an
    event frame's JSON payload by ``frame_ops``."""

    empty_arguments = "{}"  # tool input is an object (a no-argument call streams input "")

    def ops(self, event: FramedEvent, number: int) -> list:
        if event.kind == "event":
            obj = self._load(event.data, number)
            return [] if obj is None else self.frame_ops(event.type, obj, number)
        if event.kind == "malformed":
            self._malformed(number, event.data, "is not a valid frame")
            return []
        # An exception or error frame: the stream ends there.
        obj = self._load(event.data, number) if event.data[:1] == b"{" else None
        return [
            ProviderError(
                number, {"type": event.type, **(obj or {"message": event.data.decode(errors="replace")})}
            )
        ]

    def frame_ops(self, event_type: str | None, obj: dict, number: int) -> list:
        raise NotImplementedError


def as_int(value) -> int | None:
    return value if type(value) is int else None


def as_str(value) -> str | None:
    return value if type(value) is str else None


def as_list(value) -> list | tuple:
    return value if type(value) is list else ()


def as_dict(value) -> dict:
    return value if type(value) is dict else {}


def snippet(data: bytes) -> str:
    text = data[: _SNIPPET * 4].decode("utf-8", "replace")
    return text if len(text) <= _SNIPPET else text[:_SNIPPET] + "…"


def declare(declared: dict, obj: dict, schema) -> None:
    """Record a declared tool: its name, with its JSON schema (the first one given wins)."""
    name = obj.get("name")
    if type(name) is str and (name not in declared or declared[name] is None):
        declared[name] = schema if type(schema) is dict else None


def named(obj) -> str | None:
    """``obj["name"]`` when ``obj`` is an object with a string name."""
    return obj["name"] if type(obj) is dict and type(obj.get("name")) is str else None


def message_list(request: dict, key: str) -> list:
    """The conversation a request carries under ``key`` (a list of objects), else empty."""
    items = request.get(key)
    return [m for m in items if type(m) is dict] if type(items) is list else []


def flat_tools(request: dict, schema_key: str) -> dict | None:
    """``tools[]`` of flat declarations (``name`` and the schema under ``schema_key``), or None without a
    ``tools`` key."""
    tools = request.get("tools")
    if tools is None:
        return None
    declared: dict = {}
    for tool in as_list(tools):
        if type(tool) is dict:
            declare(declared, tool, tool.get(schema_key))
    return declared


def forced_by_type(request: dict, kind: str) -> str | None:
    """The tool a ``tool_choice`` of this ``type`` names, or None."""
    choice = request.get("tool_choice")
    return named(choice) if type(choice) is dict and choice.get("type") == kind else None


def message_blocks(request: dict, key: str, content_key: str):
    """(turn, block) for every object in the content lists of the conversation under ``key``."""
    for turn, message in enumerate(message_list(request, key), 1):
        for block in as_list(message.get(content_key)):
            if type(block) is dict:
                yield turn, block
