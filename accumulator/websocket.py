"""One WebSocket connection, from messages to results: one result per response it carried.

LLM APIs that speak WebSocket (OpenAI's Responses WebSocket mode, which Codex uses; OpenAI Realtime;
Gemini Live) carry many responses on one connection, one JSON event per message. The caller hands over
each complete message (mitmproxy reassembles and inflates them) with its direction; the format's session
(``WebSocketSupport.session`` in its module) says which response each event belongs to, when a response
starts and ends, and what the client's messages prove about the calls it received. Each response is
analysed by a ``StreamAccumulator`` of its own, fed whole events: the same dialect, routing, hazard
strategies and result as over HTTP.

Sans-IO like the rest of the core: messages in, results out, never an exception for bad input (a message
that is not JSON, a binary frame that is not UTF-8, an event for no response: a warning).

A response's result is *finished* when its end event comes, and *settled* when the client's evidence
about its calls is in (its next turn answered them, or the connection ended); ``message`` and ``finish``
return the results they settle, in order. The client's evidence: a result for a call id no response
carried (``unknown-tool-call-id``), a call left unanswered while its siblings were answered
(``unanswered-call``), a call the provider cancelled and the client answered anyway
(``cancelled-call-answered``).
"""

from __future__ import annotations

from bisect import insort
from collections import deque
from typing import cast

from . import formats
from .formats.base import WebSocketSupport, snippet
from .framing import MALFORMED, parse_json
from .limits import DEFAULT_LIMITS, Limits
from .result import add_warnings
from .stream import StreamAccumulator
from .warnings import WarningLog, severity_of

__all__ = ["Connection", "Response", "connection_result", "replay"]

# Messages of a connection of unknown format asked about before giving up on it.
SNIFF_MESSAGES = 8
# Finished results a connection keeps (the oldest are dropped, counted); responses awaiting evidence.
MAX_RESULTS = 1000
MAX_PENDING = 64


class Response:
    """One response on the connection, while it runs and until its evidence is in."""

    __slots__ = (
        "answered",
        "audio_bytes",
        "call_ids",
        "cancelled",
        "first_message",
        "key",
        "lane",
        "last_message",
        "position",
        "prewarm",
        "result",
        "status",
        "stream",
    )

    def __init__(self, position: int, stream: StreamAccumulator, key, lane, prewarm: bool) -> None:
        self.position = position
        self.stream = stream
        self.key = key  # the id the format routes by (Realtime's response_id), if any
        self.lane = lane  # the Responses WebSocket ``stream_id`` it runs on, if any
        self.prewarm = prewarm
        self.first_message = self.last_message = 0  # the span of its messages' numbers on the connection
        self.audio_bytes = 0
        self.status: str | None = None  # how the provider said it ended, when not "completed"
        self.result: dict | None = None  # once finished
        self.call_ids: set[str] = set()  # once finished: the ids of its calls
        self.answered: list[str] = []  # call ids the client sent results for
        self.cancelled: list[str] = []  # call ids the provider cancelled afterwards


class Connection:
    """Feed every message of one WebSocket connection (``message``), then ``finish``.

    ``format``: the format the connection speaks (``formats.websocket_format(path)`` tells it from the
    upgrade path); None recognises it from the first messages. ``request``: the upgrade request's path,
    kept in the summary. ``limits`` bound each response as they bound an HTTP stream.
    """

    def __init__(self, format: str | None = None, *, path: str = "", limits: Limits = DEFAULT_LIMITS) -> None:
        self.format = format
        self.path = path
        self.limits = limits
        self.warnings = WarningLog()  # what belongs to no response
        # ``format`` is one spoken over WebSockets (``formats.websocket_format``, or the caller's word).
        self.session = (
            cast(WebSocketSupport, formats.get(format).websocket).session(self)
            if format is not None
            else None
        )
        self.open: list[Response] = []  # responses running, in order of start
        self.pending: deque[Response] = deque()  # finished, awaiting the client's evidence
        self.results: list[dict] = []  # every finished response's result, in order of position
        self.results_dropped = 0
        self.responses = 0
        self.messages = {"client": 0, "server": 0}
        self.bytes = {"client": 0, "server": 0}
        self.number = 0  # the current message's number on the connection (1-based, both directions)
        self.now: float | None = None
        self.calls_seen = False  # a response on this connection carried calls (so ids can be unknown)
        self._size = 0  # the current message's size
        self._settled: list[dict] = []
        self._given_up = False
        self._finished = False
        self._fed: Response | None = None  # the response the last server event went to

    # -- the caller's side ---------------------------------------------------------------------------------

    def message(
        self, from_client: bool, content: bytes, is_text: bool = True, now: float | None = None
    ) -> list[dict]:
        """One complete message; returns the results it settled (often none)."""
        side = "client" if from_client else "server"
        self.number += 1
        self.messages[side] += 1
        self.bytes[side] += len(content)
        self._size = len(content)
        if now is not None:
            self.now = now
        if self._finished or self._given_up:
            return []
        obj, bad_utf8 = parse_json(content)
        if bad_utf8:
            self.warn(
                "invalid-utf8",
                f"message {self.number} ({side}, {'text' if is_text else 'binary'}) holds bytes that are "
                "not UTF-8",
                ws_message=self.number,
                from_client=from_client,
            )
        if obj is MALFORMED or type(obj) is not dict:
            if self.session is not None or self.format is not None:
                self.warn(
                    "malformed-event",
                    f"message {self.number} ({side}) is not a JSON object: {snippet(content)}",
                    ws_message=self.number,
                    from_client=from_client,
                    data=snippet(content),
                )
            return self._drain()
        if self.session is None:
            self.format = formats.sniff_websocket(from_client, obj)
            if self.format is None:
                if self.number >= SNIFF_MESSAGES:
                    self._given_up = True
                return []
            # A format sniffed from a message is always one spoken over WebSockets.
            self.session = cast(WebSocketSupport, formats.get(self.format).websocket).session(self)
        if from_client:
            self.session.client(obj, self.number)
        else:
            self.session.server(obj, self.number)
        return self._drain()

    @property
    def given_up(self) -> bool:
        """Its first messages were none we read: it is no LLM connection, and is no longer looked at."""
        return self._given_up

    def finish(self, now: float | None = None) -> list[dict]:
        """The connection ended: every response still running is finished (cut short: its result says
        so), every result still awaiting evidence is settled. Returns them; calling again returns []."""
        if self._finished:
            return []
        if now is not None:
            self.now = now
        for response in list(self.open):
            self.end(response)
        while self.pending:
            self._settle(self.pending.popleft())
        self._finished = True
        return self._drain()

    def summary(self) -> dict:
        """What belongs to the connection rather than to a response."""
        return {
            "format": self.format,
            "path": self.path,
            "responses": self.responses,
            "messages": dict(self.messages),
            "bytes": dict(self.bytes),
            "results_dropped": self.results_dropped,
            "warnings": self.warnings.to_list(),
            "warnings_over_cap": self.warnings.suppressed,
        }

    def snapshot(self) -> dict:
        """The running responses' calls so far, for live progress."""
        return {
            "format": self.format,
            "responses": self.responses,
            "finished": len(self.results),
            "running": [
                {"position": r.position, "lane": r.lane, **(r.stream.snapshot() or {})} for r in self.open
            ],
        }

    # -- the session's side --------------------------------------------------------------------------------

    def start(
        self, key=None, *, request: dict | None = None, lane=None, prewarm: bool = False, model=None
    ) -> Response:
        """A new response (a client's ``response.create``, a server's ``response.created``). ``request``:
        what the client asked (its tools, checked as an HTTP request's are); ``model``: the model the
        session named, where the response's events do not."""
        self.responses += 1
        stream = StreamAccumulator(self.format, request=request, started_at=self.now, limits=self.limits)
        if model:
            stream.name_model(model)
        response = Response(self.responses, stream, key, lane, prewarm)
        response.first_message = response.last_message = self.number
        self.open.append(response)
        return response

    def find(self, key) -> Response | None:
        """The running response of this key."""
        return next((r for r in self.open if r.key == key), None)

    def oldest(self, lane=None) -> Response | None:
        """The oldest running response of this lane (responses of one lane are answered in turn)."""
        return next((r for r in self.open if r.lane == lane), None)

    def latest(self) -> Response | None:
        return self.open[-1] if self.open else None

    def feed(self, response: Response, obj: dict) -> None:
        """The current message is an event of this response."""
        response.last_message = self.number
        self._fed = response
        response.stream.feed_object(obj, self._size, self.now)

    def end(self, response: Response, status: str | None = None, reason: str | None = None) -> None:
        """The response ended (``status``: how the provider said it ended when that was not a success:
        cancelled, failed, incomplete, interrupted; its result is then not complete)."""
        if response not in self.open:
            return
        self.open.remove(response)
        # Never None: the connection's format is known once a response starts (its session starts them).
        result = cast(dict, response.stream.finish(self.now))
        if status is not None:
            response.status = status
            result["complete"] = False
            _add(
                result,
                "response-incomplete",
                f"the provider ended response {response.position} as {status}"
                + (f" ({reason})" if reason else "")
                + "; its calls may be partial",
                status=status,
                reason=reason,
            )
        response.result = result
        response.call_ids = {
            call["id"] for choice in result["choices"] for call in choice["tool_calls"] if call["id"]
        }
        if response.call_ids:
            self.calls_seen = True
        result["websocket"] = _websocket_section(response)
        # In order of position: responses of parallel lanes may end out of order.
        insort(self.results, result, key=lambda r: r["websocket"]["position"])
        if len(self.results) > MAX_RESULTS:
            del self.results[0]
            self.results_dropped += 1
        if response.call_ids:
            self.pending.append(response)
            if len(self.pending) > MAX_PENDING:
                self._settle(self.pending.popleft())
        else:
            self._settled.append(result)

    def count_audio(self, response: Response, nbytes: int) -> None:
        response.audio_bytes += nbytes

    def warn(self, code: str, message: str, *, by_client: bool = False, **details) -> None:
        """A warning about the current message, on the response it most likely belongs to: a client's on
        the response it asked for last; a server's on the response whose events are arriving (else the
        oldest running: the one the server answers next). With none running, the connection's own."""
        if by_client or details.get("from_client"):
            running = self.latest()
        elif self._fed is not None and self._fed in self.open:
            running = self._fed
        else:
            running = self.open[0] if self.open else None
        if running is not None:
            running.stream.note(code, message, **details)
        else:
            self.warnings.add(code, message, **details)

    def answer(self, call_ids: list, previous=None) -> list[Response]:
        """The client sent results for these call ids (``previous``: the response id it says it follows,
        if any). Each answers the call it names; an id no response on this connection carried is flagged
        on the response named by ``previous`` (else the latest with calls) when calls were seen here.
        Returns the responses answered."""
        answered: list[Response] = []
        target = self.named(previous)
        for call_id in call_ids:
            if type(call_id) is not str:
                continue
            owner = next((r for r in reversed(self.pending) if call_id in r.call_ids), None)
            if owner is None:
                owner = next((r for r in reversed(self.open) if r.stream.has_call(call_id)), None)
            if owner is not None:
                if call_id in owner.cancelled and owner.result is not None:
                    _add(
                        owner.result,
                        "cancelled-call-answered",
                        f"the client answered call {call_id}, which the provider had cancelled",
                        id=call_id,
                    )
                owner.answered.append(call_id)
                if owner not in answered:
                    answered.append(owner)
                continue
            if not self.calls_seen and target is None:
                continue  # a conversation begun elsewhere (an earlier connection, HTTP): nothing to say
            flagged = target or (self.pending[-1] if self.pending else None)
            message = (
                f"message {self.number}: the client sent a result for call {call_id}, which no response "
                "on this connection carried"
            )
            if flagged is not None and flagged.result is not None:
                _add(flagged.result, "unknown-tool-call-id", message, id=call_id, ws_message=self.number)
            else:
                self.warn("unknown-tool-call-id", message, by_client=True, id=call_id, ws_message=self.number)
        return answered

    def cancel(self, call_ids: list) -> None:
        """The provider cancelled these calls (Gemini Live's ``toolCallCancellation``)."""
        for response in list(self.pending) + self.open:
            for call_id in call_ids:
                if type(call_id) is str and (
                    call_id in response.call_ids or response.stream.has_call(call_id)
                ):
                    response.cancelled.append(call_id)

    def settle(self, responses=None) -> None:
        """The client moved on: these responses' evidence is in (None: every response awaiting it)."""
        chosen = list(self.pending) if responses is None else [r for r in responses if r in self.pending]
        for response in dict.fromkeys(chosen):
            self.pending.remove(response)
            self._settle(response)

    def named(self, key) -> Response | None:
        """The response of this id (running or awaiting evidence), if any."""
        if type(key) is not str or not key:
            return None
        for response in [*self.pending, *self.open]:
            if response.key == key or response.stream.response_id == key:
                return response
        return None

    # -- inside --------------------------------------------------------------------------------------------

    def _settle(self, response: Response) -> None:
        result = response.result
        if result is None:
            return
        answered = set(response.answered)
        cancelled = set(response.cancelled)
        unanswered = sorted(response.call_ids - answered - cancelled)
        # A response the provider cut short may hold partial calls a client is right not to run.
        if answered and unanswered and response.status is None:
            for call in (c for choice in result["choices"] for c in choice["tool_calls"]):
                if call["id"] in unanswered:
                    _add(
                        result,
                        "unanswered-call",
                        f"the client answered {len(answered)} of the calls of response {response.position} "
                        f"but never call {call['id']} ({call['name']}): a dropped call",
                        id=call["id"],
                        name=call["name"],
                    )
        result["websocket"]["evidence"] = (
            {
                "answered": sorted(answered),
                "unanswered": unanswered if answered else [],
                "cancelled": sorted(cancelled),
            }
            if answered or cancelled
            else None
        )
        self._settled.append(result)

    def _drain(self) -> list[dict]:
        if not self._settled:
            return []
        out = sorted(self._settled, key=lambda r: r["websocket"]["position"])
        self._settled = []
        return out


def _websocket_section(response: Response) -> dict:
    return {
        "position": response.position,
        "lane": response.lane,
        "prewarm": response.prewarm,
        "status": response.status,
        "first_message": response.first_message,
        "last_message": response.last_message,
        "audio_bytes": response.audio_bytes,
        "evidence": None,
    }


def _add(result: dict, code: str, message: str, **details) -> None:
    add_warnings(result, [{"code": code, "severity": severity_of(code), "message": message, **details}])


def connection_result(connection: Connection) -> dict:
    """What a front door stores for a WebSocket flow: the connection's summary and its responses'
    results, in order (``CONNECTION_SCHEMA``)."""
    return {
        "transport": "websocket",
        "connection": connection.summary(),
        "responses": list(connection.results),
    }


def replay(
    messages,
    format: str | None = None,
    *,
    path: str = "",
    limits: Limits = DEFAULT_LIMITS,
    end: float | None = None,
) -> Connection:
    """A connection's stored messages fed again, in order, and finished: what the CLI and the content view
    do with a flow the addon did not record. ``messages``: ``(from_client, content, is_text, timestamp)``
    tuples (timestamp None for none); ``end``: when the connection closed, if known."""
    connection = Connection(format, path=path, limits=limits)
    for from_client, content, is_text, timestamp in messages:
        connection.message(from_client, content, is_text, now=timestamp)
    connection.finish(end)
    return connection
