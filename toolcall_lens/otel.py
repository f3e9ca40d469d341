"""The OpenTelemetry export: one GenAI span per LLM response, sent over OTLP/HTTP to a collector.

``span_of(result, facts, content)`` is the mapping, pure: a result (``docs/result.md``) and what its flow
says (times, the upstream's address, the requested model) become a span's name, times, attributes (the
GenAI semantic conventions, ``gen_ai.*``; the project's own findings under ``toolcall_lens.*``) and
events (one per warning). ``SpanExport`` sends them with the OpenTelemetry SDK, imported only when an
export is asked for (the ``otel`` extra): batched, on the SDK's own thread, never through this proxy
(its HTTP session ignores ``HTTP_PROXY``), failures counted and never raised. An agent session is one
trace: each turn's span is a child of the session's span, which is sent when the export closes (the
proxy's shutdown, the end of a CLI run), spanning the turns it saw.

Attribute names are spelled here once (the GenAI conventions are still in development:
``docs/proxy.md#opentelemetry``).
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from dataclasses import dataclass, field

import orjson

from accumulator import formats

logger = logging.getLogger("toolcall_lens")

INSTALL_HINT = "pip install -e '.[otel]' (opentelemetry-sdk and opentelemetry-exporter-otlp-proto-http)"
CACHE_WRITE = "gen_ai.usage.cache_creation.input_tokens"  # the released registry's name; Phoenix reads it
FAILED_STREAM = ("http-error", "provider-error", "truncated-stream", "internal-error")  # error.type
LOG_EVERY = 60.0  # seconds between two log lines about failing exports
_NS = 1_000_000_000


@dataclass(frozen=True, slots=True)
class FlowFacts:
    """What a span needs from the flow: when the request went out and the response ended (epoch seconds),
    the upstream's address, and the model the request asked for."""

    start: float
    end: float | None = None
    host: str | None = None
    port: int | None = None
    request_model: str | None = None


@dataclass(slots=True)
class SpanData:
    name: str
    start_ns: int
    end_ns: int
    attributes: dict
    events: list[tuple[str, dict]] = field(default_factory=list)
    error: str | None = None  # error.type: the span's status is an error


def provider_name(format: str, host: str | None) -> str:
    """``gen_ai.provider.name``: the format's provider, or the host's where it says more (Azure, Vertex)."""
    host = (host or "").lower()
    if host.endswith(".openai.azure.com"):
        return "azure.ai.openai"
    if host.endswith("aiplatform.googleapis.com"):
        return "gcp.vertex_ai"
    try:
        return formats.get(format).genai_provider or "unknown"
    except ValueError:
        return "unknown"


def span_of(result: dict, facts: FlowFacts, content: bool = False) -> SpanData:
    """The span of one response. ``content``: tool call arguments and text go in too (off: names, ids and
    sizes only)."""
    try:
        wire = formats.get(result["format"])
        operation = wire.genai_operation
    except ValueError:
        operation = "chat"
    model = facts.request_model or result.get("model") or ""
    usage = result["usage"]
    timing = result.get("timing") or {}
    attributes: dict = {
        "gen_ai.operation.name": operation,
        "gen_ai.provider.name": provider_name(result["format"], facts.host),
        "gen_ai.request.stream": bool(result.get("streamed")),
        "gen_ai.response.finish_reasons": [c["finish_reason"] or "" for c in result["choices"]],
        "toolcall_lens.format": result["format"],
        "toolcall_lens.complete": bool(result["complete"]),
    }
    optional = {
        "gen_ai.request.model": facts.request_model,
        "gen_ai.response.model": result.get("model"),
        "gen_ai.response.id": result.get("response_id"),
        "gen_ai.usage.input_tokens": usage["input"],
        "gen_ai.usage.output_tokens": usage["output"],
        "gen_ai.usage.cache_read.input_tokens": usage["cache_read"],
        CACHE_WRITE: usage["cache_write"],
        "gen_ai.usage.reasoning.output_tokens": usage["reasoning"],
        "gen_ai.response.time_to_first_chunk": timing.get("time_to_first_byte"),
        "server.address": facts.host,
        "server.port": facts.port if facts.host else None,
    }
    attributes.update({k: v for k, v in optional.items() if v is not None})
    session = result.get("session")
    if session:
        attributes["gen_ai.conversation.id"] = session["id"]
        attributes["toolcall_lens.session.turn"] = session["turn"]
        attributes["toolcall_lens.session.by"] = session["by"]  # how it was told; "replay": a person's
    cost = result.get("cost")
    if cost:
        attributes["gen_ai.usage.cost"] = cost["total"]  # Langfuse's name for a call's cost
        attributes["toolcall_lens.cost.usd"] = cost["total"]
    warnings = result["warnings"]
    attributes["toolcall_lens.warnings"] = [w["code"] for w in warnings]
    attributes["toolcall_lens.severities"] = [w["severity"] for w in warnings]
    for name, verdict in (result.get("compatibility") or {}).items():
        attributes[f"toolcall_lens.compatibility.{name}"] = verdict["verdict"]
    if result.get("evidence"):
        attributes["toolcall_lens.evidence"] = orjson.dumps(result["evidence"]).decode()
    calls = [call for choice in result["choices"] for call in choice["tool_calls"]]
    attributes["toolcall_lens.tool_calls"] = len(calls)
    attributes["gen_ai.output.messages"] = orjson.dumps(_output_messages(result, content)).decode()
    events = [
        (
            "toolcall_lens.warning",
            {"code": w["code"], "severity": w["severity"], "message": w["message"][:1000]},
        )
        for w in warnings
    ]
    start_ns = int(facts.start * _NS)
    end = facts.end if facts.end is not None and facts.end >= facts.start else facts.start
    error = next((w["code"] for w in warnings if w["code"] in FAILED_STREAM), None)
    if error is not None:
        attributes["error.type"] = error
    return SpanData(f"{operation} {model}".strip(), start_ns, int(end * _NS), attributes, events, error)


def _output_messages(result: dict, content: bool) -> list[dict]:
    """``gen_ai.output.messages``: one assistant message per choice, its calls as tool-call parts (ids and
    names always; arguments, text and reasoning only with ``content``)."""
    messages = []
    for choice in result["choices"]:
        parts: list[dict] = []
        if content and choice["reasoning"]:
            parts.append({"type": "reasoning", "content": choice["reasoning"]})
        if content and choice["text"]:
            parts.append({"type": "text", "content": choice["text"]})
        for call in choice["tool_calls"]:
            part = {"type": "tool_call", "id": call["id"], "name": call["name"] or ""}
            if content:  # a custom tool's input is text, whatever it looks like
                part["arguments"] = call["arguments"] if call.get("custom") else _arguments(call["arguments"])
            else:
                size = (
                    call["arguments"] if type(call["arguments"]) is str else orjson.dumps(call["arguments"])
                )
                part["arguments_size"] = len(size)
            parts.append(part)
        messages.append({"role": "assistant", "finish_reason": choice["finish_reason"] or "", "parts": parts})
    return messages


def _arguments(arguments):
    """A call's arguments as an object where they parse (the conventions expect one), else as sent."""
    if type(arguments) is not str:
        return arguments
    try:
        return orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return arguments


def traces_url(endpoint: str) -> str:
    """The collector's OTLP/HTTP traces URL from its base (``http://127.0.0.1:4318``) or the full URL."""
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith("/v1/traces") else endpoint + "/v1/traces"


def _id(text: str, bits: int) -> int:
    """A stable id from a session's id: its turns land in one trace, in every run that sees it."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[: bits // 8], "big") or 1


@dataclass(slots=True)
class _Session:
    start_ns: int
    end_ns: int
    turns: int = 0
    attributes: dict = field(default_factory=dict)


class SpanExport:
    """Spans to one collector. ``emit`` (on the proxy's event loop: it builds the span, the SDK batches and
    sends it on its own thread), ``status`` (what was sent and lost), ``close`` (the sessions' spans, then
    what is pending, within ``flush_seconds``). Raises ImportError (with ``INSTALL_HINT``) without the SDK."""

    def __init__(
        self,
        endpoint: str,
        headers: dict[str, str] | None = None,
        content: bool = False,
        timeout: float = 5.0,
    ) -> None:
        try:
            import requests
            from opentelemetry.exporter.otlp.proto.http import Compression
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError as exc:
            raise ImportError(f"the OpenTelemetry export needs its extra: {INSTALL_HINT} ({exc})") from None
        from importlib.metadata import version

        self.url = traces_url(endpoint)
        self.content = content
        session = requests.Session()
        session.trust_env = False  # never through HTTP_PROXY (often this very proxy) nor a .netrc
        ids, counting = _sdk_parts()
        self.counter = counting(
            OTLPSpanExporter(
                endpoint=self.url,
                headers=headers or {},
                timeout=timeout,
                compression=Compression.Gzip,
                session=session,
            )
        )
        self.ids = ids()
        self.provider = TracerProvider(
            resource=Resource.create(
                {"service.name": "toolcall-lens", "service.version": version("toolcall-lens")}
            ),
            id_generator=self.ids,
            shutdown_on_exit=False,
        )
        self.provider.add_span_processor(BatchSpanProcessor(self.counter, schedule_delay_millis=1000))
        self.tracer = self.provider.get_tracer("toolcall_lens", version("toolcall-lens"))
        self.sessions: dict[str, _Session] = {}
        self.emitted = 0
        self._logged_failures = 0
        self._logged_at = 0.0
        self.closed = False

    def emit(self, result: dict, facts: FlowFacts) -> None:
        if self.closed:
            return
        from opentelemetry import trace
        from opentelemetry.trace import (
            NonRecordingSpan,
            SpanContext,
            SpanKind,
            Status,
            StatusCode,
            TraceFlags,
        )

        data = span_of(result, facts, self.content)
        context = None
        session = result.get("session")
        if session:
            key = session["id"]
            parent = SpanContext(
                _id(key, 128), _id("span " + key, 64), is_remote=True, trace_flags=TraceFlags(1)
            )
            context = trace.set_span_in_context(NonRecordingSpan(parent))
            known = self.sessions.get(key)
            if known is None:
                known = self.sessions[key] = _Session(data.start_ns, data.end_ns)
                if len(self.sessions) > 10_000:  # bounded: the oldest session's span is sent now
                    self._send_session(*next(iter(self.sessions.items())))
                    del self.sessions[next(iter(self.sessions))]
            known.start_ns = min(known.start_ns, data.start_ns)
            known.end_ns = max(known.end_ns, data.end_ns)
            known.turns += 1
            known.attributes = {
                k: data.attributes[k]
                for k in ("gen_ai.provider.name", "server.address", "server.port", "gen_ai.request.model")
                if k in data.attributes
            }
        span = self.tracer.start_span(
            data.name,
            context=context,
            kind=SpanKind.CLIENT,
            start_time=data.start_ns,
            attributes=data.attributes,
        )
        for name, attributes in data.events:
            span.add_event(name, attributes, timestamp=data.end_ns)
        if data.error is not None:
            span.set_status(Status(StatusCode.ERROR, data.error))
        span.end(end_time=data.end_ns)
        self.emitted += 1
        self._log_failures()

    def status(self) -> str:
        counter = self.counter
        line = (
            f"OTLP export to {self.url}: {self.emitted} span(s) made, {counter.exported} sent, "
            f"{counter.failed} lost"
        )
        if counter.last_error:
            line += f" (last failure: {counter.last_error})"
        return line + f"; {len(self.sessions)} session span(s) to send at shutdown"

    def close(self, flush_seconds: float = 5.0) -> None:
        """The sessions' spans, then everything pending, sent within ``flush_seconds``; the rest is lost,
        counted. Never raises, never blocks longer."""
        if self.closed:
            return
        self.closed = True
        for key, session in list(self.sessions.items()):
            self._send_session(key, session)
        self.sessions.clear()
        done = threading.Event()

        def shut() -> None:
            try:
                self.provider.force_flush(int(flush_seconds * 1000))
                self.provider.shutdown()
            except Exception as exc:  # noqa: BLE001 - an exporter failing on its way out
                self.counter.last_error = str(exc)
            done.set()

        threading.Thread(target=shut, name="toolcall-lens-otlp-close", daemon=True).start()
        if not done.wait(flush_seconds + 1.0):
            logger.warning(
                "toolcall-lens: the OTLP export did not finish within %.0f s: pending spans lost",
                flush_seconds,
            )
        if self.counter.failed:
            logger.warning("toolcall-lens: %s", self.status())

    def _send_session(self, key: str, session: _Session) -> None:
        from opentelemetry.trace import SpanKind

        self.ids.preset(_id(key, 128), _id("span " + key, 64))
        attributes = {
            **session.attributes,
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.conversation.id": key,
            "toolcall_lens.session.turns": session.turns,
        }
        span = self.tracer.start_span(
            f"invoke_agent {key}", kind=SpanKind.INTERNAL, start_time=session.start_ns, attributes=attributes
        )
        span.end(end_time=session.end_ns)

    def _log_failures(self) -> None:
        failed = self.counter.failed
        now = time.monotonic()
        if failed > self._logged_failures and now - self._logged_at >= LOG_EVERY:
            self._logged_failures, self._logged_at = failed, now
            logger.warning("toolcall-lens: %s", self.status())


def _sdk_parts():
    """The export's two SDK classes, made once the SDK is imported (it is optional): ids that are random
    except where a session's span must have its stable ones, and an exporter that counts what it sent and
    lost (the SDK reports success to no one)."""
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
    from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator

    class Ids(IdGenerator):
        def __init__(self) -> None:
            self._random = RandomIdGenerator()
            self._trace: int | None = None
            self._span: int | None = None

        def preset(self, trace_id: int, span_id: int) -> None:
            self._trace, self._span = trace_id, span_id

        def generate_trace_id(self) -> int:
            value, self._trace = self._trace, None
            return value if value is not None else self._random.generate_trace_id()

        def generate_span_id(self) -> int:
            value, self._span = self._span, None
            return value if value is not None else self._random.generate_span_id()

    class Counting(SpanExporter):
        def __init__(self, inner: SpanExporter) -> None:
            self.inner = inner
            self.exported = 0
            self.failed = 0
            self.last_error: str | None = None

        def export(self, spans):
            try:
                result = self.inner.export(spans)
            except Exception as exc:  # noqa: BLE001 - the SDK's thread must go on
                result = SpanExportResult.FAILURE
                self.last_error = f"{type(exc).__name__}: {exc}"
            if result is SpanExportResult.SUCCESS:
                self.exported += len(spans)
            else:
                self.failed += len(spans)
                self.last_error = (
                    self.last_error or "the collector refused the spans or did not answer in time"
                )
            return result

        def shutdown(self) -> None:
            self.inner.shutdown()

        def force_flush(self, timeout_millis: int = 30_000) -> bool:
            return self.inner.force_flush(timeout_millis)

    return Ids, Counting
