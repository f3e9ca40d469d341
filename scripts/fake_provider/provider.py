"""The provider's answers, written once for every HTTP version: the plain routes, the LLM routes (streamed,
faulty or whole), the pacing and the gates, sent through a `Transport` that HTTP/1.1 (server.py) and
HTTP/2 (h2_provider.py) each implement."""

from __future__ import annotations

import abc
import asyncio
import contextlib
import hashlib

import orjson

from accumulator import boundaries

from . import agent
from .bodies import SCENARIOS, content_type, events, final_response
from .faults import (
    HTML_502,
    NO_FAULT,
    RATE_LIMITED,
    Fault,
    bomb_pieces,
    drop_mid_event_pieces,
    endless,
    fault_of,
    huge_event_pieces,
)
from .renderers import WIRE_FORMATS
from .request import Refused, Request, credentials_sha256, error_json, json_body, options, route, scenario_of
from .scenarios import SCRIPTS
from .wire import Wire, sha256, wire

GATE_TIMEOUT = 30.0


class Transport(abc.ABC):
    """One response's way out to the client: a head, pieces of body, and an end (or an abort)."""

    @abc.abstractmethod
    async def start(self, status: int, headers: dict[str, str], *, close: bool = False) -> None:
        """A response's head; close: the connection carries nothing after this response (HTTP/1.1)."""

    @abc.abstractmethod
    async def write(self, piece: bytes) -> None:
        """One piece of the body, on its own (one chunk, one DATA frame), sent and drained."""

    @abc.abstractmethod
    async def end(self) -> None:
        """The body is complete."""

    @abc.abstractmethod
    async def abort(self) -> None:
        """The body stops here, incomplete: HTTP/1.1 drops the connection, HTTP/2 resets the stream."""

    async def send(
        self,
        status: int,
        content_type: str,
        body: bytes,
        *,
        head_only: bool = False,
        extra: dict[str, str] | None = None,
        close: bool = False,
    ) -> None:
        """A whole response with a Content-Length body (only its head when head_only)."""
        headers = {"Content-Type": content_type, "Content-Length": str(len(body)), **(extra or {})}
        await self.start(status, headers, close=close)
        if body and not head_only:
            await self.write(body)
        await self.end()


class Provider:
    """What every provider keeps: the pacing, the gated streams waiting for GET /release, the open
    connections (cancelled at shutdown); and how it answers a request."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.gates: set[asyncio.Event] = set()
        self.connections: set[asyncio.Task] = set()

    def plain_response(self, method: str, path: str) -> tuple[int, str, bytes]:
        """(status, content type, body) of a request that is no LLM call: /health, /v1/models, /release
        (which opens every gate still closed and says how many), else 404."""
        if method == "GET" and path == "/health":
            return 200, "text/plain", b"ok\n"
        if method == "GET" and path == "/v1/models":
            models = {"object": "list", "data": [{"id": name, "object": "model"} for name in SCENARIOS]}
            return 200, "application/json", orjson.dumps(models)
        if method == "GET" and path == "/agent":
            return 200, "application/json", orjson.dumps(agent.log)
        if method == "GET" and path == "/release":
            waiting = [gate for gate in self.gates if not gate.is_set()]
            for gate in waiting:
                gate.set()
            return 200, "text/plain", f"{len(waiting)}\n".encode()
        return 404, "text/plain", b"not found\n"

    async def answer(self, request: Request, transport: Transport) -> None:
        method, path = request.method, request.path
        if method == "POST" and (llm_route := route(path)):
            try:
                await self._llm(request, transport, *llm_route)
            except Refused as exc:
                await transport.send(exc.status, "application/json", error_json(str(exc)))
            return
        status, ctype, body = self.plain_response(method, path)
        await transport.send(status, ctype, body, head_only=method == "HEAD")

    async def _llm(
        self, request: Request, transport: Transport, fmt: str, name: str | None, stream: bool | None
    ) -> None:
        name, stream = scenario_of(request, fmt, name, stream)
        delay, encoding = options(request, self.delay)
        fault = fault_of(request, fmt, encoding)
        gemini_sse = "sse" in request.query.get("alt", ())
        if name == agent.AGENT:
            await self._agent(request, transport, fmt, stream, gemini_sse, delay, encoding)
        elif fault.name == "html-502":
            await transport.send(502, "text/html", HTML_502)
        elif fault.name == "json-429":
            body = orjson.dumps(RATE_LIMITED)
            await transport.send(429, "application/json", body, extra={"Retry-After": "20"})
        elif stream:
            received = credentials_sha256(request)
            await self._stream(transport, fmt, name, gemini_sse, delay, encoding, received, fault)
        elif SCRIPTS[name].get("error"):
            # Not streamed, the failure surfaces the way the provider reports it: as the HTTP status.
            status, error = WIRE_FORMATS[fmt].error
            extra = {"X-Scenario": name}
            if fmt.startswith("bedrock"):
                extra["X-Amzn-ErrorType"] = "ThrottlingException"
            await transport.send(status, "application/json", orjson.dumps(error), extra=extra)
        else:
            whole = wire((orjson.dumps(final_response(fmt, name)),), encoding)
            extra = {"X-Scenario": name, **whole.headers}
            body = b"".join(whole.pieces)
            if request.headers.get("x-fake-framing", "").strip().lower() != "chunked":
                await transport.send(200, "application/json", body, extra=extra)
                return
            # Asked for: the message in chunks, with no Content-Length (as many providers send JSON).
            await transport.start(200, {"Content-Type": "application/json", **extra})
            for start in range(0, len(body), 64):
                await transport.write(body[start : start + 64])
            await transport.end()

    async def _agent(
        self,
        request: Request,
        transport: Transport,
        fmt: str,
        stream: bool,
        gemini_sse: bool,
        delay: float,
        encoding: str | None,
    ) -> None:
        """The `agent` scenario: an answer made from the request's own tools (agent.py)."""
        rendered = agent.render(fmt, json_body(request))
        if not stream:
            whole = wire((orjson.dumps(rendered.final()),), encoding)
            extra = {"X-Scenario": agent.AGENT, **whole.headers}
            await transport.send(200, "application/json", b"".join(whole.pieces), extra=extra)
            return
        wire_format = WIRE_FORMATS[fmt]
        array = not gemini_sse and wire_format.array_frame is not None
        sent_wire = wire(
            tuple((wire_format.array_frame if array else wire_format.frame)(rendered.out)), encoding
        )
        headers = {
            "Content-Type": "application/json" if array else wire_format.content_type,
            "Cache-Control": "no-cache",
            **sent_wire.headers,
            "X-Scenario": agent.AGENT,
        }
        await transport.start(200, headers)
        for sent, piece in enumerate(sent_wire.pieces):
            if sent:
                await asyncio.sleep(delay)
            await transport.write(piece)
        await transport.end()

    async def _stream(
        self,
        transport: Transport,
        fmt: str,
        name: str,
        gemini_sse: bool,
        delay: float,
        encoding: str | None,
        received_credentials: str = "",
        fault: Fault = NO_FAULT,
    ) -> None:
        script = SCRIPTS[name]
        plain = events(fmt, name, gemini_sse=gemini_sse)
        sent_wire = wire(plain, encoding)
        if fault.name is not None and fault.name != "drip":
            await self._faulty(transport, fmt, name, plain, sent_wire, delay, encoding, fault)
            return
        headers = {
            "Content-Type": content_type(fmt, gemini_sse=gemini_sse),
            "Cache-Control": "no-cache",
            # Always the full body's hashes, also for `truncated`, so a client can tell it got less.
            **sent_wire.headers,
            "X-Scenario": name,
            # What keys arrived, as a hash: a proxy that redacts too early would change it.
            "X-Received-Credentials-SHA256": received_credentials,
        }
        if fmt == "bedrock-invoke":
            headers["X-Amzn-Bedrock-Content-Type"] = "application/json"
        cut = script.get("cut_after") is not None
        if fault.length and not cut:  # otherwise the body is chunked (HTTP/1.1) or framed (HTTP/2)
            headers["Content-Length"] = str(sum(map(len, sent_wire.pieces)))
        await transport.start(200, headers)

        gate_after = script.get("gate_after")
        pieces = sent_wire.pieces[: len(events(fmt, name, gemini_sse=gemini_sse, cut=True))]
        gate = asyncio.Event() if gate_after else None
        if gate is not None:
            # Registered before the first write, so a client that has seen that event can always release it.
            self.gates.add(gate)
        if fault.hostile:
            pieces = tuple(
                p for piece in pieces for p in boundaries.cut(piece, boundaries.hostile_cuts(piece))
            )
        if fault.name == "drip":
            dripped = b"".join(pieces)[: fault.drip_bytes]
            rest = b"".join(pieces)[len(dripped) :]
            pieces = (*(dripped[i : i + 1] for i in range(len(dripped))), *((rest,) if rest else ()))
        try:
            for sent, piece in enumerate(pieces):
                if sent:
                    await asyncio.sleep(delay)
                # One event, one write, drained: the pacing a real provider's stream has.
                await transport.write(piece)
                if gate is not None and sent + 1 == gate_after:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(gate.wait(), GATE_TIMEOUT)
        finally:
            if gate is not None:
                self.gates.discard(gate)

        if cut:
            # Cut short: the client sees an incomplete body, not an error response.
            await asyncio.sleep(delay)
            await transport.abort()
        else:
            await transport.end()

    async def _faulty(
        self,
        transport: Transport,
        fmt: str,
        name: str,
        plain: tuple[bytes, ...],
        sent_wire: Wire,
        delay: float,
        encoding: str | None,
        fault: Fault,
    ) -> None:
        """A stream that goes wrong as X-Fake-Fault says; the connection is not reused after it."""
        headers = {"Content-Type": WIRE_FORMATS[fmt].content_type, "X-Scenario": name}
        if fault.name == "huge-event":
            pieces = huge_event_pieces(plain, fault.size)
            digest = hashlib.sha256()
            for piece in huge_event_pieces(plain, fault.size):
                digest.update(piece)
            headers["X-Body-SHA256"] = digest.hexdigest()
        elif fault.name == "bomb":
            assert encoding is not None
            pieces = bomb_pieces(plain, encoding, fault.size)
            headers["Content-Encoding"] = encoding
            headers["X-Body-SHA256"] = sha256(b"".join(pieces))
        elif fault.name == "drop-mid-event":
            pieces = drop_mid_event_pieces(sent_wire.pieces)
            headers.update(sent_wire.headers)  # the hashes of the full body, which never comes
        else:  # endless: no hash can come first; the client checks a prefix of `endless(kind)`
            pieces = endless(fault.name)
            delay = 0.0
        await transport.start(200, headers, close=True)
        for piece in pieces:
            await transport.write(piece)
            if delay:
                await asyncio.sleep(delay)
        if fault.name == "drop-mid-event":
            await transport.abort()  # the body is incomplete
        else:
            await transport.end()
