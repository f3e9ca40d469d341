"""The WebSocket protocols, by path: one table (the only list of them), the hand-over from an HTTP/1.1
upgrade to the protocol's session, and the calls a test should see in each response."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import NamedTuple

from . import ws_live, ws_realtime, ws_responses
from .request import Refused, Request, error_json
from .websocket import Closed, Outbox, Session, WsConnection, accept, ws_options


class WsProtocol(NamedTuple):
    """One protocol: the paths it answers (for --help), whether a path is its, its session, its scenarios,
    and the calls of its n-th response of a scenario."""

    name: str
    paths: str
    matches: Callable[[str], bool]
    session: type[Session]
    scenarios: tuple[str, ...]
    expected: Callable[[str, int], list[dict]]


WS_PROTOCOLS: dict[str, WsProtocol] = {
    protocol.name: protocol
    for protocol in (
        WsProtocol(
            "openai-responses",
            "…/responses (any prefix: /v1/responses, /backend-api/codex/responses); the scenario is each "
            'response.create\'s "model"; "stream_id" lanes interleave, "generate": false is a prewarm',
            ws_responses.matches,
            ws_responses.ResponsesSession,
            ws_responses.SCENARIOS,
            ws_responses.expected,
        ),
        WsProtocol(
            "openai-realtime",
            "/v1/realtime?model={scenario}; OpenAI-Beta: realtime=v1 gets the beta event names; a "
            "response.create after function_call_output items answers with text",
            ws_realtime.matches,
            ws_realtime.RealtimeSession,
            ws_realtime.SCENARIOS,
            ws_realtime.expected,
        ),
        WsProtocol(
            "gemini-live",
            "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent (any path ending "
            'BidiGenerateContent); the scenario is setup\'s "models/{scenario}"; binary frames; a '
            "toolResponse is answered with text",
            ws_live.matches,
            ws_live.LiveSession,
            ws_live.SCENARIOS,
            ws_live.expected,
        ),
    )
}
WS_SCENARIOS: dict[str, tuple[str, ...]] = {name: p.scenarios for name, p in WS_PROTOCOLS.items()}


def ws_route(path: str) -> WsProtocol | None:
    for protocol in WS_PROTOCOLS.values():
        if protocol.matches(path):
            return protocol
    return None


def ws_expected(protocol: str, scenario: str, n: int = 1) -> list[dict]:
    """The calls the connection's n-th response (turn) of ``scenario`` carries, in order: {"id" (the call
    id: call_…, Gemini fc_…), "item_id" (Responses, Realtime), "name", "arguments" (JSON text), "args"
    (Gemini: the object)}. Complete calls only: `truncated` and the cancelled ones stop short of them."""
    if scenario not in WS_SCENARIOS[protocol]:
        raise KeyError(
            f"{protocol} does not serve {scenario!r}; it serves {', '.join(WS_SCENARIOS[protocol])}"
        )
    return WS_PROTOCOLS[protocol].expected(scenario, n)


async def serve_websocket(request: Request, transport, delay: float, gates: set[asyncio.Event]) -> None:
    """Answer an upgrade request: refused as HTTP (then the connection closes), or switched to a
    WebSocket that the path's protocol serves until either side closes it."""
    protocol = ws_route(request.path)
    try:
        if protocol is None:
            raise Refused(404, f"no WebSocket protocol at {request.path}")
        opts = ws_options(request, delay)
        headers, extensions = accept(request, opts.deflate)
    except Refused as exc:
        await transport.send(exc.status, "application/json", error_json(str(exc)), close=True)
        return
    trailing = await transport.switch_protocols(headers)
    conn = WsConnection(transport.reader, transport.writer, extensions, trailing, opts.fragment)
    outbox = Outbox(conn, opts, protocol.session.binary, gates)
    session = protocol.session(request, outbox)
    sender = asyncio.create_task(outbox.run())
    try:
        session.opened()
        async for message in conn.messages():
            if sender.done():
                break
            session.received(message)
    except (Closed, ConnectionError):
        pass
    finally:
        if not sender.done():
            # The client went away or closed: let a close frame already queued go out, then stop.
            await asyncio.sleep(0)
        sender.cancel()
        with contextlib.suppress(asyncio.CancelledError, Closed, ConnectionError):
            await sender
