"""The JSONL record of a finished LLM flow, and the file the addon appends them to."""

from __future__ import annotations

import os
from datetime import UTC, datetime

import orjson
from mitmproxy import http


def record(flow: http.HTTPFlow, result: dict) -> bytes:
    """One JSONL line: the result with the URL, time, status and duration of its flow."""
    response = flow.response
    end = (response.timestamp_end if response else None) or (flow.error.timestamp if flow.error else None)
    line = {
        "flow_id": flow.id,
        "method": flow.request.method,
        "url": flow.request.pretty_url,
        "time": datetime.fromtimestamp(flow.request.timestamp_start, UTC).isoformat(),
        "status": response.status_code if response else None,
        "duration": round(end - flow.request.timestamp_start, 6) if end else None,
        "error": flow.error.msg if flow.error else None,
        "result": result,
    }
    return orjson.dumps(line) + b"\n"


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
