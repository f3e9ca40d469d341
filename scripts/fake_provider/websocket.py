"""WebSocket on the provider's own port: h11 answers the upgrade with its 101 and hands over the bytes after
it; wsproto carries the connection on. A protocol's `Session` reads the client's complete messages and
queues its answers on an `Outbox`, which sends them lane by lane, paced, fragmented and faulted as the
upgrade request asked (X-Fake-* headers, as over HTTP)."""

from __future__ import annotations

import asyncio
import contextlib
import zlib
from collections import deque
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import NamedTuple

import orjson
from wsproto.connection import Connection, ConnectionState, ConnectionType
from wsproto.events import BytesMessage, CloseConnection, Message, Ping, TextMessage
from wsproto.extensions import Extension, PerMessageDeflate
from wsproto.handshake import server_extensions_handshake
from wsproto.utilities import LocalProtocolError, generate_accept_token, split_comma_header

from .provider import GATE_TIMEOUT
from .request import Refused, Request, options

READ_SIZE = 65536
MAX_MESSAGE_BYTES = 8 * 1024 * 1024  # a client message larger than this closes the connection (1009)
MAX_FRAGMENT = 2**24
# What each WebSocket X-Fake-Fault does; --help prints it beside the HTTP faults.
WS_FAULT_HELP: dict[str, str] = {
    "ws-garbage": "(WebSocket) mid-response, one text message that is not JSON and one binary message "
    "that is not UTF-8; the response then goes on",
    "ws-drop": "(WebSocket) the TCP connection drops mid-call, without a close frame",
}
WS_FAULTS: tuple[str, ...] = tuple(WS_FAULT_HELP)
GARBAGE_TEXT = "this is not JSON {"
GARBAGE_BINARY = b"\xff\xfe not UTF-8 \xc3\x28"
_FALSE = ("0", "false", "no", "off")


class WsOptions(NamedTuple):
    """What the upgrade request asked of the connection."""

    delay: float  # X-Fake-Delay, seconds between a response's messages
    fragment: int | None  # X-Fake-Fragment: each message in frames of at most this many bytes
    binary: bool  # X-Fake-Binary: JSON events in binary frames even where the protocol uses text
    fault: str | None  # X-Fake-Fault: one of WS_FAULTS
    deflate: bool  # X-Fake-Deflate: 0 refuses permessage-deflate even when the client offers it


def ws_options(request: Request, delay: float) -> WsOptions:
    """The upgrade request's X-Fake-* headers; Refused when one is not understood."""
    headers = request.headers
    delay, _ = options(request, delay)
    fragment = headers.get("x-fake-fragment", "").strip() or None
    if fragment is not None and (not fragment.isdigit() or not 0 < int(fragment) <= MAX_FRAGMENT):
        raise Refused(400, f"X-Fake-Fragment must be a number of bytes from 1 to {MAX_FRAGMENT}")
    fault = headers.get("x-fake-fault", "").strip().lower() or None
    if fault is not None and fault not in WS_FAULTS:
        raise Refused(400, f"X-Fake-Fault on a WebSocket must be one of {', '.join(WS_FAULTS)}")
    binary = headers.get("x-fake-binary", "").strip().lower() not in ("", *_FALSE)
    deflate = headers.get("x-fake-deflate", "").strip().lower() not in _FALSE
    return WsOptions(delay, None if fragment is None else int(fragment), binary, fault, deflate)


class FlushingDeflate(PerMessageDeflate):
    """permessage-deflate that flushes at the end of every frame, so that each fragment of a message carries
    its own piece compressed (wsproto alone would hold the compressed bytes back until the last frame)."""

    def frame_outbound(self, proto, opcode, rsv, data, fin):
        rsv, out = super().frame_outbound(proto, opcode, rsv, data, fin)
        if not fin and self._compressible_opcode(opcode) and self._compressor is not None:
            out += self._compressor.flush(zlib.Z_SYNC_FLUSH)
        return rsv, out


def is_upgrade(request: Request) -> bool:
    """Whether the request asks to become a WebSocket (RFC 6455 4.1: GET with Upgrade: websocket)."""
    upgrade = [token.lower() for token in split_comma_header(request.headers.get("upgrade", "").encode())]
    return request.method == "GET" and "websocket" in upgrade


def accept(request: Request, deflate: bool) -> tuple[list[tuple[str, str]], list[Extension]]:
    """The 101's headers and the extensions agreed on; Refused when the handshake is not RFC 6455's."""
    headers = request.headers
    if headers.get("sec-websocket-version", "").strip() != "13":
        raise Refused(426, "Sec-WebSocket-Version must be 13")
    key = headers.get("sec-websocket-key", "").strip()
    if not key:
        raise Refused(400, "Sec-WebSocket-Key is missing")
    connection = [token.lower() for token in split_comma_header(headers.get("connection", "").encode())]
    if "upgrade" not in connection:
        raise Refused(400, "Connection must include Upgrade")
    supported: list[Extension] = [FlushingDeflate()] if deflate else []
    offered = split_comma_header(headers.get("sec-websocket-extensions", "").encode())
    agreed = server_extensions_handshake(offered, supported) if supported else None
    fields = [
        ("Upgrade", "websocket"),
        ("Connection", "Upgrade"),
        ("Sec-WebSocket-Accept", generate_accept_token(key.encode()).decode()),
    ]
    if agreed:
        fields.append(("Sec-WebSocket-Extensions", agreed.decode("ascii")))
    return fields, [extension for extension in supported if extension.enabled()]


class Closed(Exception):
    """The connection is over (closed by either side, dropped, or broken)."""


class WsConnection:
    """One server-side WebSocket over asyncio streams: whole messages in, messages out (in fragments when
    asked), pings answered, the closing handshake completed."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        extensions: list[Extension],
        trailing: bytes,
        fragment: int | None,
    ) -> None:
        self.reader, self.writer, self.fragment = reader, writer, fragment
        self.ws = Connection(ConnectionType.SERVER, extensions, trailing)

    async def _put(self, event) -> None:
        try:
            data = self.ws.send(event)
        except LocalProtocolError:  # closing or closed: nothing more can be sent
            raise Closed from None
        self.writer.write(data)
        await self.writer.drain()

    async def send(self, data: str | bytes) -> None:
        """One message; with a fragment size, one frame (and one write) per piece."""
        kind = TextMessage if isinstance(data, str) else BytesMessage
        pieces = _pieces(data, self.fragment) if self.fragment else [data]
        for i, piece in enumerate(pieces):
            await self._put(kind(data=piece, message_finished=i == len(pieces) - 1))

    async def close(self, code: int, reason: str) -> None:
        if self.ws.state is ConnectionState.OPEN:
            await self._put(CloseConnection(code=code, reason=reason))

    def drop(self) -> None:
        """The TCP connection ends here, with no close frame."""
        self.writer.transport.abort()

    async def messages(self) -> AsyncIterator[str | bytes]:
        """The client's complete messages until it closes or goes away; the closing handshake answered."""
        parts: list[str | bytes] = []
        size = 0
        while True:
            for event in self.ws.events():
                if isinstance(event, Message):
                    parts.append(event.data)
                    size += len(event.data)
                    if size > MAX_MESSAGE_BYTES:
                        await self.close(1009, "message too big")
                        return
                    if event.message_finished:
                        yield "".join(parts) if isinstance(event, TextMessage) else b"".join(parts)
                        parts, size = [], 0
                elif isinstance(event, Ping):
                    await self._put(event.response())
                elif isinstance(event, CloseConnection):
                    # The client's close is answered; a frame wsproto could not parse closes with its code.
                    with contextlib.suppress(Closed, ConnectionError):
                        if self.ws.state is ConnectionState.REMOTE_CLOSING:
                            await self._put(event.response())
                        elif self.ws.state is ConnectionState.OPEN:
                            await self._put(CloseConnection(code=event.code, reason=event.reason))
                    return
            data = await self.reader.read(READ_SIZE)
            self.ws.receive_data(data or None)


def _pieces(data: str | bytes, size: int) -> list:
    """A message cut into pieces of at most ``size`` bytes; text only between characters (wsproto encodes
    each text piece itself), so a piece holds at least one character."""
    if isinstance(data, bytes):
        return [data[i : i + size] for i in range(0, len(data), size)] or [b""]
    pieces, start, used = [], 0, 0
    for i, char in enumerate(data):
        width = len(char.encode())
        if used and used + width > size:
            pieces.append(data[start:i])
            start, used = i, 0
        used += width
    pieces.append(data[start:])
    return pieces


# What a session queues: a payload to send as JSON, a message sent as it is (garbage), the point where a
# fault strikes, a gate to wait at, a close frame.
class Send(NamedTuple):
    payload: dict


class Raw(NamedTuple):
    data: str | bytes


class Middle(NamedTuple):
    pass


class Gate(NamedTuple):
    event: asyncio.Event


class Close(NamedTuple):
    code: int
    reason: str


Action = Send | Raw | Middle | Gate | Close
MIDDLE = Middle()


class Outbox:
    """The one sender of a connection's messages. A reply goes out at once; responses queue per lane (FIFO
    within a lane), and the lanes take turns a message each, so responses on different lanes interleave."""

    def __init__(self, conn: WsConnection, opts: WsOptions, binary: bool, gates: set[asyncio.Event]) -> None:
        self.conn, self.opts, self.binary, self.gates = conn, opts, binary or opts.binary, gates
        self.urgent: deque[Action] = deque()
        self.lanes: dict[object, deque[Iterator[Action]]] = {}
        self.order: deque[object] = deque()
        self.wake = asyncio.Event()
        self.faulted = False

    def reply(self, *actions: Action) -> None:
        self.urgent.extend(actions)
        self.wake.set()

    def add(self, lane: object, actions: Iterable[Action]) -> None:
        if lane not in self.lanes:
            self.lanes[lane] = deque()
            self.order.append(lane)
        self.lanes[lane].append(iter(actions))
        self.wake.set()

    def gate(self) -> Gate:
        """A gate registered now (GET /release opens it), for a response to wait at later."""
        event = asyncio.Event()
        self.gates.add(event)
        return Gate(event)

    def _next(self) -> Action | None:
        for _ in range(len(self.order)):
            queue = self.lanes[self.order[0]]
            while queue:
                action = next(queue[0], None)
                if action is None:
                    queue.popleft()
                    continue
                if isinstance(action, Send):
                    self.order.rotate(-1)  # the next message comes from the next lane that has one
                return action
            self.order.rotate(-1)
        return None

    async def run(self) -> None:
        """Send until a response closes or drops the connection (or the task is cancelled)."""
        while True:
            if self.urgent:
                action = self.urgent.popleft()
            elif (action := self._next()) is None:
                self.wake.clear()
                await self.wake.wait()
                continue
            if not await self._perform(action):
                return
            if isinstance(action, Send):
                await asyncio.sleep(self.opts.delay)

    async def _perform(self, action: Action) -> bool:
        """Carry one action out; False when the connection is over after it."""
        if isinstance(action, Send):
            data = orjson.dumps(action.payload)
            await self.conn.send(data if self.binary else data.decode())
        elif isinstance(action, Raw):
            await self.conn.send(action.data)
        elif isinstance(action, Gate):
            try:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(action.event.wait(), GATE_TIMEOUT)
            finally:
                self.gates.discard(action.event)
        elif isinstance(action, Close):
            await self.conn.close(action.code, action.reason)
            return False
        elif self.opts.fault and not self.faulted:  # the middle of a response: the fault strikes once
            self.faulted = True
            if self.opts.fault == "ws-drop":
                self.conn.drop()
                return False
            await self.conn.send(GARBAGE_TEXT)
            await self.conn.send(GARBAGE_BINARY)
        return True


class Session:
    """One protocol's side of a connection: `opened` once the 101 is sent, `received` for each complete
    client message; both answer by queuing actions on the outbox. ``binary``: the protocol sends its JSON
    in binary frames (Gemini Live)."""

    binary = False

    def __init__(self, request: Request, outbox: Outbox) -> None:
        self.request, self.outbox = request, outbox

    def opened(self) -> None:
        pass

    def received(self, message: str | bytes) -> None:
        raise NotImplementedError


def json_object(message: str | bytes) -> dict | None:
    """A client message as a JSON object, or None when it is not one."""
    try:
        value = orjson.loads(message)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def with_middle(payloads: list[dict], *, at: int | None = None) -> list[Action]:
    """Send actions for the payloads, the fault point after half of them (or after ``at``)."""
    middle = len(payloads) // 2 if at is None else at
    actions: list[Action] = [Send(payload) for payload in payloads]
    actions.insert(middle, MIDDLE)
    return actions


def renamed(value, n: int, keys: frozenset[str]):
    """A copy of a payload with every id under ``keys`` suffixed `_n`: the ids of the n-th response on a
    connection, unique on it (the renderers' ids are fixed per scenario)."""
    if isinstance(value, dict):
        return {
            key: f"{item}_{n}" if key in keys and isinstance(item, str) else renamed(item, n, keys)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [renamed(item, n, keys) for item in value]
    return value


def gated(actions: list[Action], after: int, gate: Gate) -> None:
    """Put the gate after the first ``after`` sends."""
    sends = [i for i, action in enumerate(actions) if isinstance(action, Send)]
    actions.insert(sends[after - 1] + 1, gate)
