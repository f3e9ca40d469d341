"""A scenario as one format sends it: its events and body, the calls a correct client rebuilds from it,
its non-streamed response, and the path and request body a client of that format would send."""

from __future__ import annotations

import functools
from urllib.parse import quote

import orjson

from .renderers import FORMATS, WIRE_FORMATS, Render
from .scenarios import SCENARIOS, SCRIPTS, served_by

FORMAT_SCENARIOS: dict[str, tuple[str, ...]] = {
    fmt: tuple(name for name in SCENARIOS if served_by(name, fmt)) for fmt in FORMATS
}


def check(fmt: str, name: str) -> None:
    """Raise KeyError unless the format exists and serves the scenario."""
    if fmt not in WIRE_FORMATS:
        raise KeyError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    if name not in SCRIPTS:
        raise KeyError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}")
    if name not in FORMAT_SCENARIOS[fmt]:
        only = SCRIPTS[name]["only"]
        served = only if isinstance(only, str) else " or ".join(only)
        raise KeyError(f"scenario {name!r} is only served as {served}, not {fmt}")


@functools.cache
def _rendered(fmt: str, name: str) -> Render:
    check(fmt, name)
    wire = WIRE_FORMATS[fmt]
    return wire.render(wire, name)


def _array(fmt: str, gemini_sse: bool) -> bool:
    """Whether the body is the format's JSON array rather than its stream (Gemini without ?alt=sse)."""
    return not gemini_sse and WIRE_FORMATS[fmt].array_frame is not None


@functools.cache
def events(format: str, scenario: str, *, gemini_sse: bool = True, cut: bool = False) -> tuple[bytes, ...]:
    """The body's writes, in order: one event (SSE event, JSON line, array element, AWS frame) each.

    With cut, only those sent before the connection drops (`truncated`); otherwise the full body's.
    """
    rendered = _rendered(format, scenario)
    wire = WIRE_FORMATS[format]
    frame = wire.array_frame if _array(format, gemini_sse) else wire.frame
    framed = tuple(frame(rendered.out))
    cut_after = SCRIPTS[scenario].get("cut_after")
    return framed[: rendered.marks[cut_after - 1]] if cut and cut_after else framed


def payloads(format: str, scenario: str, *, cut: bool = False) -> tuple[dict, ...]:
    """The events' JSON objects, unframed, in order (what the WebSocket protocols send, a message each);
    with cut, as `events` cuts them."""
    rendered = _rendered(format, scenario)
    out = tuple(payload for _, payload in rendered.out)
    cut_after = SCRIPTS[scenario].get("cut_after")
    return out[: rendered.marks[cut_after - 1]] if cut and cut_after else out


def body(format: str, scenario: str, *, gemini_sse: bool = True) -> bytes:
    """The scenario's full body in that format, uncompressed, as sent when nothing cuts it short."""
    return b"".join(events(format, scenario, gemini_sse=gemini_sse))


def sse_body(name: str) -> bytes:
    """The scenario's full Chat Completions SSE body (for `truncated`: the uncut body)."""
    return body("openai-chat", name)


def content_type(format: str, *, gemini_sse: bool = True) -> str:
    """The Content-Type of the format's streamed body."""
    return "application/json" if _array(format, gemini_sse) else WIRE_FORMATS[format].content_type


def expected_calls(name: str, format: str = "openai-chat") -> list[dict]:
    """The correct reconstruction of the full body's tool calls: [{"id", "name", "arguments"}] in order.

    `id` is the call's id as the format names it; `arguments` the JSON text (for Gemini and Ollama, which
    send objects, the text that parses to the object). For `error-midstream` this is the call as far as
    it got; formats that only send whole calls never send it.
    """
    return [{"id": c.id, "name": c.name, "arguments": c.full} for c in _rendered(format, name).calls]


def final_response(format: str, scenario: str) -> dict:
    """The non-streamed JSON response of the scenario (`error-midstream`: see WireFormat.error)."""
    return _rendered(format, scenario).final()


def path(format: str, scenario: str, *, stream: bool = True, gemini_sse: bool = True) -> str:
    """The request path a client of that format would use for the scenario."""
    check(format, scenario)
    wire = WIRE_FORMATS[format]
    verb = wire.verbs[0] if stream else wire.verbs[1]
    result = wire.route.format(model=quote(scenario, safe=""), verb=verb)
    return result + "?alt=sse" if wire.array_frame is not None and stream and gemini_sse else result


def request_body(format: str, scenario: str, *, stream: bool = True) -> bytes:
    """A minimal request body of that format for `path(format, scenario, stream=stream)`."""
    check(format, scenario)
    wire = WIRE_FORMATS[format]
    payload = wire.request
    if "{model}" not in wire.route:
        payload = {"model": scenario, **payload, "stream": stream}
    return orjson.dumps(payload)
