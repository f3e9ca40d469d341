"""HTTP/1.1 over h11, and the process around a provider: one task a connection, its requests answered in
turn while the connection stays reusable, or handed over to WebSocket at an upgrade (ws_protocols.py);
`serve` listens until SIGTERM or SIGINT and says where it listens.

.venv/bin/python scripts/fake_provider [--host 127.0.0.1] [--port 0] [--delay 0.02] [--agent-file PATH] [--agent-model NAME] [--agent-search TOOL]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Awaitable, Callable

import h11

from . import agent
from .provider import Provider, Transport
from .request import MAX_BODY_BYTES, Request
from .usage import epilog
from .websocket import is_upgrade
from .ws_protocols import serve_websocket

DESCRIPTION = "A local LLM provider in every wire format: scripted tool-call streams over real HTTP/1.1."
MAX_HEAD_BYTES = 64 * 1024
READ_SIZE = 65536
_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    413: "Content Too Large",
    429: "Too Many Requests",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    501: "Not Implemented",
    502: "Bad Gateway",
    503: "Service Unavailable",
    529: "Overloaded",
}

Answer = Callable[[Request, "Http1Transport"], Awaitable[None]]
Upgrade = Callable[[Request, "Http1Transport"], Awaitable[None]]


class BadRequest(Exception):
    """A request that cannot be answered as HTTP: a plain-text error, then the connection closes."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Http1Transport(Transport):
    """One HTTP/1.1 connection: h11 reads its requests and frames every response (chunked when it has no
    Content-Length), and this sends what h11 hands back, one write a piece, drained."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, server: str) -> None:
        self.reader, self.writer, self.server = reader, writer, server
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)

    async def next_request(self) -> Request | None:
        """The next complete request, or None when the client closed the connection between requests."""
        head: h11.Request | None = None
        body = bytearray()
        while True:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as exc:
                raise BadRequest(exc.error_status_hint, str(exc)) from None
            if event is h11.NEED_DATA:
                self.h11.receive_data(await self.reader.read(READ_SIZE))  # b"" at EOF
            elif isinstance(event, h11.Request):
                head = event
                length = dict(event.headers).get(b"content-length", b"0")
                if int(length) > MAX_BODY_BYTES:  # h11 checked it is a number
                    raise BadRequest(413, "request body too large")
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > MAX_BODY_BYTES:  # a chunked body has no length to check first
                    raise BadRequest(413, "request body too large")
            elif isinstance(event, h11.EndOfMessage):
                assert head is not None
                method, target = head.method.decode("latin-1"), head.target.decode("latin-1")
                return Request.from_fields(method, target, head.headers.raw_items(), bytes(body))
            elif isinstance(event, h11.ConnectionClosed):
                return None

    def reusable(self) -> bool:
        """Whether the exchange ended cleanly and the connection may carry the next request."""
        if self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE:
            self.h11.start_next_cycle()
            return True
        return False

    async def _put(self, event: h11.Event) -> None:
        self.writer.write(self.h11.send(event) or b"")
        await self.writer.drain()

    def _response(self, status: int, headers: dict[str, str], close: bool) -> h11.Response:
        # h11 turns keep-alive into close when the client asked for that, and adds the framing headers.
        fields = [("Server", self.server), *headers.items()]
        fields.append(("Connection", "close" if close else "keep-alive"))
        return h11.Response(status_code=status, headers=fields, reason=_REASONS.get(status, "Error"))

    async def start(self, status: int, headers: dict[str, str], *, close: bool = False) -> None:
        await self._put(self._response(status, headers, close))

    async def write(self, piece: bytes) -> None:
        await self._put(h11.Data(data=piece))

    async def end(self) -> None:
        await self._put(h11.EndOfMessage())

    async def abort(self) -> None:
        # No terminating zero-length chunk (nor the rest of the Content-Length): the client sees the body
        # end early when the connection closes, which it does as the exchange is left unfinished.
        pass

    async def switch_protocols(self, headers: list[tuple[str, str]]) -> bytes:
        """Send the 101 to an upgrade request; the bytes the client sent after its request (h11 keeps
        them), which belong to the new protocol."""
        response = h11.InformationalResponse(status_code=101, headers=headers, reason="Switching Protocols")
        await self._put(response)
        data, _closed = self.h11.trailing_data
        return bytes(data)

    async def refuse(self, exc: BadRequest) -> None:
        if self.h11.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            with contextlib.suppress(ConnectionError, h11.LocalProtocolError):
                await self.send(exc.status, "text/plain", f"{exc}\n".encode(), close=True)


async def serve_connection(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    answer: Answer,
    connections: set[asyncio.Task],
    server: str = "fake_provider",
    upgrade: Upgrade | None = None,
) -> None:
    """Answer the connection's requests in turn until one leaves it unusable or the client goes away; a
    WebSocket upgrade request, when ``upgrade`` is given, gets the connection for good."""
    task = asyncio.current_task()
    assert task is not None
    connections.add(task)
    transport = Http1Transport(reader, writer, server)
    try:
        while (request := await transport.next_request()) is not None:
            if upgrade is not None and is_upgrade(request):
                await upgrade(request, transport)
                return
            await answer(request, transport)
            if not transport.reusable():
                return
    except BadRequest as exc:
        await transport.refuse(exc)
    except (ConnectionError, TimeoutError):
        # The client went away mid-request or mid-stream: that connection is simply over.
        pass
    except asyncio.CancelledError:
        # Shutdown cancels connections. Ending cancelled would make asyncio 3.12.1's client_connected_cb
        # callback call task.exception() and print a traceback, so the task ends normally instead.
        pass
    finally:
        connections.discard(task)
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


class Http1Provider(Provider):
    """The fake provider over HTTP/1.1, and WebSocket on the same port."""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await serve_connection(reader, writer, self.answer, self.connections, upgrade=self.websocket)

    async def websocket(self, request: Request, transport: Http1Transport) -> None:
        await serve_websocket(request, transport, self.delay, self.gates)


async def serve(provider, name: str, scheme: str, host: str, port: int, **server_options) -> int:
    """Serve ``provider.handle`` until SIGTERM or SIGINT; say where on one line (tests wait for it)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    try:
        server = await asyncio.start_server(provider.handle, host, port, **server_options)
    except OSError as exc:
        print(f"{name}: cannot listen on {host}:{port}: {exc}", file=sys.stderr)
        return 1
    bound_host, bound_port = server.sockets[0].getsockname()[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    print(f"{name} listening on {scheme}://{shown}:{bound_port}", flush=True)

    await stop.wait()
    server.close()
    # Idle keep-alive connections and gated streams would otherwise hold the shutdown open.
    for task in list(provider.connections):
        task.cancel()
    await asyncio.gather(*provider.connections, return_exceptions=True)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(server.wait_closed(), 5)
    return 0


def arguments(argv: list[str] | None, description: str, *, websocket: bool = True) -> argparse.Namespace:
    """--host, --port and --delay, as both providers take them; --help also lists what a request can ask
    for (usage.py), WebSocket included unless the provider serves none. The description is printed as
    written, paragraphs and all."""
    parser = argparse.ArgumentParser(
        description=description,
        epilog=epilog(websocket),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="0 lets the OS pick one (default)")
    parser.add_argument("--delay", type=float, default=0.02, help="seconds between event writes")
    parser.add_argument(
        "--agent-file",
        default=agent.settings["file"],
        help="the file the `agent` scenario has an agent read (default: %(default)s, in its working directory)",
    )
    parser.add_argument(
        "--agent-model",
        action="append",
        default=[],
        metavar="NAME",
        help="a model name the `agent` scenario also answers (an agent whose tools depend on its model: "
        "Codex declares its custom apply_patch tool to the GPT-5 models); repeatable",
    )
    parser.add_argument(
        "--agent-search",
        metavar="TOOL",
        help="the `agent` scenario's second call goes to TOOL (an MCP server's), found first by a "
        "tool search where the agent declares one but not TOOL (Codex to a GPT-5 model; Claude Code's ToolSearch)",
    )
    args = parser.parse_args(argv)
    if not 0 <= args.delay <= 60:
        parser.error("--delay must be between 0 and 60 seconds")
    agent.settings["file"] = args.agent_file  # the process serves one agent's working directory
    agent.settings["models"] = tuple(args.agent_model)
    agent.settings["search"] = args.agent_search
    return args


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv, DESCRIPTION)
    try:
        return asyncio.run(serve(Http1Provider(args.delay), "fake_provider", "http", args.host, args.port))
    except KeyboardInterrupt:  # only before the loop's own SIGINT handler is in place
        return 0
