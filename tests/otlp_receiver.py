"""A real OTLP/HTTP trace receiver for the tests: the wire format a collector reads (protobuf, gzip or
not), parsed with ``opentelemetry-proto``, each span kept as a plain dict. It can be slow (answers after
``delay`` seconds) or refuse (answers ``status``).

    with Receiver() as receiver:          # listens on 127.0.0.1, a free port
        ... export to receiver.url ...    # http://127.0.0.1:PORT
        receiver.wait_for(3)              # the spans, once three came
"""

from __future__ import annotations

import gzip
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


class Receiver:
    def __init__(self, delay: float = 0.0, status: int = 200) -> None:
        self.delay = delay
        self.status = status
        self.spans: list[dict] = []  # each with "resource" (its attributes) beside the span's fields
        self.requests = 0
        self.paths: list[str] = []
        self.headers: list[dict] = []
        self._lock = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                if receiver.delay:
                    time.sleep(receiver.delay)
                with receiver._lock:
                    receiver.requests += 1
                    receiver.paths.append(self.path)
                    receiver.headers.append({k.lower(): v for k, v in self.headers.items()})
                    if receiver.status == 200:
                        receiver.spans.extend(_spans(request))
                    receiver._lock.notify_all()
                reply = ExportTraceServiceResponse().SerializeToString() if receiver.status == 200 else b"no"
                self.send_response(receiver.status)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def wait_for(self, count: int, timeout: float = 20.0) -> list[dict]:
        """The spans received, once at least ``count`` came (AssertionError after ``timeout``)."""
        with self._lock:
            if not self._lock.wait_for(lambda: len(self.spans) >= count, timeout):
                raise AssertionError(f"{len(self.spans)} span(s) came, {count} expected, in {timeout} s")
            return list(self.spans)


def _spans(request: ExportTraceServiceRequest) -> list[dict]:
    out = []
    for resource_spans in request.resource_spans:
        resource = attributes(MessageToDict(resource_spans.resource).get("attributes", []))
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                item = MessageToDict(span)
                item["attributes"] = attributes(item.get("attributes", []))
                item["events"] = [
                    {**event, "attributes": attributes(event.get("attributes", []))}
                    for event in item.get("events", [])
                ]
                item["traceId"] = span.trace_id.hex()
                item["spanId"] = span.span_id.hex()
                item["parentSpanId"] = span.parent_span_id.hex()
                item["startTimeUnixNano"] = span.start_time_unix_nano
                item["endTimeUnixNano"] = span.end_time_unix_nano
                item["resource"] = resource
                out.append(item)
    return out


def attributes(items: list[dict]) -> dict:
    """OTLP's key/value list as a dict of plain values (arrays as lists)."""
    return {item["key"]: _value(item.get("value", {})) for item in items}


def _value(value: dict):
    if "arrayValue" in value:
        return [_value(v) for v in value["arrayValue"].get("values", [])]
    for kind in ("stringValue", "boolValue", "doubleValue"):
        if kind in value:
            return value[kind]
    if "intValue" in value:
        return int(value["intValue"])
    return None
