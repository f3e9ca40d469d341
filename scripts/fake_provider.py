"""A local OpenAI-compatible Chat Completions provider: scripted tool-call streams over real HTTP/1.1.

.venv/bin/python scripts/fake_provider.py [--host 127.0.0.1] [--port 0] [--delay 0.02]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import hashlib
import math
import signal
import sys
from typing import Any

import orjson

# A fixed timestamp and fixed ids keep every body byte-identical, so X-Body-SHA256 is stable across runs.
CREATED = 1767225600
USAGE = {"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70}
GATE_TIMEOUT = 30.0
MAX_HEAD_BYTES = 64 * 1024
MAX_BODY_BYTES = 8 * 1024 * 1024


def _call(index: int, call_id: str, name: str, arguments: str = "") -> dict:
    return {
        "index": index,
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def _args(index: int, fragment: str) -> dict:
    return {"index": index, "function": {"arguments": fragment}}


_INTERLEAVED = (
    _call(0, "call_abc", "search_circulars"),
    _call(1, "call_xyz", "get_user_profile"),
    _args(0, '{"query": "RBI'),
    _args(1, '{"user_id": "u'),
    _args(0, ' circulars"}'),
    _args(1, '123"}'),
)

_SEQUENTIAL = (
    _call(0, "call_w1", "get_weather"),
    _args(0, '{"ci'),
    _args(0, 'ty": "Pa'),
    _args(0, 'ris"}'),
    _call(1, "call_t1", "get_time"),
    _args(1, '{"tz": '),
    _args(1, '"Europe/'),
    _args(1, 'Paris"}'),
)

# One script per scenario; the request's "model" picks it. Keys:
#   tool_calls  tool-call deltas, one per event        content     text fragments, one per event
#   error       an error event sent instead of the finish and usage events
#   cut_after   events sent before the TCP connection is dropped (no terminating zero-length chunk)
#   gate_after  events sent before waiting for GET /release
_SCRIPTS: dict[str, dict[str, Any]] = {
    "interleaved": {"tool_calls": _INTERLEAVED},
    "sequential": {"tool_calls": _SEQUENTIAL},
    # Groq / Ollama: every call is whole in one delta and all of them claim index 0.
    "index-collision": {
        "tool_calls": (
            _call(0, "call_c1", "weather", '{"location": "San Francisco"}'),
            _call(0, "call_c2", "weather", '{"location": "Tokyo"}'),
            _call(0, "call_c3", "weather", '{"location": "Paris"}'),
        )
    },
    # Fireworks / LiteLLM proxy: every delta repeats id, type and name, which must not start a new call.
    "name-repeated": {
        "tool_calls": tuple(
            _call(0, "call_r1", "get_current_weather", fragment)
            for fragment in ('{"city": ', '"Oslo", ', '"unit": ', '"c"}')
        )
    },
    "truncated": {"tool_calls": _INTERLEAVED, "cut_after": 4},
    "error-midstream": {
        "tool_calls": (_call(0, "call_e1", "lookup", '{"q": '),),
        "error": {"message": "upstream overloaded", "type": "server_error", "code": 502},
    },
    "text": {"content": ("Hello", " from the", " fake provider", ".")},
    "gated": {"tool_calls": _SEQUENTIAL, "gate_after": 1},
}

SCENARIOS: tuple[str, ...] = tuple(_SCRIPTS)


def _script(name: str) -> dict[str, Any]:
    try:
        return _SCRIPTS[name]
    except KeyError:
        raise KeyError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}") from None


def _event(obj: Any) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


@functools.cache
def _events(name: str) -> tuple[bytes, ...]:
    """Every SSE event of the scenario's full, uncut body, in order."""
    script = _script(name)
    base = {
        "id": f"chatcmpl-fake-{name}",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": name,
    }

    def chunk(delta: dict, finish_reason: str | None = None) -> bytes:
        return _event({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]})

    events = [chunk({"role": "assistant", "content": None})]
    events += [chunk({"tool_calls": [delta]}) for delta in script.get("tool_calls", ())]
    events += [chunk({"content": fragment}) for fragment in script.get("content", ())]
    if "error" in script:
        events.append(_event({"error": script["error"]}))
    else:
        events.append(chunk({}, "tool_calls" if script.get("tool_calls") else "stop"))
        events.append(_event({**base, "choices": [], "usage": USAGE}))
    events.append(b"data: [DONE]\n\n")
    return tuple(events)


def sse_body(name: str) -> bytes:
    """The scenario's full SSE body, as sent when nothing cuts it short (for `truncated`: the uncut body)."""
    return b"".join(_events(name))


@functools.cache
def _body_sha256(name: str) -> str:
    return hashlib.sha256(sse_body(name)).hexdigest()


def expected_calls(name: str) -> list[dict]:
    """The correct reconstruction of the full body's tool calls: [{"id", "name", "arguments"}] in order.

    Calls are told apart by id (an index alone can be reused, as in `index-collision`); a delta without an
    id continues the call last seen at its index. For `error-midstream` this is the call as far as it got.
    """
    calls: list[dict] = []
    by_id: dict[str, dict] = {}
    by_index: dict[int, dict] = {}
    for delta in _script(name).get("tool_calls", ()):
        call_id = delta.get("id")
        if call_id is None:
            call = by_index[delta["index"]]
        elif call_id in by_id:
            call = by_id[call_id]
        else:
            call = by_id[call_id] = {"id": call_id, "name": delta["function"]["name"], "arguments": ""}
            calls.append(call)
        by_index[delta["index"]] = call
        call["arguments"] += delta["function"].get("arguments", "")
    return [dict(call) for call in calls]


def _completion(name: str) -> dict:
    script = _script(name)
    calls = expected_calls(name)
    message: dict[str, Any] = {"role": "assistant", "content": "".join(script.get("content", ())) or None}
    if calls:
        message["tool_calls"] = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in calls
        ]
    return {
        "id": f"chatcmpl-fake-{name}",
        "object": "chat.completion",
        "created": CREATED,
        "model": name,
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"},
        ],
        "usage": USAGE,
    }


def _error_json(message: str, kind: str = "invalid_request_error") -> bytes:
    return orjson.dumps({"error": {"message": message, "type": kind}})


_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    413: "Content Too Large",
    501: "Not Implemented",
    502: "Bad Gateway",
}


class _BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class _Request:
    def __init__(self, method: str, target: str, version: str, headers: dict[str, str], body: bytes) -> None:
        self.method = method
        self.path = target.split("?", 1)[0]
        self.headers = headers
        self.body = body
        tokens = {t.strip().lower() for t in headers.get("connection", "").split(",")}
        self.keep_alive = "keep-alive" in tokens if version == "HTTP/1.0" else "close" not in tokens


async def _read_request(reader: asyncio.StreamReader) -> _Request | None:
    """The next request on the connection, or None when the client closed it between requests."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if exc.partial.strip():
            raise _BadRequest(400, "incomplete request head") from None
        return None
    except asyncio.LimitOverrunError:
        raise _BadRequest(400, "request head too large") from None

    lines = head.decode("latin-1").split("\r\n")
    while lines and not lines[0]:  # RFC 9112 2.2: ignore empty lines before the request line
        lines.pop(0)
    parts = lines[0].split(" ") if lines else []
    if len(parts) != 3 or not parts[0].isalpha() or not parts[1] or parts[2] not in ("HTTP/1.1", "HTTP/1.0"):
        raise _BadRequest(400, "malformed request line")
    method, target, version = parts

    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise _BadRequest(400, "malformed header line")
        headers[name.lower()] = value.strip()

    if "transfer-encoding" in headers:
        raise _BadRequest(501, "request bodies with Transfer-Encoding are not supported")
    length = headers.get("content-length", "0")
    if not length.isdigit():
        raise _BadRequest(400, "malformed Content-Length")
    if int(length) > MAX_BODY_BYTES:
        raise _BadRequest(413, "request body too large")
    body = await reader.readexactly(int(length))
    return _Request(method, target, version, headers, body)


def _head(status: int, headers: dict[str, str], keep_alive: bool) -> bytes:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}", "Server: fake_provider"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    lines.append("Connection: keep-alive" if keep_alive else "Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class _Provider:
    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.gates: set[asyncio.Event] = set()
        self.connections: set[asyncio.Task] = set()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.connections.add(task)
        try:
            while True:
                try:
                    request = await _read_request(reader)
                except _BadRequest as exc:
                    await self._send(writer, exc.status, "text/plain", f"{exc}\n".encode(), keep_alive=False)
                    return
                if request is None or not await self._respond(request, writer) or not request.keep_alive:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            # The client went away mid-request or mid-stream: that connection is simply over.
            pass
        except asyncio.CancelledError:
            # Shutdown cancels connections. Ending cancelled would make asyncio 3.12.1's client_connected_cb
            # callback call task.exception() and print a traceback, so the task ends normally instead.
            pass
        finally:
            self.connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _send(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        content_type: str,
        body: bytes,
        *,
        keep_alive: bool,
        head_only: bool = False,
        extra: dict[str, str] | None = None,
    ) -> bool:
        headers = {"Content-Type": content_type, "Content-Length": str(len(body)), **(extra or {})}
        writer.write(_head(status, headers, keep_alive) + (b"" if head_only else body))
        await writer.drain()
        return keep_alive

    async def _respond(self, request: _Request, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; False when the connection must not carry another one."""
        method, path, keep = request.method, request.path, request.keep_alive
        if method == "POST" and path.endswith("/chat/completions"):
            return await self._chat(request, writer)
        if method == "GET" and path == "/health":
            return await self._send(writer, 200, "text/plain", b"ok\n", keep_alive=keep)
        if method == "GET" and path == "/v1/models":
            models = {"object": "list", "data": [{"id": name, "object": "model"} for name in SCENARIOS]}
            return await self._send(writer, 200, "application/json", orjson.dumps(models), keep_alive=keep)
        if method == "GET" and path == "/release":
            waiting = [gate for gate in self.gates if not gate.is_set()]
            for gate in waiting:
                gate.set()
            return await self._send(writer, 200, "text/plain", f"{len(waiting)}\n".encode(), keep_alive=keep)
        return await self._send(
            writer, 404, "text/plain", b"not found\n", keep_alive=keep, head_only=method == "HEAD"
        )

    async def _chat(self, request: _Request, writer: asyncio.StreamWriter) -> bool:
        keep = request.keep_alive
        try:
            payload = orjson.loads(request.body)
        except orjson.JSONDecodeError:
            return await self._send(
                writer, 400, "application/json", _error_json("body is not JSON"), keep_alive=keep
            )
        if not isinstance(payload, dict):
            error = _error_json("body must be a JSON object")
            return await self._send(writer, 400, "application/json", error, keep_alive=keep)
        name = payload.get("model")
        if not isinstance(name, str) or name not in _SCRIPTS:
            error = _error_json(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}")
            return await self._send(writer, 404, "application/json", error, keep_alive=keep)

        delay = self.delay
        if "x-fake-delay" in request.headers:
            try:
                delay = float(request.headers["x-fake-delay"])
            except ValueError:
                delay = math.nan
            if not 0 <= delay <= 60:
                error = _error_json("X-Fake-Delay must be a number of seconds between 0 and 60")
                return await self._send(writer, 400, "application/json", error, keep_alive=keep)

        scenario = {"X-Scenario": name}
        if payload.get("stream") is True:
            return await self._stream(name, delay, writer, keep)
        script = _SCRIPTS[name]
        if "error" in script:
            # Not streamed, the overload surfaces the way providers report it: as the HTTP status.
            error = orjson.dumps({"error": script["error"]})
            return await self._send(writer, 502, "application/json", error, keep_alive=keep, extra=scenario)
        body = orjson.dumps(_completion(name))
        return await self._send(writer, 200, "application/json", body, keep_alive=keep, extra=scenario)

    async def _stream(self, name: str, delay: float, writer: asyncio.StreamWriter, keep: bool) -> bool:
        script = _SCRIPTS[name]
        headers = {
            "Content-Type": "text/event-stream; charset=utf-8",
            "Cache-Control": "no-cache",
            "Transfer-Encoding": "chunked",
            # Always the full body's hash, also for `truncated`, so a client can tell it got less.
            "X-Body-SHA256": _body_sha256(name),
            "X-Scenario": name,
        }
        writer.write(_head(200, headers, keep))
        await writer.drain()

        cut_after = script.get("cut_after")
        gate_after = script.get("gate_after")
        events = _events(name)[:cut_after] if cut_after else _events(name)
        gate = asyncio.Event() if gate_after else None
        if gate is not None:
            # Registered before the first write, so a client that has seen that event can always release it.
            self.gates.add(gate)
        try:
            for sent, event in enumerate(events):
                if sent:
                    await asyncio.sleep(delay)
                # One event, one chunk, one write, drained: the pacing a real provider's stream has.
                writer.write(b"%x\r\n%s\r\n" % (len(event), event))
                await writer.drain()
                if gate is not None and sent + 1 == gate_after:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(gate.wait(), GATE_TIMEOUT)
        finally:
            if gate is not None:
                self.gates.discard(gate)

        if cut_after:
            # Dropping the connection without the zero-length chunk leaves the client an incomplete body.
            await asyncio.sleep(delay)
            return False
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return keep


async def _serve(host: str, port: int, delay: float) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    provider = _Provider(delay)
    try:
        server = await asyncio.start_server(provider.handle, host, port, limit=MAX_HEAD_BYTES)
    except OSError as exc:
        print(f"fake_provider: cannot listen on {host}:{port}: {exc}", file=sys.stderr)
        return 1
    bound_host, bound_port = server.sockets[0].getsockname()[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    print(f"fake_provider listening on http://{shown}:{bound_port}", flush=True)

    await stop.wait()
    server.close()
    # Idle keep-alive connections and gated streams would otherwise hold the shutdown open.
    for task in list(provider.connections):
        task.cancel()
    await asyncio.gather(*provider.connections, return_exceptions=True)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(server.wait_closed(), 5)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 lets the OS pick one (default)")
    parser.add_argument("--delay", type=float, default=0.02, help="seconds between event writes")
    args = parser.parse_args(argv)
    if not 0 <= args.delay <= 60:
        parser.error("--delay must be between 0 and 60 seconds")
    try:
        return asyncio.run(_serve(args.host, args.port, args.delay))
    except KeyboardInterrupt:  # only before the loop's own SIGINT handler is in place
        return 0


if __name__ == "__main__":
    sys.exit(main())
