"""The registry of wire formats: one module each (``base.WireFormat`` is the contract), and every table
built from them: the paths, recognising a body from its first bytes, reading a request.

Adding a format is one module here plus its line in ``_MODULES``; nothing else in the core names one.
"""

from __future__ import annotations

import re

from ..framing import MALFORMED, parse_json
from ..framing.eventstream import EventStreamDecoder
from ..framing.jsonarray import JsonArrayDecoder
from ..framing.ndjson import NdjsonDecoder
from ..framing.sse import SseDecoder
from . import (
    anthropic,
    bedrock_converse,
    bedrock_invoke,
    cohere,
    gemini,
    gemini_live,
    ollama,
    openai_chat,
    openai_realtime,
    openai_responses,
)
from .base import RewriteSupport, WireFormat, framings_allowed

# In this order paths are tried and first bytes asked about: the first format that claims them wins.
_MODULES = (
    openai_chat,
    openai_responses,
    anthropic,
    gemini,
    bedrock_converse,
    bedrock_invoke,
    cohere,
    ollama,
    # Over WebSockets only; asked before Responses about a connection's first messages (both send
    # response.create and response.created).
    openai_realtime,
    gemini_live,
)
_ALL: dict[str, WireFormat] = {module.FORMAT.name: module.FORMAT for module in _MODULES}
# The formats of HTTP bodies, and those that travel over WebSockets (Responses does both).
FORMATS: dict[str, WireFormat] = {name: wire for name, wire in _ALL.items() if wire.over_http}
WEBSOCKET_FORMATS: dict[str, WireFormat] = {
    name: wire for name, wire in _ALL.items() if wire.websocket is not None
}
# The formats whose clients echo the calls streamed with ids without them (matched by position and name).
ECHOED_WITHOUT_IDS = frozenset(name for name, wire in _ALL.items() if wire.echoed_without_ids)
DEFAULT_FORMAT = _MODULES[0].FORMAT.name  # what a body is read as when no format is named
# (name, how it travels) of each WebSocket format; for sniffing, the WebSocket-only ones first.
_WEBSOCKETS = [(name, ws) for name, wire in WEBSOCKET_FORMATS.items() if (ws := wire.websocket) is not None]
_SNIFF_WEBSOCKET = sorted(_WEBSOCKETS, key=lambda pair: WEBSOCKET_FORMATS[pair[0]].over_http)

SNIFF_BYTES = 64 * 1024  # how much of a body is held, at most, to recognise its format
_SNIFF_EVENTS = 8
_PATHS: tuple[tuple[re.Pattern, str, bool], ...] = tuple(
    (pattern, wire.name, always) for wire in FORMATS.values() for pattern, always in wire.compiled_paths
)
# Each framing's decoder, to read the first events of a body of unknown format.
_SNIFF_DECODERS = {
    "sse": SseDecoder,
    "ndjson": NdjsonDecoder,
    "jsonarray": JsonArrayDecoder,
    "eventstream": EventStreamDecoder,
}


def get(name: str) -> WireFormat:
    """The format of this name; ValueError names the known ones."""
    wire = FORMATS.get(name) or WEBSOCKET_FORMATS.get(name)
    if wire is None:
        known = ", ".join(dict.fromkeys([*FORMATS, *WEBSOCKET_FORMATS]))
        raise ValueError(f"unknown format {name!r}; known: {known}")
    return wire


def path_format(path: str) -> tuple[str, bool] | None:
    """(format, the path always streams) for an LLM API path, or None. Costs a few regex searches."""
    bare = path.split("?", 1)[0].rstrip("/")
    for pattern, name, always in _PATHS:
        if pattern.search(bare):
            return name, always
    return None


def sniff_format(head: bytes) -> str | None:
    """The format of a stream from its first bytes, or None when they are none we read (yet)."""
    if not head.lstrip(b"\xef\xbb\xbf \t\r\n"):
        return None
    if head[:1] == b"\x00" and len(head) < 12:
        return None  # not even one AWS prelude yet
    allowed = framings_allowed(head)
    candidates = [wire for wire in FORMATS.values() if any(f in allowed for f in wire.framings)]
    # Each element or line is asked about: a "[" alone, or a "{", says nothing of whose it is.
    decoder = _SNIFF_DECODERS[allowed[0]]
    for event in decoder().feed(head[:SNIFF_BYTES])[:_SNIFF_EVENTS]:
        obj = None
        if event.data and event.data != b"[DONE]" and event.kind == "event":
            value, _ = parse_json(event.data)
            obj = value if value is not MALFORMED and type(value) is dict else None
        for wire in candidates:
            if wire.sniff(event, obj):
                return wire.name
    return None


def websocket_format(path: str) -> str | None:
    """The format a WebSocket connection speaks, from its upgrade request's path, or None."""
    bare = path.split("?", 1)[0].rstrip("/")
    for name, ws in _WEBSOCKETS:
        if any(pattern.search(bare) for pattern in ws.compiled_paths):
            return name
    return None


def sniff_websocket(from_client: bool, obj: dict) -> str | None:
    """The format of a WebSocket connection from one of its first messages (a JSON object), or None."""
    return next((name for name, ws in _SNIFF_WEBSOCKET if ws.sniff(from_client, obj)), None)


def sniff_message(body: bytes) -> str | None:
    """The format of a whole non-streamed (JSON) response body, or None."""
    obj, _ = parse_json(body.strip())
    if type(obj) is not dict:
        return None
    return next((wire.name for wire in FORMATS.values() if wire.sniff_message(obj)), None)


def _readers(format: str | None, attribute: str) -> list:
    """One format's request reader, or every distinct one (formats that share a shape share a reader)."""
    found = _READERS.get((format, attribute))
    if found is not None:
        return found
    wires = [get(format)] if format is not None else FORMATS.values()  # an unknown name: ValueError
    return list(dict.fromkeys(getattr(wire, attribute) for wire in wires))


def _reader_table() -> dict[tuple[str | None, str], list]:
    """``_readers`` of every format and of none, built once: a request is read by five of them, and
    building each list anew was half of reading a short request's facts (~6 of 12 us)."""
    table: dict[tuple[str | None, str], list] = {}
    for attribute in ("tools", "parallel", "forced", "usage_asked", "echoes", "tools_open"):
        table[(None, attribute)] = list(dict.fromkeys(getattr(wire, attribute) for wire in FORMATS.values()))
        for name in (*WEBSOCKET_FORMATS, *FORMATS):
            table[(name, attribute)] = [getattr(get(name), attribute)]
    return table


_READERS = _reader_table()


def request_tools(request: dict, format: str | None = None) -> dict | None:
    """Declared tool name -> JSON schema (or None), in the shape of ``format`` (None: any shape); None when
    the request declares no tools at all (they may come from a gateway: nothing to check)."""
    found = [tools for read in _readers(format, "tools") if (tools := read(request)) is not None]
    if not found:
        return None
    declared: dict = {}
    for tools in found:
        for name, schema in tools.items():
            if declared.get(name) is None:
                declared[name] = schema
    return declared


def request_parallel(request: dict, format: str | None = None) -> bool | None:
    return False if any(read(request) is False for read in _readers(format, "parallel")) else None


def request_forced(request: dict, format: str | None = None) -> str | None:
    return next((name for read in _readers(format, "forced") if (name := read(request))), None)


def request_usage_asked(request: dict, format: str | None = None) -> bool | None:
    return False if any(read(request) is False for read in _readers(format, "usage_asked")) else None


def request_tools_open(request: dict, format: str | None = None) -> bool:
    return any(read(request) is True for read in _readers(format, "tools_open"))


def tool_finish(format: str) -> frozenset:
    """The finish reasons with which a response of this format says it ended for its tool calls."""
    wire = FORMATS.get(format) or WEBSOCKET_FORMATS.get(format)
    return wire.tool_finish if wire is not None else frozenset()


def usage_parts(format: str):
    """Where this format's usage object keeps its counts (``accumulator.usage``), or None."""
    wire = FORMATS.get(format) or WEBSOCKET_FORMATS.get(format)
    return wire.usage if wire is not None else None


def request_echoes(request: dict, add_call, add_result, format: str | None = None) -> None:
    for read in _readers(format, "echoes"):
        read(request, add_call, add_result)


__all__ = [
    "DEFAULT_FORMAT",
    "FORMATS",
    "SNIFF_BYTES",
    "WEBSOCKET_FORMATS",
    "RewriteSupport",
    "WireFormat",
    "get",
    "path_format",
    "request_echoes",
    "request_forced",
    "request_parallel",
    "request_tools",
    "request_tools_open",
    "request_usage_asked",
    "sniff_format",
    "sniff_message",
    "sniff_websocket",
    "usage_parts",
    "websocket_format",
]
