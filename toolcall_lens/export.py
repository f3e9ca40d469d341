"""What the addon gives out about finished LLM flows: the JSONL record of one, the file it appends them to,
and the one-line report its command prints."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime

import orjson
from mitmproxy import flow as mflow
from mitmproxy import http

from toolcall_lens.view import METADATA_KEY


def annotated(flows: Iterable[mflow.Flow]) -> Iterator[tuple[http.HTTPFlow, dict]]:
    """The LLM flows among these that carry a result, each with it."""
    for flow in flows:
        result = flow.metadata.get(METADATA_KEY) if isinstance(flow, http.HTTPFlow) else None
        if result is not None:
            yield flow, result


def report_line(flow: http.HTTPFlow, result: dict) -> str:
    """Time, host, format, model, calls, warnings."""
    when = datetime.fromtimestamp(flow.request.timestamp_start, UTC).strftime("%H:%M:%S")
    names = [c["name"] or "?" for choice in result["choices"] for c in choice["tool_calls"]]
    codes = list(dict.fromkeys(w["code"] for w in result["warnings"]))
    return (
        f"{when}  {flow.request.pretty_host}  {result['format']}  {result['model'] or '?'}  "
        f"calls: {', '.join(names) or '-'}  warnings: {', '.join(codes) or '-'}"
    )


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
