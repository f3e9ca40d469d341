"""``toolcall-lens FILE...``: reconstruct the tool calls of captured responses.

A FILE is a raw response body as captured from the wire, a mitmproxy dump (``mitmdump -w FILE``) or a HAR
file: one result per LLM flow (HAR entry) in it, one per response of a WebSocket flow; or a WebSocket capture, JSON lines of
messages (``{"from_client": true, "text": "..."}``): one result per response. Exit status: 0 when no result has a warning of severity "warning", 1 when
one has, 2 on a usage or input error (nothing is analysed then).

``toolcall-lens run [OPTIONS] -- AGENT ARGS...`` runs an agent behind mitmdump with the addon and reports
(``toolcall_lens/run.py``).

``--inject``/``--repair`` with ``--output OUT`` rewrite one raw stream as the proxy would (a hostile
fixture for a client's own tests, or a repaired one), write it to OUT and report on what OUT holds.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import copy
import os
import re
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import cast
from urllib.parse import urlsplit

import orjson

from . import formats
from .cost import PriceFileError, Prices, parse_price_file
from .echo import ObservedCalls, add_evidence, no_evidence
from .exchange import MESSAGE, STREAM, Exchange, analyze_exchange, classify, stored_timing
from .framing import MALFORMED, parse_json
from .limits import DEFAULT_LIMITS, Limits
from .relay import Relays
from .report import format_report, results_of
from .request import decoded, request_body
from .result import add_warnings
from .rewrite import INJECTIONS, REPAIRS, StreamRewriter
from .sessions import DEFAULT_LOOP_AFTER, Sessions, asked, format_session
from .strategies import DEFAULT_STRATEGIES, STRATEGIES
from .websocket import Connection

_CHUNK = 64 * 1024
# mitmproxy dumps are tnetstrings: a length, a colon, then the flow (a dict). No response body starts so.
_DUMP_START = re.compile(rb"\d{1,12}:")


@dataclass
class Job:
    title: str
    source: dict
    body: bytes  # a stream's as sent (still encoded); a message's or an error's decoded
    exchange: Exchange
    request: dict | bytes | None
    encoding: str | None = None  # the Content-Encoding of a stream's body, decoded as the addon does
    echo_request: bytes | None = None  # a dump flow's own request: its echoes are checked, as live
    request_unreadable: str | None = None  # why a dump flow's own request could not be read (its coding)
    rewrite: dict | None = None  # what --inject/--repair did to make this body
    status: int | None = None  # a dump flow's HTTP status, reason and content type
    reason: str = ""
    content_type: str = ""
    recorded: dict | None = None  # a dump flow's result as the addon recorded it live, if it ran
    stamps: tuple | None = None  # a dump flow's timestamps: request end, response start and end
    headers: dict | None = None  # a dump flow's request headers (lower-case names): its agent session
    started: float | None = None  # a dump flow's request time
    server: str | None = None  # a dump flow's host and port (a gateway's two sides: accumulator.relay)


@dataclass
class BadLine:
    """A line of a WebSocket capture that is no message: a warning where it stood."""

    number: int
    reason: str


@dataclass
class ConnectionJob:
    """One WebSocket connection: a dump's WebSocket flow, or a capture of messages. One result per response."""

    title: str
    source: dict
    # (from_client, content, is_text, timestamp), or a BadLine, in order
    messages: list = field(default_factory=list)
    format: str | None = None
    path: str = ""
    end: float | None = None  # when the connection closed, if known
    recorded: dict | None = None  # a dump flow's connection as the addon recorded it live, if it ran
    trimmed: int = 0  # messages the addon dropped from the front of the stored flow
    started: float | None = None  # the flow's request time: a response's time when its messages are gone
    headers: dict | None = None  # a dump flow's upgrade request headers (lower-case names)


def main(argv: list[str] | None = None, *, sessions_view: bool = False) -> int:
    """``sessions_view``: ``toolcall-lens sessions FILE...``, the agent sessions of the dumps, turn by
    turn, instead of one report per response."""
    parser = argparse.ArgumentParser(
        prog="toolcall-lens sessions" if sessions_view else "toolcall-lens",
        description="Rebuild the tool calls of captured LLM responses by identity, and say what naive "
        "accumulators would have built from the same bytes.",
    )
    parser.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="a raw response body as captured, a mitmproxy dump (-w), a HAR file or a WebSocket capture",
    )
    parser.add_argument("--json", action="store_true", help='print {"results": [...]} instead of a report')
    parser.add_argument("--request", metavar="REQUEST.json", help="the request body (declared tools)")
    parser.add_argument(
        "--format",
        choices=sorted({*formats.FORMATS, *formats.WEBSOCKET_FORMATS}),
        help="the wire format of raw bodies or of a WebSocket capture (default: detected)",
    )
    parser.add_argument(
        "--strategies",
        type=_strategy_list,
        default=DEFAULT_STRATEGIES,
        metavar="NAME,...",
        help=f"hazard strategies to replay (default: all: {','.join(STRATEGIES)}; 'none' for none)",
    )
    # The caps of the addon's options of the same names (proxy.md), to re-analyse a dump as it was recorded.
    for flag, metavar, default, least, help in CAPS:
        parser.add_argument(
            flag, type=_at_least(least), default=default, metavar=metavar, help=f"{help} (default {default})"
        )
    parser.add_argument(
        "--inject",
        type=_names(INJECTIONS),
        default=(),
        metavar="NAME,...",
        help=f"rewrite the stream with these hostile shapes ({','.join(INJECTIONS)}); needs --output",
    )
    parser.add_argument(
        "--repair",
        type=_names(REPAIRS),
        default=(),
        metavar="NAME,...",
        help=f"rewrite the stream with these repairs ({','.join(REPAIRS)}); needs --output",
    )
    parser.add_argument("--output", metavar="OUT", help="where --inject/--repair write the rewritten stream")
    parser.add_argument(
        "--prices",
        metavar="PRICES.json",
        help="a price file (model -> input_mtok, output_mtok, cache_read_mtok, cache_write_mtok, USD per "
        "million tokens), used before genai-prices' own prices",
    )
    parser.add_argument(
        "--loop-after",
        type=int,
        default=DEFAULT_LOOP_AFTER,
        metavar="N",
        help=f"a session making the same call N times is a tool-call-loop (default {DEFAULT_LOOP_AFTER})",
    )
    parser.add_argument(
        "--otlp",
        metavar="URL",
        help="also send one OpenTelemetry span per response to this OTLP/HTTP collector (e.g. "
        "http://127.0.0.1:4318); needs the 'otel' extra",
    )
    parser.add_argument(
        "--otlp-content", action="store_true", help="with --otlp: put call arguments and text into the spans"
    )
    args = parser.parse_args(argv)
    if args.loop_after < 2:
        parser.error("--loop-after must be at least 2 (a call made once is no loop)")
    rewriting = bool(args.inject or args.repair)
    if rewriting != bool(args.output):
        parser.error("--inject/--repair and --output go together")

    limits = Limits(
        strategies=args.strategies,
        max_event_bytes=args.event_cap,
        max_decoded_bytes=args.decoded_cap,
        max_calls=args.max_calls,
        max_argument_chars=args.argument_cap,
    )
    try:
        request = _read_request(args.request) if args.request else None
        prices = _read_prices(args.prices) if args.prices else Prices()
        spans = _span_export(args.otlp, args.otlp_content) if args.otlp else None
    except InputError as exc:
        print(f"toolcall-lens: {exc}", file=sys.stderr)
        return 2
    # Every file that can be read is analysed; one that cannot is reported, and the exit status says so.
    jobs: list[Job | ConnectionJob] = []
    failures: list[dict] = []
    for path in args.files:
        try:
            jobs += _jobs(path, args.format, request, limits.max_decoded_bytes)
        except InputError as exc:
            print(f"toolcall-lens: {exc}", file=sys.stderr)
            failures.append({"source": {"file": path}, "error": str(exc)})
    if rewriting:
        if failures:
            return 2
        try:
            jobs = [_rewrite(jobs, args.inject, args.repair, args.output)]
        except InputError as exc:
            print(f"toolcall-lens: {exc}", file=sys.stderr)
            return 2

    # Flows in order, with one index of the calls seen so far: each request's echoes are checked against
    # the calls of the responses before it, as the addon does live.
    observed = ObservedCalls()
    relays = Relays()  # and the responses a gateway relayed, where the dump holds both of its sides
    sessions = Sessions(loop_after=args.loop_after)
    moments: list[tuple[dict, float | None, float | None, str | None]] = []  # (result, start, end, model)
    done: list[tuple[str, dict]] = []  # (title, result)
    for job in jobs:
        if isinstance(job, ConnectionJob):
            try:
                settled = _run_connection(job, limits)
            except InputError as exc:
                print(f"toolcall-lens: {exc}", file=sys.stderr)
                failures.append({"source": {"file": job.source["file"]}, "error": str(exc)})
                continue
            for _, answer in settled:
                moments.append((answer, *_response_times(job, answer), None))
                _price(prices, answer, job.source.get("url"), job.started)
                if "flow_id" in job.source:  # a dump's connection: one agent session
                    sessions.place(
                        answer, job.source["flow_id"], headers=job.headers, connection=True, time=job.started
                    )
            done += settled
            continue
        result = _run(job, limits)
        if result is None:  # a dump's stream on an unknown path that turned out to be no LLM stream
            continue
        format = job.exchange.format
        # A dump flow's own request (its turn, its model), else the --request given for a raw body.
        facts = asked(decoded(job.echo_request if job.echo_request is not None else job.request), format)
        _price(prices, result, job.source.get("url"), job.started, facts.model)
        moments.append((result, job.started, job.stamps[2] if job.stamps else None, facts.model))
        if job.server is not None and job.stamps is not None:
            relays.check(result, job.source["flow_id"], job.server, job.started, job.stamps[2])
        if job.echo_request is not None:
            if job.request_unreadable is not None:
                add_evidence(result, [], no_evidence(job.request_unreadable))
            else:
                add_evidence(result, *observed.examine(job.echo_request, format))
            sessions.place(
                result,
                job.source["flow_id"],
                headers=job.headers,
                previous_response_id=facts.previous_response_id,
                tool_results=facts.tool_results,
                time=job.started,
                replay=job.source.get("replay") == "request",
            )
            observed.record(result, job.source["flow_id"])
        done.append((job.title, result))
    results = [result for _, result in done]
    if spans is not None:
        _send_spans(spans, moments)
    if sessions_view:
        return _print_sessions(sessions, args.json, failures)
    if args.json:
        sys.stdout.buffer.write(orjson.dumps({"results": results + failures}) + b"\n")
    elif done:
        print("\n\n".join(format_report(result, title) for title, result in done))
    sys.stdout.flush()
    if failures:
        return 2
    if rewriting:
        return 0  # the rewrite was written; its warnings are what was asked for (a hostile fixture)
    failed = any(w["severity"] == "warning" for result in results for w in result["warnings"])
    return 1 if failed else 0


class InputError(Exception):
    pass


def _read_prices(path: str) -> Prices:
    try:
        with open(path, "rb") as file:
            return Prices(parse_price_file(file.read(), path), path)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from None
    except PriceFileError as exc:
        raise InputError(str(exc)) from None


def _price(
    prices: Prices, result: dict, url: str | None, started: float | None, model: str | None = None
) -> None:
    """The response's cost, as of its request's time where the dump has it (prices change)."""
    when = datetime.fromtimestamp(started, UTC) if started is not None else None
    result["cost"], note = prices.cost(result, url=url, when=when, model=model)
    if note is not None:
        result["cost_note"] = note


def _span_export(url: str, content: bool):
    """The OTLP export of this run (toolcall_lens/otel.py, imported only when asked for)."""
    if not url.startswith(("http://", "https://")):
        raise InputError(f"--otlp {url}: not an http:// or https:// URL")
    try:
        from toolcall_lens.otel import SpanExport
    except ImportError as exc:  # the addon's package beside the core, not installed
        raise InputError(f"--otlp needs the addon's package (toolcall_lens): {exc}") from None
    try:
        return SpanExport(url, content=content)
    except ImportError as exc:
        raise InputError(str(exc)) from None


def _send_spans(spans, moments: list) -> None:
    """One span per response, at the times its flow kept (a raw capture's: now), then the sessions'."""
    from toolcall_lens.otel import FlowFacts

    now = datetime.now(UTC).timestamp()
    for result, start, end, model in moments:
        url = (result.get("source") or {}).get("url")
        parts = urlsplit(url) if url else None
        begun = start if start is not None else now
        facts = FlowFacts(
            begun,
            end if end is not None else begun,
            parts.hostname if parts else None,
            parts.port or (443 if parts.scheme == "https" else 80) if parts else None,
            model,
        )
        spans.emit(result, facts)
    spans.close(flush_seconds=10.0)
    print(f"toolcall-lens: {spans.status()}", file=sys.stderr)


def _response_times(job: ConnectionJob, result: dict) -> tuple[float | None, float | None]:
    """A WebSocket response's first and last message times, from the stored messages."""
    at = _message_times(job)
    start = at(result["websocket"]["first_message"])
    return (start if start is not None else job.started), at(result["websocket"]["last_message"])


def _message_times(job: ConnectionJob):
    """A connection's message time by the message's number on the connection (both directions counted),
    from the stored messages, less those the addon trimmed; None for one no longer stored."""
    stored = [m for m in job.messages if not isinstance(m, BadLine)]
    trimmed = job.trimmed if job.recorded is not None else 0

    def at(number: int) -> float | None:
        number -= trimmed
        return stored[number - 1][3] if 0 < number <= len(stored) else None

    return at


def _print_sessions(sessions: Sessions, as_json: bool, failures: list[dict]) -> int:
    records = [sessions.record(session) for session in sessions.all()]
    if as_json:
        sys.stdout.buffer.write(orjson.dumps({"sessions": records, "failures": failures}) + b"\n")
    elif records:
        print("\n\n".join(format_session(record) for record in records))
    else:
        print(
            "toolcall-lens: no agent sessions: sessions are read from mitmproxy dumps and HAR files",
            file=sys.stderr,
        )
    if failures:
        return 2
    loud = any(record["loops"] or record["unanswered"] for record in records)
    return 1 if loud else 0


def _names(known: tuple[str, ...]):
    def parse(text: str) -> tuple[str, ...]:
        names = tuple(name.strip() for name in text.split(",") if name.strip())
        unknown = [name for name in names if name not in known]
        if unknown or not names:
            raise argparse.ArgumentTypeError(f"unknown {unknown}; known: {', '.join(known)}")
        return names

    return parse


def _rewrite(jobs: list, inject: tuple, repair: tuple, output: str) -> Job:
    """The one raw stream, rewritten as the proxy would and written to ``output``: the job of what it holds."""
    if (
        len(jobs) != 1
        or isinstance(jobs[0], ConnectionJob)
        or not jobs[0].exchange.streamed
        or "flow_id" in jobs[0].source
    ):
        raise InputError(
            "--inject/--repair rewrite one raw streamed body (not a dump or a HAR file, not a JSON response)"
        )
    job = jobs[0]
    rewriter = StreamRewriter(job.exchange.format, inject=inject, repair=repair, encoding=job.encoding)
    pieces = [
        piece
        for start in range(0, len(job.body), _CHUNK)
        for piece in rewriter.feed(job.body[start : start + _CHUNK])
    ]
    body = b"".join([*pieces, *rewriter.finish()])
    try:
        with open(output, "wb") as f:
            f.write(body)
    except OSError as exc:
        raise InputError(f"cannot write {output}: {exc.strerror or exc}") from None
    report = rewriter.report()
    source = {"file": output, "rewritten_from": job.source["file"]}
    return Job(
        f"{output} (rewritten from {job.title})",
        source,
        body,
        job.exchange,
        job.request,
        job.encoding,
        rewrite=report,
    )


# flag, metavar, default, least value, help: the caps of Limits, as the addon's options name them
# (toolcall_lens_event_cap is --event-cap; `toolcall-lens run` maps one to the other so).
CAPS = (
    ("--event-cap", "BYTES", DEFAULT_LIMITS.max_event_bytes, 1, "largest single event analysed"),
    ("--decoded-cap", "BYTES", DEFAULT_LIMITS.max_decoded_bytes, 1,
     "bytes of each body analysed after decompression, a dump flow's compressed request's too"),
    ("--max-calls", "N", DEFAULT_LIMITS.max_calls, 1, "tool calls rebuilt per response"),
    ("--argument-cap", "CHARS", DEFAULT_LIMITS.max_argument_chars, 0, "argument characters kept per call"),
)  # fmt: skip


def _at_least(least: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}")
        return value

    return parse


def _strategy_list(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    if names == ("none",):
        return ()
    unknown = [name for name in names if name not in STRATEGIES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown strategies {unknown}; known: {', '.join(STRATEGIES)}")
    return names


def _run(job: Job, limits: Limits) -> dict | None:
    result = analyze_exchange(
        job.exchange,
        job.body,
        request=job.request,
        encoding=job.encoding,
        status=job.status,
        reason=job.reason,
        content_type=job.content_type,
        limits=limits,
        chunk=_CHUNK,
    )
    if result is None:
        return None
    if job.rewrite is not None:
        result["rewrite"] = job.rewrite
    source = dict(job.source)
    if job.stamps is not None and job.exchange.streamed:
        told = stored_timing(result, job.recorded, job.stamps)
        if told is not None:
            source["timing"] = told
    return {**result, "source": source}


def _recorded(flow) -> dict | None:
    recorded = flow.metadata.get("toolcall_lens")
    return recorded if type(recorded) is dict else None


def _run_connection(job: ConnectionJob, limits: Limits) -> list[tuple[str, dict]]:
    """One WebSocket connection's results, one per response, each with its source and title.

    A dump's flow is re-analysed from its stored messages, whose timestamps are the clock (the same
    analysis the addon made live, under this run's strategies); when the addon trimmed messages from the
    stored flow, what is left cannot rebuild the responses, and the addon's record is shown as it is."""
    trimmed = job.trimmed if job.recorded is not None else 0
    if trimmed:
        results = [copy.deepcopy(r) for r in results_of(job.recorded)]
        whence: str | None = (
            f"recorded live by the addon, as it is: {trimmed} message(s) were trimmed from the stored flow, "
            "too few are left to re-analyse"
        )
    else:
        connection = Connection(job.format, path=job.path, limits=limits)
        for item in job.messages:
            if isinstance(item, BadLine):
                # On the response running, else the connection's own: moved to a result below.
                connection.warn(
                    "malformed-event",
                    f"line {item.number} of {job.source['file']} is no message: {item.reason}",
                    line=item.number,
                    ws_message=connection.number,
                )
            else:
                from_client, content, is_text, timestamp = item
                connection.message(from_client, content, is_text, now=timestamp)
        connection.finish(job.end)
        results = sorted(connection.results, key=lambda r: r["websocket"]["position"])
        _place_connection_warnings(results, connection.summary()["warnings"])
        whence = (
            "re-computed from the stored messages, their timestamps the clock"
            if "flow_id" in job.source
            else None
        )
        if not results:
            if "flow_id" not in job.source:
                said = "; ".join(w["message"] for w in connection.summary()["warnings"][:3])
                raise InputError(
                    f"{job.source['file']}: no LLM response in its {connection.number} WebSocket message(s)"
                    + (f" ({said})" if said else "")
                )
            if connection.format is not None:
                print(
                    f"toolcall-lens: {job.title}: no response on this {connection.format} WebSocket "
                    f"({connection.number} stored message(s))",
                    file=sys.stderr,
                )
    at = _message_times(job)
    out = []
    for result in results:
        position = result["websocket"]["position"]
        source = {**job.source, "position": position}
        stamp = at(result["websocket"]["first_message"])
        when = stamp if stamp is not None else job.started
        if "flow_id" in job.source and when is not None:  # a dump's flow always has its request time
            source["time"] = _iso(when)
        if whence is not None:
            source["timing"] = whence
        title = job.title + (f" at {_clock(stamp)}" if stamp is not None else "")
        out.append((f"{title}, response {position}", {**result, "source": source}))
    return out


def _place_connection_warnings(results: list[dict], warnings: list[dict]) -> None:
    """Warnings of no response (a bad message while none ran) go on the result of the response that came
    next, else the last one: the CLI prints results, not the connection. A bad line of a capture stood after
    message ``ws_message``; a bad message is that message itself, which may have begun a response."""
    if not results:
        return
    for warning in warnings:
        at = warning.get("ws_message") or 0
        after = at if "line" in warning else at - 1
        target = next((r for r in results if r["websocket"]["first_message"] > after), results[-1])
        add_warnings(target, [warning])


def _read_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None


def _read_request(path: str) -> dict:
    try:
        request = orjson.loads(_read_bytes(path))
    except orjson.JSONDecodeError as exc:
        raise InputError(f"{path} is not JSON: {exc}") from None
    if type(request) is not dict:
        raise InputError(f"{path} is not a JSON object (a request body)")
    return request


def _jobs(path: str, format: str | None, request: dict | None, max_bytes: int) -> list[Job | ConnectionJob]:
    """``max_bytes``: the most a dump flow's compressed request may decode to."""
    data = _read_bytes(path)
    if _DUMP_START.match(data):
        return _dump_jobs(path, data, request, max_bytes)
    har = _is_har(data)
    if har is not None:
        return _har_jobs(path, har, request, max_bytes)
    if _is_capture(data):
        return [_capture_job(path, data, format)]
    if format is not None and format not in formats.FORMATS:
        raise InputError(
            f"{path}: {format} is spoken over WebSockets only: --format {format} reads a WebSocket capture "
            '(JSON lines of messages, {"from_client": ..., "text": ...}; see docs/cli.md)'
        )
    exchange = classify(head=data)  # no path, no status: the bytes alone tell
    if format is not None and (exchange is None or exchange.kind != MESSAGE or exchange.format != format):
        exchange = Exchange(STREAM, format)  # --format names the stream's format
    if exchange is None:
        raise InputError(_not_a_response(path, data))
    return [Job(path, {"file": path}, data, exchange, request)]


def _is_capture(data: bytes) -> bool:
    """A WebSocket capture: its first line is a message (``from_client``) or names the connection
    (``websocket``). No NDJSON line of an LLM stream has either key."""
    first = data.lstrip(b"\xef\xbb\xbf \t\r\n").split(b"\n", 1)[0]
    obj, _ = parse_json(first)
    return type(obj) is dict and ("from_client" in obj or "websocket" in obj)


def _capture_job(path: str, data: bytes, format: str | None) -> ConnectionJob:
    """A WebSocket capture read line by line: each line a message, ``{"from_client": bool, "text": str}``
    or ``{"from_client": bool, "base64": str}`` (a binary frame), with an optional ``timestamp`` in
    seconds; a first line ``{"websocket": URL or path}`` names the upgrade request. A line that is none of
    these is a warning where it stood, never the end of the reading."""
    job = ConnectionJob(path, {"file": path})
    first = True
    for number, line in enumerate(data.split(b"\n"), 1):
        line = line.strip(b"\xef\xbb\xbf \t\r")
        if not line:
            continue
        obj, _ = parse_json(line)
        header, first = first and type(obj) is dict and "websocket" in obj and "from_client" not in obj, False
        if header:
            url = cast(dict, obj)["websocket"]  # a header is a dict
            if type(url) is str:
                parts = urlsplit(url)
                job.path = parts.path + (f"?{parts.query}" if parts.query else "")
                job.source["url"] = url
            else:
                job.messages.append(BadLine(number, '"websocket" is not a URL or path'))
            continue
        job.messages.extend(_capture_line(number, obj, line))
    if format is not None:
        if format not in formats.WEBSOCKET_FORMATS:
            raise InputError(
                f"{path} is a WebSocket capture; {format} is not spoken over WebSockets (those that are: "
                f"{', '.join(sorted(formats.WEBSOCKET_FORMATS))})"
            )
        job.format = format
    elif job.path:
        job.format = formats.websocket_format(job.path)
    return job


def _capture_line(number: int, obj, line: bytes) -> list:
    """One line of a capture: the message it holds, and a BadLine for each thing wrong with it."""
    if obj is MALFORMED or type(obj) is not dict:
        return [BadLine(number, f"not a JSON object: {line[:80].decode('utf-8', 'replace')!r}")]
    from_client = obj.get("from_client")
    if type(from_client) is not bool:
        return [BadLine(number, '"from_client" is not true or false')]
    bad = []
    timestamp = obj.get("timestamp")
    if timestamp is not None and (type(timestamp) not in (int, float)):
        bad.append(BadLine(number, '"timestamp" is not a number of seconds; left out'))
        timestamp = None
    if type(obj.get("text")) is str:
        return [*bad, (from_client, obj["text"].encode("utf-8", "surrogatepass"), True, timestamp)]
    if type(obj.get("base64")) is str:
        try:
            content = base64.b64decode(obj["base64"], validate=True)
        except (binascii.Error, ValueError):
            return [*bad, BadLine(number, '"base64" is not base64')]
        return [*bad, (from_client, content, False, timestamp)]
    return [*bad, BadLine(number, 'neither "text" (a string) nor "base64" (a string)')]


# Keys a request body has and a response does not: a FILE holding one was meant for --request.
_REQUEST_KEYS = ("messages", "contents", "input", "prompt", "tools", "toolConfig")


def _not_a_response(path: str, data: bytes) -> str:
    """Why a FILE is not read: it is empty, a request body, or else what it looks like."""
    if not data.strip():
        return f"{path} is empty"
    obj, _ = parse_json(data.strip())
    if type(obj) is dict and any(key in obj for key in _REQUEST_KEYS):
        return f"{path} is not an LLM response (it looks like a request body: pass it with --request)"
    if obj is not MALFORMED:
        kinds: dict[type, str] = {dict: "a JSON object", list: "a JSON array"}
        kind = kinds.get(type(obj), "a JSON value")
        looks = f"{kind} of no format it reads"
    elif b"\x00" in data[:4096]:
        looks = "binary data"
    else:
        looks = "text: " + repr(data[:40].decode("utf-8", "replace"))
    return (
        f"{path} is not an LLM response (it looks like {looks}); a capture of a format it does not "
        f"recognise can be named with --format ({', '.join(sorted(formats.FORMATS))})"
    )


def _dump_jobs(path: str, data: bytes, request: dict | None, max_bytes: int) -> list[Job | ConnectionJob]:
    # Only here does the CLI need mitmproxy: to read its dump format (with its version migrations).
    import io

    from mitmproxy import exceptions, http
    from mitmproxy import io as mitmproxy_io

    jobs: list[Job | ConnectionJob] = []
    # A dump cut off mid-write (mitmdump killed) still holds every flow before the cut: read those.
    flows = []
    try:
        for flow in mitmproxy_io.FlowReader(io.BytesIO(data)).stream():
            flows.append(flow)  # noqa: PERF402 - one by one: the reader raises at the cut, after the good ones
    except exceptions.FlowReadException as exc:
        if not flows:
            raise InputError(f"{path} is not a readable mitmproxy dump: {exc}") from None
        print(
            f"toolcall-lens: {path}: the dump is cut off after {len(flows)} whole flow(s) ({exc}); "
            "those were read, the rest is lost",
            file=sys.stderr,
        )
    for flow in flows:
        if isinstance(flow, http.HTTPFlow) and flow.websocket is not None:
            jobs.append(_websocket_flow_job(path, flow))
        elif isinstance(flow, http.HTTPFlow) and flow.response is not None:
            job = _flow_job(path, flow, request, max_bytes)
            if job is not None:
                jobs.append(job)
    if not jobs:
        print(f"toolcall-lens: {path}: no LLM flows with a body in this dump", file=sys.stderr)
    return jobs


def _flow_job(
    path: str,
    flow,
    request: dict | None,
    max_bytes: int,
    *,
    entry: int | None = None,
    stamps: tuple | None = None,
) -> Job | None:
    """The job of a stored HTTP flow with a response (a dump's, or a HAR file's ``entry``, ``stamps`` then
    its timings), or None when it is no LLM flow or has no body."""
    # The request as the addon reads it: decoded as its Content-Encoding says (Codex compresses its
    # own), or why it cannot be, which its result's evidence says as the addon's does.
    unreadable = None
    coding = flow.request.headers.get("content-encoding", "").strip() or None
    try:
        flow_request = request_body(flow.request.raw_content, coding, max_bytes)
    except ValueError as exc:
        flow_request, unreadable = None, str(exc)
    response = flow.response
    content_type = response.headers.get("content-type", "")
    exchange = classify(
        path=flow.request.path,
        status=response.status_code,
        content_type=content_type,
        request=flow_request,
    )
    if exchange is None:
        return None
    url = flow.request.pretty_url
    # A stream is read from its bytes as sent (as the addon saw them); a JSON response decoded.
    body = response.raw_content if exchange.streamed else response.get_content(strict=False)
    if entry is not None and exchange.streamed and not body:
        print(
            f"toolcall-lens: {path}: entry {entry} ({url}) has no body in the HAR file; export it with the "
            "responses' content (in a browser's DevTools: \"Save all as HAR with content\")",
            file=sys.stderr,
        )
        return None
    if body is None:
        print(
            f"toolcall-lens: {path}: flow {flow.id} ({url}) has no stored body; record with "
            "`mitmdump -s addon.py` (or --set store_streamed_bodies=true) to keep it",
            file=sys.stderr,
        )
        return None
    started = flow.request.timestamp_start
    source = {"file": path, "flow_id": flow.id, "url": url, "time": _iso(started)}
    if entry is not None:
        source["entry"] = entry
    if flow.is_replay:  # mitmproxy's: "request" (replayed by a person), "response" (by --server-replay)
        source["replay"] = flow.is_replay
    # The flow's short id (a HAR entry's number) and time: what a warning naming "flow d2767f4c-..." leads to.
    named = f"entry {entry}" if entry is not None else f"flow {flow.id[:8]}"
    return Job(
        f"{path}: {named} at {_clock(started)}, {flow.request.method} {url}",
        source,
        body,
        exchange,
        request if request is not None else flow_request,
        response.headers.get("content-encoding") if exchange.streamed else None,
        flow_request or b"",
        request_unreadable=unreadable,
        status=response.status_code,
        reason=response.reason,
        content_type=content_type,
        recorded=_recorded(flow),
        stamps=stamps or (flow.request.timestamp_end, response.timestamp_start, response.timestamp_end),
        headers={name.lower(): value for name, value in flow.request.headers.items()},
        started=started,
        server=f"{flow.request.host}:{flow.request.port}",
    )


def _is_har(data: bytes) -> dict | None:
    """A HAR file (a browser's DevTools, Charles, Proxyman, Fiddler, Playwright, mitmweb's own export):
    its JSON, or None. No LLM response is an object whose ``log`` holds ``entries``."""
    if not data.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{"):
        return None
    obj, _ = parse_json(data.lstrip(b"\xef\xbb\xbf"))
    if type(obj) is dict and type(obj.get("log")) is dict and type(obj["log"].get("entries")) is list:
        return obj
    return None


def _har_jobs(path: str, har: dict, request: dict | None, max_bytes: int) -> list[Job | ConnectionJob]:
    """Every LLM exchange of a HAR file, read as a dump's flows are (mitmproxy's own reader makes each
    entry a flow); an entry it cannot read is told on stderr and the others still are. A HAR keeps each
    body whole, with no time for its chunks: the timing is its entry's ``timings``."""
    from mitmproxy.io.har import request_to_flow

    jobs: list[Job | ConnectionJob] = []
    for number, entry in enumerate(har["log"]["entries"], 1):
        try:
            flow = request_to_flow(entry)
        except Exception as exc:  # noqa: BLE001 - a HAR entry can lack anything; the others are read
            why = f"{type(exc).__name__}: {exc}"
            print(
                f"toolcall-lens: {path}: entry {number} could not be read ({why}); skipped", file=sys.stderr
            )
            continue
        flow.id = f"entry-{number}"  # what a warning naming an earlier flow, or a session, calls it
        messages = entry.get("_webSocketMessages") if type(entry) is dict else None
        if flow.response is not None and flow.response.status_code == 101 and type(messages) is list:
            jobs.append(_har_websocket_job(path, number, flow, messages, str(entry["request"]["url"])))
            continue
        job = _flow_job(path, flow, request, max_bytes, entry=number, stamps=_har_stamps(entry))
        if job is not None:
            jobs.append(job)
    if not jobs:
        print(f"toolcall-lens: {path}: no LLM exchanges with a body in this HAR file", file=sys.stderr)
    return jobs


def _har_stamps(entry: dict) -> tuple[float | None, float | None, float | None] | None:
    """(request sent, response's first byte, its last) from a HAR entry's ``timings`` (milliseconds; -1 for
    a phase that does not apply; ``ssl`` is part of ``connect``), or None where they are missing."""
    timings = entry.get("timings")
    if type(timings) is not dict:
        return None
    try:
        start = datetime.fromisoformat(str(entry["startedDateTime"])).timestamp()

        def phase(key: str) -> float:
            value = timings.get(key)
            return value / 1000 if isinstance(value, (int, float)) and value > 0 else 0.0

        sent = start + sum(phase(key) for key in ("blocked", "dns", "connect", "send"))
        first = sent + phase("wait")
        return sent, first, first + phase("receive")
    except (KeyError, ValueError, TypeError):
        return None


def _har_websocket_job(path: str, entry: int, flow, messages: list, url: str) -> ConnectionJob:
    """A HAR entry's WebSocket connection (Chrome keeps its messages in ``_webSocketMessages``: ``type``
    send or receive, ``time`` in seconds, ``opcode`` 1 for text, 2 for binary as base64, ``data``), at
    its ``url`` as the entry says it (wss://)."""
    job = ConnectionJob(
        f"{path}: entry {entry}, WebSocket {url}",
        {"file": path, "entry": entry, "flow_id": flow.id, "url": url},
        format=formats.websocket_format(flow.request.path),
        path=flow.request.path,
        started=flow.request.timestamp_start,
        headers={key.lower(): value for key, value in flow.request.headers.items()},
    )
    for number, message in enumerate(messages, 1):
        kind = message.get("type") if type(message) is dict else None
        data = message.get("data") if type(message) is dict else None
        if kind not in ("send", "receive") or type(data) is not str:
            job.messages.append(BadLine(number, 'not a message ("type" send or receive, "data" a string)'))
            continue
        when = message.get("time")
        when = float(when) if type(when) in (int, float) else None
        if message.get("opcode") == 2:
            try:
                job.messages.append((kind == "send", base64.b64decode(data, validate=True), False, when))
            except (binascii.Error, ValueError):
                job.messages.append(BadLine(number, "a binary message whose data is not base64"))
            continue
        job.messages.append((kind == "send", data.encode("utf-8", "surrogatepass"), True, when))
    return job


def _websocket_flow_job(path: str, flow) -> ConnectionJob:
    """A dump's WebSocket flow: its stored messages, and the addon's record of it if it ran."""
    recorded = _recorded(flow)
    if recorded is not None and recorded.get("transport") != "websocket":
        recorded = None
    trimmed = (recorded.get("connection") or {}).get("trimmed") if recorded else 0
    url = flow.request.pretty_url
    websocket = flow.websocket
    return ConnectionJob(
        f"{path}: flow {flow.id[:8]}, WebSocket {url}",
        {"file": path, "flow_id": flow.id, "url": url, "time": _iso(flow.request.timestamp_start)},
        [(m.from_client, m.content, m.is_text, m.timestamp) for m in websocket.messages],
        formats.websocket_format(flow.request.path),
        flow.request.path,
        end=websocket.timestamp_end,
        recorded=recorded,
        trimmed=trimmed if type(trimmed) is int and trimmed > 0 else 0,
        started=flow.request.timestamp_start,
        headers={name.lower(): value for name, value in flow.request.headers.items()},
    )


def _clock(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%H:%M:%S UTC")


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat()


def run() -> None:
    if sys.argv[1:2] == ["run"]:
        # `toolcall-lens run -- AGENT`: a subcommand only as the first word (a file named `run` is read as
        # `./run`). It drives mitmproxy processes, so it lives with the addon's package, not in the core.
        from toolcall_lens.run import main as run_agent

        sys.exit(run_agent(sys.argv[2:]))
    try:
        # `toolcall-lens sessions DUMP...`: the agent sessions, turn by turn (a file named `sessions`
        # is read as `./sessions`).
        code = main(sys.argv[2:], sessions_view=True) if sys.argv[1:2] == ["sessions"] else main()
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, as command-line tools do, with the status a
        # shell gives a program SIGPIPE ended. stdout goes to /dev/null so the exit flush cannot fail.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(128 + 13)
    sys.exit(code)


if __name__ == "__main__":
    run()
