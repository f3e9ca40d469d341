"""toolcall-lens: watch streamed LLM responses pass through mitmproxy, rebuild every tool call by identity,
and flag streams that naive accumulators would have got wrong. The traffic is never delayed or changed,
unless asked: ``toolcall_lens_inject`` sends clients hostile stream shapes on purpose (a test bench), and
``toolcall_lens_repair`` makes streams safe for fragile clients.

    mitmdump -s addon.py --mode reverse:https://api.openai.com@8081     (then OPENAI_BASE_URL=http://127.0.0.1:8081/v1)
    mitmweb -s addon.py

Each LLM flow gets ``flow.metadata["toolcall_lens"]`` (the result, as the CLI prints it), a one-line
``flow.comment``, a marker when a warning was raised, its body kept for dumps, and a log line; mitmweb
shows it in the "toolcall-lens" content view, growing while the stream runs. Stored flows lose their
API keys as soon as the request has gone out. Commands: ``toolcall_lens.report @all``,
``toolcall_lens.export @marked /tmp/llm.jsonl``.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import time
from collections.abc import Sequence
from datetime import UTC, datetime

import orjson
from mitmproxy import command, contentviews, ctx, exceptions, hooks, http
from mitmproxy import flow as mflow
from mitmproxy import types as mtypes

from accumulator import (
    STRATEGIES,
    StreamAccumulator,
    analyze,
    analyze_http_error,
    analyze_message,
    classify_exchange,
    failure_result,
    sniff_format,
)
from accumulator.assembly import DEFAULT_MAX_ARGUMENT_CHARS, DEFAULT_MAX_CALLS
from accumulator.decoding import supported as encoding_supported
from accumulator.detect import SNIFF_BYTES, STREAM_CONTENT_TYPES, path_format, sniff_message
from accumulator.echo import DEFAULT_INDEX_SIZE, ObservedCalls
from accumulator.report import format_view, summary_line
from accumulator.rewrite import INJECTIONS, REPAIRS, StreamRewriter
from accumulator.rewrite import supported as rewrites_for
from accumulator.stream import DEFAULT_MAX_DECODED_BYTES

logger = logging.getLogger("toolcall_lens")

METADATA_KEY = "toolcall_lens"


class StreamWatch:
    """The stream callable of one flow: feeds the accumulator, keeps the body, returns every chunk as is.

    It must never raise (mitmproxy would drop the chunk): a failure inside the analysis is recorded,
    analysis of this flow stops, and the bytes keep flowing.
    """

    __slots__ = (
        "accumulator",
        "body_cap",
        "chunks",
        "failure",
        "format",
        "inner",
        "kept",
        "next_progress",
        "on_progress",
        "progress_every",
        "seen",
    )

    def __init__(
        self,
        accumulator: StreamAccumulator,
        format: str | None,
        body_cap: int,
        inner=None,
        on_progress=None,
        progress_every: float = 0.0,
    ) -> None:
        self.accumulator = accumulator
        self.on_progress = on_progress  # called with the watch, at most every ``progress_every`` seconds
        self.progress_every = progress_every
        self.next_progress = 0.0
        self.format = format
        self.body_cap = body_cap  # bytes of body kept for the flow; 0 keeps none
        self.inner = inner  # a stream callable another addon set before us, still honoured
        self.chunks: list[bytes] = []
        self.kept = 0
        self.seen = 0
        self.failure: str | None = None

    def __call__(self, chunk: bytes) -> bytes:
        if self.inner is not None:
            chunk = self.inner(chunk)
        try:
            if chunk:
                self.seen += len(chunk)
                if self.kept < self.body_cap:
                    room = self.body_cap - self.kept
                    self.chunks.append(chunk if len(chunk) <= room else chunk[:room])
                    self.kept += min(len(chunk), room)
                if self.failure is None:
                    now = time.time()
                    self.accumulator.feed(chunk, now)
                    if self.on_progress is not None and now >= self.next_progress:
                        self.next_progress = now + self.progress_every
                        self.on_progress(self)
        except Exception as exc:  # noqa: BLE001 - the chunk must reach the client whatever happened
            self.failure = _describe(exc)
        return chunk

    def finish(self) -> tuple[dict | None, bytes]:
        """The result (None: not an LLM stream after all) and the kept body. Never raises."""
        try:
            if self.failure is None:
                if self.seen > self.kept and self.body_cap:
                    self.accumulator.note(
                        "body-truncated",
                        f"the flow keeps the first {self.kept} of {self.seen} bytes (toolcall_lens_body_cap)",
                        kept=self.kept,
                        seen=self.seen,
                    )
                result = self.accumulator.finish(time.time())
            else:
                result = failure_result(self._format_name(), self.failure, nbytes=self.seen)
        except Exception as exc:  # noqa: BLE001
            result = failure_result(self._format_name(), _describe(exc), nbytes=self.seen)
        return result, b"".join(self.chunks)

    def _format_name(self) -> str:
        return self.accumulator.format or self.format or "unknown"


class RewriteWatch:
    """The stream callable of a flow whose stream is rewritten (``toolcall_lens_inject`` / ``_repair``).

    The upstream's bytes feed ``upstream`` (what the provider sent) and the rewriter; the rewriter's
    pieces go to ``client``, a StreamWatch (what the client gets: its body kept, its analysis the flow's
    result), and to the client. Never raises: if rewriting fails, the bytes pass as they came.
    """

    __slots__ = ("client", "failure", "inner", "rewriter", "upstream", "upstream_failure")

    def __init__(self, upstream: StreamAccumulator, rewriter: StreamRewriter, client: StreamWatch) -> None:
        self.upstream = upstream
        self.rewriter = rewriter
        self.client = client
        # A stream callable another addon set before us sees the upstream's bytes, as it would without us.
        self.inner, client.inner = client.inner, None
        self.failure: str | None = None  # the rewriting failed: the bytes pass as they come
        self.upstream_failure: str | None = None  # only the upstream's analysis failed: rewriting goes on

    @property
    def accumulator(self) -> StreamAccumulator:
        return self.client.accumulator

    @property
    def body_cap(self) -> int:
        return self.client.body_cap

    def __call__(self, chunk: bytes) -> list[bytes]:
        if self.inner is not None:
            chunk = self.inner(chunk)
        if self.failure is not None:
            return [chunk] if chunk else []
        try:
            if chunk:
                if self.upstream_failure is None:
                    try:
                        self.upstream.feed(chunk, time.time())
                    except Exception as exc:  # noqa: BLE001 - held fragments must still leave in order
                        self.upstream_failure = _describe(exc)
                pieces = self.rewriter.feed(chunk)
            else:  # the normal end: whatever is still held goes now
                pieces = self.rewriter.finish()
            for piece in pieces:
                self.client(piece)
            return pieces  # never an empty piece: to mitmproxy an empty chunk ends a chunked body
        except Exception as exc:  # noqa: BLE001 - the bytes must reach the client whatever happened
            self.failure = _describe(exc)
            return [chunk] if chunk else []

    def finish(self) -> tuple[dict | None, bytes]:
        """The client's result, with what was rewritten and how the upstream's stream compares. Never raises."""
        result, body = self.client.finish()
        try:
            upstream = self.upstream.finish(time.time()) if self.upstream_failure is None else None
            report = self.rewriter.report()
            if self.failure is not None:
                report["failure"] = self.failure
            if self.upstream_failure is not None:
                report["upstream_failure"] = self.upstream_failure
            if result is not None and upstream is not None:
                report["upstream"] = {
                    "calls_same": _calls(upstream) == _calls(result),
                    "complete": upstream["complete"],
                    "warnings": list(dict.fromkeys(w["code"] for w in upstream["warnings"])),
                    "compatibility": {name: v["verdict"] for name, v in upstream["compatibility"].items()},
                }
            if result is not None:
                result["rewrite"] = report
        except Exception as exc:  # noqa: BLE001
            if result is not None:
                result["rewrite"] = {"failure": _describe(exc)}
        return result, body


def _calls(result: dict) -> list:
    return [
        [(c["id"], c["name"], c["arguments"]) for c in choice["tool_calls"]] for choice in result["choices"]
    ]


class ToolcallLens:
    def __init__(self) -> None:
        self.watches: dict[str, StreamWatch] = {}  # flow id -> its stream callable, until the flow ends
        self.observed = ObservedCalls()  # calls reconstructed from recent responses, to check echoes
        # flow id -> its request's echo warnings, until the flow is annotated
        self.echo_warnings: dict[str, list[dict]] = {}
        self.export_fd: int | None = None  # the toolcall_lens_jsonl file, opened for appending

    def load(self, loader) -> None:
        loader.add_option(
            "toolcall_lens_marker",
            str,
            ":warning:",
            "Marker set on LLM flows with a warning of severity 'warning' (an emoji shortcode); empty: none.",
        )
        loader.add_option(
            "toolcall_lens_body_cap",
            int,
            16 * 1024 * 1024,
            "Bytes of each streamed LLM response body kept on the flow (for mitmweb and -w dumps); 0: none.",
        )
        loader.add_option(
            "toolcall_lens_event_cap",
            int,
            8 * 1024 * 1024,
            "Largest single stream event analysed, in bytes; a larger one is dropped with a warning.",
        )
        loader.add_option(
            "toolcall_lens_decoded_cap",
            int,
            DEFAULT_MAX_DECODED_BYTES,
            "Bytes of each LLM response body analysed (after decompression); the rest passes unread, with a warning.",
        )
        loader.add_option(
            "toolcall_lens_max_calls",
            int,
            DEFAULT_MAX_CALLS,
            "Tool calls rebuilt per LLM response; later ones are counted, not kept, with a warning.",
        )
        loader.add_option(
            "toolcall_lens_argument_cap",
            int,
            DEFAULT_MAX_ARGUMENT_CHARS,
            "Argument characters kept per tool call; the rest is not kept and the call is marked truncated.",
        )
        loader.add_option(
            "toolcall_lens_inject",
            Sequence[str],
            [],
            f"Hostile shapes sent to clients on purpose, a test bench: any of {', '.join(INJECTIONS)}. "
            "LLM streams only; off by default.",
        )
        loader.add_option(
            "toolcall_lens_repair",
            Sequence[str],
            [],
            f"Streams made safe for fragile clients: any of {', '.join(REPAIRS)}. LLM streams only; off by default.",
        )
        loader.add_option(
            "toolcall_lens_hosts",
            Sequence[str],
            [],
            "Hosts whose LLM traffic is watched (glob patterns such as *.openai.azure.com); empty: all.",
        )

        loader.add_option(
            "toolcall_lens_strategies",
            Sequence[str],
            list(STRATEGIES),
            f"Hazard strategies replayed on every stream (default: all: {', '.join(STRATEGIES)}).",
        )

        loader.add_option(
            "toolcall_lens_redact",
            bool,
            True,
            "Replace API keys (Authorization, x-api-key, api-key, x-goog-api-key, ?key=, AWS signatures) "
            "in stored flows once the request has gone out.",
        )
        loader.add_option(
            "toolcall_lens_jsonl",
            str,
            "",
            "Append one JSON record per finished LLM flow to this file (result, URL, time, status, duration).",
        )
        loader.add_option(
            "toolcall_lens_live_updates",
            int,
            2,
            "Updates per second of a running LLM stream's flow (mitmweb shows the calls as they grow); 0: none.",
        )
        loader.add_option(
            "toolcall_lens_index_size",
            int,
            DEFAULT_INDEX_SIZE,
            "Tool calls remembered from recent responses (least recently used out), to check the client's echoes.",
        )
        loader.add_option(
            "toolcall_lens_stall_seconds",
            int,
            10,
            "A silence between two events of a stream longer than this many seconds gives a 'stalled' note; 0: never.",
        )

    def configure(self, updated) -> None:
        if "toolcall_lens_body_cap" in updated and ctx.options.toolcall_lens_body_cap < 0:
            raise exceptions.OptionsError("toolcall_lens_body_cap must be 0 or more bytes")
        if "toolcall_lens_live_updates" in updated and ctx.options.toolcall_lens_live_updates < 0:
            raise exceptions.OptionsError("toolcall_lens_live_updates must be 0 or more")
        if "toolcall_lens_jsonl" in updated:
            self._open_export(ctx.options.toolcall_lens_jsonl)
        if "toolcall_lens_index_size" in updated:
            if ctx.options.toolcall_lens_index_size < 0:
                raise exceptions.OptionsError("toolcall_lens_index_size must be 0 or more")
            self.observed.size = ctx.options.toolcall_lens_index_size
        if "toolcall_lens_stall_seconds" in updated and ctx.options.toolcall_lens_stall_seconds < 0:
            raise exceptions.OptionsError("toolcall_lens_stall_seconds must be 0 or more")
        for name in ("toolcall_lens_event_cap", "toolcall_lens_decoded_cap", "toolcall_lens_max_calls"):
            if name in updated and getattr(ctx.options, name) < 1:
                raise exceptions.OptionsError(f"{name} must be at least 1")
        if "toolcall_lens_argument_cap" in updated and ctx.options.toolcall_lens_argument_cap < 0:
            raise exceptions.OptionsError("toolcall_lens_argument_cap must be 0 or more characters")
        if "toolcall_lens_strategies" in updated:
            unknown = [name for name in ctx.options.toolcall_lens_strategies if name not in STRATEGIES]
            if unknown:
                raise exceptions.OptionsError(
                    f"toolcall_lens_strategies: unknown {unknown}; known: {', '.join(STRATEGIES)}"
                )
        for name, known in (("toolcall_lens_inject", INJECTIONS), ("toolcall_lens_repair", REPAIRS)):
            if name in updated:
                unknown = [value for value in getattr(ctx.options, name) if value not in known]
                if unknown:
                    raise exceptions.OptionsError(f"{name}: unknown {unknown}; known: {', '.join(known)}")
        if "toolcall_lens_hosts" in updated:
            for pattern in ctx.options.toolcall_lens_hosts:
                if not pattern or any(c.isspace() for c in pattern):
                    raise exceptions.OptionsError(f"toolcall_lens_hosts: bad host pattern {pattern!r}")

    def request(self, flow: http.HTTPFlow) -> None:
        # Read-only: the echoes of earlier calls in the conversation, checked against what was streamed.
        if path_format(flow.request.path) is None or not self._host_watched(flow) or not len(self.observed):
            return
        try:
            found = self.observed.check(flow.request.get_content(strict=False))
        except Exception as exc:  # noqa: BLE001 - a failed check must not touch the request
            logger.warning("toolcall-lens: echo check failed: %s", _describe(exc))
            return
        if found:
            self.echo_warnings[flow.id] = found
            self._link_earlier_flows(flow, found)

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        # The request has gone out: from now on the stored flow needs no key (and -w must never see one).
        if ctx.options.toolcall_lens_redact:
            redact_credentials(flow)
        kind = self._classify(flow)
        if kind is None or not kind[1] or flow.response.status_code >= 400:
            # Not an LLM stream: no callable, no cost. A JSON response, or an error page where a stream
            # was asked for, is small and buffered by mitmproxy as usual: it is read in `response`.
            return
        format = kind[0]  # None: a stream on a path we do not know, recognised from its first bytes
        accumulator = StreamAccumulator(
            format,
            request=flow.request.get_content(strict=False),
            max_event_bytes=ctx.options.toolcall_lens_event_cap,
            max_decoded_bytes=ctx.options.toolcall_lens_decoded_cap,
            max_calls=ctx.options.toolcall_lens_max_calls,
            max_argument_chars=ctx.options.toolcall_lens_argument_cap,
            encoding=flow.response.headers.get("content-encoding"),
            strategies=tuple(ctx.options.toolcall_lens_strategies),
            # The clock the timing facts count from: when mitmproxy had the whole request.
            started_at=flow.request.timestamp_end or flow.request.timestamp_start,
            stall_seconds=ctx.options.toolcall_lens_stall_seconds or None,
        )
        # With mitmproxy's own store_streamed_bodies on, it keeps the body itself: no second copy.
        own_copy = "store_streamed_bodies" in ctx.options and ctx.options.store_streamed_bodies
        body_cap = 0 if own_copy else ctx.options.toolcall_lens_body_cap
        inner = flow.response.stream if callable(flow.response.stream) else None
        rate = ctx.options.toolcall_lens_live_updates
        progress = (lambda w: self._progress(flow, w)) if rate else None
        watch = StreamWatch(accumulator, format, body_cap, inner, progress, 1.0 / rate if rate else 0.0)
        rewriting = self._rewriter(flow, format)
        if rewriting is not None:
            watch = self._rewrite_watch(flow, format, watch, rewriting)
        self.watches[flow.id] = watch
        flow.response.stream = watch

    @staticmethod
    def _rewriter(flow: http.HTTPFlow, format: str | None) -> StreamRewriter | None:
        """The rewriter the options ask for on this stream, or None (none asked, or none applies)."""
        inject, repair = ctx.options.toolcall_lens_inject, ctx.options.toolcall_lens_repair
        if not (inject or repair) or format is None:
            return None  # a stream recognised only from its bytes is watched, never rewritten
        if not rewrites_for(format) & {*inject, *repair}:
            return None
        encoding = flow.response.headers.get("content-encoding", "")
        if encoding.strip() and not encoding_supported(encoding):
            logger.info(
                "toolcall-lens: not rewriting %s: unsupported Content-Encoding %r", flow.request.url, encoding
            )
            return None
        return StreamRewriter(
            format,
            inject=inject,
            repair=repair,
            encoding=encoding or None,
            max_event_bytes=ctx.options.toolcall_lens_event_cap,
            max_calls=ctx.options.toolcall_lens_max_calls,
        )

    @staticmethod
    def _rewrite_watch(
        flow: http.HTTPFlow, format: str, watch: StreamWatch, rewriter: StreamRewriter
    ) -> RewriteWatch:
        """Wire a rewritten stream: the client's analysis sees the output; headers fit the new body."""
        headers = flow.response.headers
        upstream = watch.accumulator
        client = StreamAccumulator(
            format,
            request=flow.request.get_content(strict=False),
            strategies=tuple(ctx.options.toolcall_lens_strategies),
            max_event_bytes=ctx.options.toolcall_lens_event_cap,
            max_decoded_bytes=ctx.options.toolcall_lens_decoded_cap,
            max_calls=ctx.options.toolcall_lens_max_calls,
            max_argument_chars=ctx.options.toolcall_lens_argument_cap,
            encoding=None if rewriter.decodes else headers.get("content-encoding"),
            started_at=flow.request.timestamp_end or flow.request.timestamp_start,
            stall_seconds=ctx.options.toolcall_lens_stall_seconds or None,
        )
        watch.accumulator = client
        if rewriter.decodes:
            headers.pop("content-encoding", None)  # the rewritten body goes out decoded
        if "content-length" in headers:
            # The body's length changes; an HTTP/1 client then reads it in chunks.
            del headers["content-length"]
            if flow.request.http_version.startswith("HTTP/1") and "chunked" not in headers.get(
                "transfer-encoding", ""
            ):
                headers["transfer-encoding"] = "chunked"
        return RewriteWatch(upstream, rewriter, watch)

    def response(self, flow: http.HTTPFlow) -> None:
        watch = self.watches.pop(flow.id, None)
        if watch is not None:
            self._finish_stream(flow, watch)
            return
        kind = self._classify(flow)
        if kind is None or kind[0] is None:
            return
        format, streamed = kind
        status = flow.response.status_code
        if streamed and status < 400:
            return  # a stream another addon answered or that bypassed the callable: nothing to read here
        try:
            body = flow.response.get_content(strict=False) or b""
            if status >= 400:
                result = analyze_http_error(
                    body,
                    format,
                    status=status,
                    reason=flow.response.reason,
                    content_type=flow.response.headers.get("content-type", ""),
                )
            else:
                result = analyze_message(body, format, request=flow.request.get_content(strict=False))
        except Exception as exc:  # noqa: BLE001
            result = failure_result(format, _describe(exc), streamed=False)
        self._annotate(flow, result)

    def error(self, flow: http.HTTPFlow) -> None:
        # An upstream or client abort fires only this hook; the stream's own end marker says whether
        # the stream was complete (the sync openai SDK disconnects right after [DONE]).
        if ctx.options.toolcall_lens_redact and flow.response is None:
            redact_credentials(flow)  # no response headers came: this is the first safe moment
        watch = self.watches.pop(flow.id, None)
        if watch is not None:
            self._finish_stream(flow, watch)
        self.echo_warnings.pop(flow.id, None)

    def done(self) -> None:
        self.watches.clear()
        self.echo_warnings.clear()
        self._open_export("")

    @command.command("toolcall_lens.report")
    def report(self, flows: Sequence[mflow.Flow]) -> str:
        """One line per LLM flow: time, host, format, model, calls, warnings."""
        lines = []
        for flow in flows:
            result = flow.metadata.get(METADATA_KEY) if isinstance(flow, http.HTTPFlow) else None
            if result is None:
                continue
            when = datetime.fromtimestamp(flow.request.timestamp_start, UTC).strftime("%H:%M:%S")
            names = [c["name"] or "?" for choice in result["choices"] for c in choice["tool_calls"]]
            codes = list(dict.fromkeys(w["code"] for w in result["warnings"]))
            lines.append(
                f"{when}  {flow.request.pretty_host}  {result['format']}  {result['model'] or '?'}  "
                f"calls: {', '.join(names) or '-'}  warnings: {', '.join(codes) or '-'}"
            )
        return "\n".join(lines) or "no LLM flows"

    @command.command("toolcall_lens.export")
    def export(self, flows: Sequence[mflow.Flow], path: mtypes.Path) -> None:
        """Write the LLM flows among these to a JSONL file, one record each."""
        with open(os.path.expanduser(path), "wb") as f:
            for flow in flows:
                result = flow.metadata.get(METADATA_KEY) if isinstance(flow, http.HTTPFlow) else None
                if result is not None:
                    f.write(_record(flow, result))
        logger.info("toolcall-lens: exported LLM flows to %s", path)

    def _open_export(self, path: str) -> None:
        if self.export_fd is not None:
            os.close(self.export_fd)
            self.export_fd = None
        if path:
            try:
                self.export_fd = os.open(
                    os.path.expanduser(path), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600
                )
            except OSError as exc:
                raise exceptions.OptionsError(
                    f"toolcall_lens_jsonl: cannot open {path}: {exc.strerror}"
                ) from None

    def _progress(self, flow: http.HTTPFlow, watch: StreamWatch) -> None:
        """A running stream's calls so far, on the flow, and mitmweb told to show them."""
        snapshot = watch.accumulator.snapshot()
        if snapshot is None:
            return
        flow.metadata["toolcall_lens_live"] = snapshot
        names = [c["name"] or "?" for choice in snapshot["choices"] for c in choice["tool_calls"]]
        flow.comment = (
            f"{snapshot['format']} {snapshot['model'] or '?'}: streaming, {snapshot['events']} events"
            + (f", {len(names)} call(s) so far: {', '.join(names)}" if names else "")
        )
        ctx.master.addons.trigger(hooks.UpdateHook([flow]))

    def _classify(self, flow: http.HTTPFlow) -> tuple[str | None, bool] | None:
        # The path and content type come first and cost a few string checks: other traffic pays no more.
        if flow.response is None:
            return None
        content_type = flow.response.headers.get("content-type", "").lower()
        if path_format(flow.request.path) is None and not content_type.startswith(STREAM_CONTENT_TYPES):
            return None
        if not self._host_watched(flow):
            return None
        return classify_exchange(flow.request.path, content_type, flow.request.get_content(strict=False))

    @staticmethod
    def _host_watched(flow: http.HTTPFlow) -> bool:
        hosts = ctx.options.toolcall_lens_hosts
        return not hosts or any(
            fnmatch.fnmatch(host, pattern)
            for pattern in hosts
            for host in (flow.request.host, flow.request.pretty_host)
        )

    def _link_earlier_flows(self, flow: http.HTTPFlow, found: list[dict]) -> None:
        """Give each earlier flow whose calls were echoed wrong a back-reference, while it is in the view."""
        view = ctx.master.addons.get("view")
        if view is None:
            return
        changed = []
        for warning in found:
            earlier = view.get_by_id(warning.get("earlier_flow") or "")
            if earlier is None or earlier is flow:
                continue
            links = earlier.metadata.setdefault("toolcall_lens_echoes", [])
            if not any(link["flow_id"] == flow.id for link in links):
                links.append({"flow_id": flow.id, "code": warning["code"], "ids": []})
                earlier.comment = f"{earlier.comment} | echoed wrong by flow {flow.id}".lstrip(" |")
                changed.append(earlier)
            next(link for link in links if link["flow_id"] == flow.id)["ids"].append(warning.get("id"))
        if changed:
            ctx.master.addons.trigger(hooks.UpdateHook(changed))

    def _finish_stream(self, flow: http.HTTPFlow, watch: StreamWatch) -> None:
        result, body = watch.finish()
        if watch.body_cap and flow.response is not None:
            flow.response.raw_content = body
        if result is not None:  # None: a stream of unknown format that was no LLM stream we read
            self._annotate(flow, result)

    def _annotate(self, flow: http.HTTPFlow, result: dict) -> None:
        echoes = self.echo_warnings.pop(flow.id, None)
        if echoes:
            result["warnings"].extend(echoes)
        self.observed.record(result, flow.id)
        flow.metadata.pop("toolcall_lens_live", None)
        flow.metadata[METADATA_KEY] = result
        line = summary_line(result)
        flow.comment = line
        loud = any(w["severity"] == "warning" for w in result["warnings"])
        if loud and ctx.options.toolcall_lens_marker:
            flow.marked = ctx.options.toolcall_lens_marker
        logger.log(
            logging.WARNING if loud else logging.INFO,
            "toolcall-lens %s %s: %s",
            flow.request.method,
            flow.request.pretty_url,
            line,
        )
        if self.export_fd is not None:
            try:
                # One write of one whole line on an O_APPEND descriptor: a reader never sees half a record.
                os.write(self.export_fd, _record(flow, result))
            except OSError as exc:
                logger.warning("toolcall-lens: cannot append to %s: %s", ctx.options.toolcall_lens_jsonl, exc)


def _record(flow: http.HTTPFlow, result: dict) -> bytes:
    """One JSONL line: the result with the URL, time, status and duration of its flow."""
    response = flow.response
    end = (response.timestamp_end if response else None) or (flow.error.timestamp if flow.error else None)
    record = {
        "flow_id": flow.id,
        "method": flow.request.method,
        "url": flow.request.pretty_url,
        "time": datetime.fromtimestamp(flow.request.timestamp_start, UTC).isoformat(),
        "status": response.status_code if response else None,
        "duration": round(end - flow.request.timestamp_start, 6) if end else None,
        "error": flow.error.msg if flow.error else None,
        "result": result,
    }
    return orjson.dumps(record) + b"\n"


# Where API keys travel: headers, and query parameters (Gemini's ?key=, presigned AWS URLs).
SECRET_HEADERS = (
    "authorization",
    "proxy-authorization",
    "x-api-key",
    "api-key",
    "x-goog-api-key",
    "x-amz-security-token",
)
SECRET_QUERY = ("key", "api-key", "api_key", "X-Amz-Signature", "X-Amz-Credential", "X-Amz-Security-Token")
REDACTED = "…[redacted]"


def redact_credentials(flow: http.HTTPFlow) -> None:
    """Replace the credentials of a stored request by a marker that keeps their first few characters."""
    headers = flow.request.headers
    for name in SECRET_HEADERS:
        values = headers.get_all(name)
        if values:
            headers.set_all(name, [_mask(value) for value in values])
    query = flow.request.query
    for name in SECRET_QUERY:
        values = query.get_all(name)
        if values:
            query.set_all(name, [_mask(value) for value in values])


def _mask(value: str) -> str:
    if value.endswith(REDACTED):
        return value
    scheme, space, secret = value.partition(" ")
    if not space or len(scheme) > 24:  # no auth scheme: the whole value is the secret
        scheme, secret = "", value
    else:
        scheme += " "
    keep = min(6, len(secret) // 4)
    return f"{scheme}{secret[:keep]}{REDACTED}"


class ToolcallLensView(contentviews.Contentview):
    """mitmweb's and ``mitmdump --flow-detail 3``'s view of an LLM response: the calls by identity, the
    warnings, the verdicts, and each failing strategy's calls beside the right ones. It runs the core on
    the body (flows from a dump made without the addon too); the addon's result, when there is one, also
    brings the clock and the client's echoes."""

    name = "toolcall-lens"

    def prettify(self, data: bytes, metadata: contentviews.Metadata) -> str:
        flow = metadata.flow
        result = flow.metadata.get(METADATA_KEY) if flow is not None else None
        if result is None:
            kind = _llm_kind(data, metadata)
            if kind is None:
                raise ValueError("not an LLM response toolcall-lens reads")
            request = flow.request.get_content(strict=False) if isinstance(flow, http.HTTPFlow) else None
            format, streamed = kind
            if streamed:
                result = analyze(data, format, request=request)
            else:
                result = analyze_message(data, format, request=request)
            if result is None:
                raise ValueError("not an LLM stream toolcall-lens reads")
        return format_view(result)

    def render_priority(self, data: bytes, metadata: contentviews.Metadata) -> float:
        if isinstance(metadata.http_message, http.Request):
            return -1
        return 3 if _llm_kind(data, metadata) is not None else -1


def _llm_kind(data: bytes, metadata: contentviews.Metadata) -> tuple[str, bool] | None:
    flow = metadata.flow
    if isinstance(flow, http.HTTPFlow) and flow.response is not None:
        kind = classify_exchange(
            flow.request.path,
            flow.response.headers.get("content-type"),
            flow.request.get_content(strict=False),
        )
        if kind is not None and kind[0] is not None:
            return kind
    format = sniff_format(data[:SNIFF_BYTES])
    if format is not None:
        return format, True
    format = sniff_message(data) if data[:1] == b"{" else None
    return (format, False) if format is not None else None


def _describe(exc: BaseException) -> str:
    try:
        return f"{type(exc).__name__}: {exc}"[:500]
    except Exception:  # noqa: BLE001 - even a broken __str__ must not escape
        return type(exc).__name__


contentviews.add(ToolcallLensView)
addons = [ToolcallLens()]
