"""What the addon gives out about finished LLM flows: the JSONL record of one, the file it appends them to,
and the one-line report its command prints. A WebSocket flow carries many responses (its stored value is
the connection's record): one record and one report line per response."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime

import orjson
from mitmproxy import flow as mflow
from mitmproxy import http

from accumulator.report import results_of
from toolcall_lens.view import METADATA_KEY, message_time


def annotated(flows: Iterable[mflow.Flow]) -> Iterator[tuple[http.HTTPFlow, dict]]:
    """The LLM flows among these that carry a result (an HTTP flow's, or a WebSocket connection's
    record), each with it."""
    for flow in flows:
        value = flow.metadata.get(METADATA_KEY) if isinstance(flow, http.HTTPFlow) else None
        if results_of(value):
            yield flow, value


def report_line(flow: http.HTTPFlow, value: dict) -> str:
    """Time, host, format, model, calls, warnings: one line per response (a WebSocket flow's are
    numbered by their position on the connection, each at the time of its first message)."""
    lines = []
    for result in results_of(value):
        websocket = result.get("websocket")
        when = _clock(_time(flow, result))
        where = (
            f"{flow.request.pretty_host} ws#{websocket['position']}"
            if websocket
            else flow.request.pretty_host
        )
        names = [c["name"] or "?" for choice in result["choices"] for c in choice["tool_calls"]]
        codes = list(dict.fromkeys(w["code"] for w in result["warnings"]))
        session = result.get("session")
        cost = result.get("cost")
        lines.append(
            f"{when}  {where}  {result['format']}  {result['model'] or '?'}  "
            f"calls: {', '.join(names) or '-'}  warnings: {', '.join(codes) or '-'}"
            + (f"  session {session['id'][:12]} turn {session['turn']}" if session else "")
            + (f"  ${cost['total']:.6f}" if cost else "")
        )
    return "\n".join(lines)


def record(flow: http.HTTPFlow, value: dict) -> bytes:
    """JSONL: the result with the URL, time, status and duration of its flow, one line per response (the
    value stored on the flow: an HTTP result, a WebSocket connection's record, or one response of it). A
    WebSocket response's line says so (``transport``) and where it sat (``position``); its time is its
    first message's, its duration the span of its messages."""
    response = flow.response
    end = (response.timestamp_end if response else None) or (flow.error.timestamp if flow.error else None)
    base = {
        "flow_id": flow.id,
        "method": flow.request.method,
        "url": flow.request.pretty_url,
        "time": _iso(flow.request.timestamp_start),
        "status": response.status_code if response else None,
        "duration": round(end - flow.request.timestamp_start, 6) if end else None,
        "error": flow.error.msg if flow.error else None,
        # mitmproxy's is_replay: "request" (the flow was replayed: mitmweb's Replay, -C), "response"
        # (answered by --server-replay), or None.
        "replay": flow.is_replay,
    }
    lines = []
    for result in results_of(value):
        session = result.get("session") or {}
        # The agent session and turn it belongs to, at the top where a grep or jq finds them.
        placed = {"session": session.get("id"), "turn": session.get("turn")}
        websocket = result.get("websocket")
        if websocket is None:
            lines.append(orjson.dumps({**base, **placed, "result": result}) + b"\n")
            continue
        first = message_time(flow, websocket["first_message"])
        last = message_time(flow, websocket["last_message"])
        line = {
            **base,
            "transport": "websocket",
            "position": websocket["position"],
            "time": _iso(first if first is not None else flow.request.timestamp_start),
            "duration": round(last - first, 6) if last is not None and first is not None else None,
            **placed,
            "result": result,
        }
        lines.append(orjson.dumps(line) + b"\n")
    return b"".join(lines)


def _time(flow: http.HTTPFlow, result: dict) -> float:
    """When a response began: a WebSocket response's first message, else (an HTTP one, or one whose
    messages were trimmed from the stored flow) the flow's request."""
    websocket = result.get("websocket")
    stamp = message_time(flow, websocket["first_message"]) if websocket else None
    return stamp if stamp is not None else flow.request.timestamp_start


def _clock(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%H:%M:%S")


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat()


class JsonlFile:
    """A file opened for appending; each record is one write of one whole line on an O_APPEND descriptor,
    so a reader never sees half a record."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd = os.open(os.path.expanduser(path), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def append(self, line: bytes) -> None:
        os.write(self._fd, line)

    def close(self) -> None:
        os.close(self._fd)


def write_all(path: str, lines) -> None:
    with open(os.path.expanduser(path), "wb") as f:
        f.writelines(lines)
