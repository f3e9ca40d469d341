"""The addon's options, declared once (``add_options`` in ``load``), and the frozen ``Settings`` parsed
from them once per change (in ``configure``): every flow reads those, never the options themselves."""

from __future__ import annotations

import difflib
import os
from collections.abc import Sequence
from dataclasses import dataclass

from mitmproxy import exceptions, flowfilter

from accumulator import DEFAULT_LIMITS, STRATEGIES, Limits
from accumulator.cost import PriceFileError, Prices, parse_price_file
from accumulator.echo import DEFAULT_INDEX_BYTES, DEFAULT_INDEX_SIZE
from accumulator.rewrite import INJECTIONS, REPAIRS
from accumulator.sessions import DEFAULT_LOOP_AFTER

# name, type, default, help; the name is "toolcall_lens_" + name.
OPTIONS: tuple[tuple[str, type, object, str], ...] = (
    ("marker", str, ":warning:",
     "Marker set on LLM flows with a warning of severity 'warning' (an emoji shortcode); empty: none."),
    ("body_cap", int, 16 * 1024 * 1024,
     "Bytes of each streamed LLM response body kept on the flow (for mitmweb and -w dumps); 0: none."),
    ("event_cap", int, DEFAULT_LIMITS.max_event_bytes,
     "Largest single stream event analysed, in bytes; a larger one is dropped with a warning."),
    ("decoded_cap", int, DEFAULT_LIMITS.max_decoded_bytes,
     ("Bytes of each LLM response body analysed (after decompression); the rest passes unread, with a "
      "warning. A compressed request that decodes past it is not read (its result's evidence says so).")),
    ("max_calls", int, DEFAULT_LIMITS.max_calls,
     "Tool calls rebuilt per LLM response; later ones are counted, not kept, with a warning."),
    ("argument_cap", int, DEFAULT_LIMITS.max_argument_chars,
     "Argument characters kept per tool call; the rest is not kept and the call is marked truncated."),
    ("inject", Sequence[str], [],
     (f"Hostile shapes sent to clients on purpose, a test bench: any of {', '.join(INJECTIONS)}. "
      "LLM streams only; off by default.")),
    ("repair", Sequence[str], [],
     f"Streams made safe for fragile clients: any of {', '.join(REPAIRS)}. LLM streams only; off by default."),
    ("rewrite_filter", str, "",
     ("Only LLM flows matching this mitmproxy filter expression are rewritten by inject and repair (e.g. "
      "'~d api.anthropic.com': the stream a gateway gets, not the one it sends); empty: every LLM flow.")),
    ("hosts", Sequence[str], [],
     "Hosts whose LLM traffic is watched (glob patterns such as *.openai.azure.com); empty: all."),
    ("strategies", Sequence[str], list(STRATEGIES),
     f"Hazard strategies replayed on every stream (default: all: {', '.join(STRATEGIES)})."),
    ("redact", bool, True,
     ("Replace API keys (Authorization, x-api-key, api-key, x-goog-api-key, ?key=, AWS signatures, the "
      "Realtime key subprotocol) in stored flows once the request has gone out.")),
    ("jsonl", str, "",
     "Append one JSON record per finished LLM flow to this file (result, URL, time, status, duration)."),
    ("live_updates", int, 2,
     "Updates per second of a running LLM stream's flow (mitmweb shows the calls as they grow); 0: none."),
    ("index_size", int, DEFAULT_INDEX_SIZE,
     "Tool calls remembered from recent responses (least recently used out), to check the client's echoes."),
    ("index_bytes", int, DEFAULT_INDEX_BYTES,
     ("Argument characters the tool calls remembered for echo checks may hold (least recently used out "
      "first; calls matched by position, Gemini's and Ollama's, as much again): big arguments, such as a file's content, are "
      "remembered in fewer calls.")),
    ("websocket_keep", int, 1000,
     ("Messages kept on an LLM WebSocket flow once analysed; older ones are dropped (counted, with a note) "
      "so that a long connection holds bounded memory. 0: keep every message.")),
    ("stall_seconds", int, 10,
     "A silence between two events of a stream longer than this many seconds gives a 'stalled' note; 0: never."),
    ("loop_after", int, DEFAULT_LOOP_AFTER,
     "An agent session making the same call (same name, same arguments) this many times gets a 'tool-call-loop' warning."),
    ("prices", str, "",
     ("A JSON price file, model name -> {input_mtok, output_mtok, cache_read_mtok, cache_write_mtok} (USD per "
      "million tokens), used before the genai-prices library's own prices for the models it names.")),
    ("worker", bool, True,
     ("Analyse HTTP streams, and WebSocket connections whose path names their format, in a worker "
      "process: the proxy's thread only hands each chunk or message on, and a flow's end waits for its "
      "result there without stopping other flows. Rewritten streams and connections are analysed in the "
      "proxy as before.")),
    ("otlp_endpoint", str, "",
     ("Send one OpenTelemetry GenAI span per LLM response to this OTLP/HTTP collector (e.g. "
      "http://127.0.0.1:4318); empty: no export. Needs the 'otel' extra.")),
    ("otlp_headers", Sequence[str], [],
     "Headers sent with each OTLP export, as name=value (e.g. authorization=Basic ...), for backends that need auth."),
    ("otlp_content", bool, False,
     "Put tool call arguments and text into the exported spans (off: names, ids and sizes only)."),
)  # fmt: skip
PREFIX = "toolcall_lens_"


def add_options(loader) -> None:
    for name, kind, default, help in OPTIONS:
        loader.add_option(PREFIX + name, kind, default, help)


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything a flow needs from the options, checked and built once."""

    limits: Limits
    body_cap: int
    marker: str
    hosts: tuple[str, ...]
    inject: tuple[str, ...]
    repair: tuple[str, ...]
    rewrite_filter: flowfilter.TFilter | None  # which flows inject and repair apply to; None: every one
    redact: bool
    live_every: float  # seconds between live updates of a running stream; 0: none
    index_size: int
    index_bytes: int
    jsonl: str
    websocket_keep: int
    loop_after: int
    prices: Prices
    otlp_endpoint: str
    otlp_headers: tuple[tuple[str, str], ...]
    otlp_content: bool
    worker: bool

    def rewrites(self, flow) -> bool:
        """Whether inject or repair asks to rewrite this flow's stream or connection."""
        if not (self.inject or self.repair):
            return False
        return self.rewrite_filter is None or bool(self.rewrite_filter(flow))


def check_names(options) -> None:
    """OptionsError for a ``toolcall_lens_*`` name that is not one of ours (a typo in ``--set``).

    mitmproxy keeps a ``--set`` name it does not know (``options.deferred``) for an addon loaded later, and
    says nothing: only this addon can tell that a name with its prefix is wrong."""
    ours = [name for name, *_ in OPTIONS]
    for name in getattr(options, "deferred", {}):
        short = name.removeprefix(PREFIX)
        if name.startswith(PREFIX) and short not in ours:
            close = difflib.get_close_matches(short, ours, n=1)  # without the prefix, which every name shares
            hint = f"did you mean {PREFIX}{close[0]}?" if close else "--options lists them"
            raise exceptions.OptionsError(f"{name}: no such option of toolcall-lens; {hint}")


def read_prices(path: str) -> Prices:
    """The prices to use: a price file's first where one is named. PriceFileError says what is wrong."""
    if not path:
        return Prices()
    try:
        with open(os.path.expanduser(path), "rb") as file:
            content = file.read()
    except OSError as exc:
        raise PriceFileError(f"cannot read {path}: {exc.strerror}") from None
    return Prices(parse_price_file(content, path), path, content)


def parse(options) -> Settings:
    """The settings these options give; OptionsError names the first one that is wrong."""
    check_names(options)
    get = lambda name: getattr(options, PREFIX + name)
    for name in ("body_cap", "live_updates", "index_size", "index_bytes", "stall_seconds", "websocket_keep"):
        if get(name) < 0:
            raise exceptions.OptionsError(f"{PREFIX}{name} must be 0 or more")
    for name in ("event_cap", "decoded_cap", "max_calls"):
        if get(name) < 1:
            raise exceptions.OptionsError(f"{PREFIX}{name} must be at least 1")
    if get("loop_after") < 2:
        raise exceptions.OptionsError(f"{PREFIX}loop_after must be at least 2 (a call made once is no loop)")
    if get("argument_cap") < 0:
        raise exceptions.OptionsError(f"{PREFIX}argument_cap must be 0 or more characters")
    for name, known in (("strategies", STRATEGIES), ("inject", INJECTIONS), ("repair", REPAIRS)):
        unknown = [value for value in get(name) if value not in known]
        if unknown:
            raise exceptions.OptionsError(f"{PREFIX}{name}: unknown {unknown}; known: {', '.join(known)}")
    for pattern in get("hosts"):
        if not pattern or any(c.isspace() for c in pattern):
            raise exceptions.OptionsError(f"{PREFIX}hosts: bad host pattern {pattern!r}")
    headers = []
    for item in get("otlp_headers"):
        name, equals, value = item.partition("=")
        if not equals or not name.strip():
            raise exceptions.OptionsError(f"{PREFIX}otlp_headers: {item!r} is not name=value")
        headers.append((name.strip(), value.strip()))
    endpoint = get("otlp_endpoint").strip()
    if endpoint and not endpoint.startswith(("http://", "https://")):
        raise exceptions.OptionsError(f"{PREFIX}otlp_endpoint: {endpoint!r} is no http:// or https:// URL")
    rate = get("live_updates")
    expression = get("rewrite_filter").strip()
    try:
        rewrite_filter = flowfilter.parse(expression) if expression else None
    except ValueError as exc:
        raise exceptions.OptionsError(f"{PREFIX}rewrite_filter: {exc}") from None
    try:
        prices = read_prices(get("prices"))
    except PriceFileError as exc:
        raise exceptions.OptionsError(f"{PREFIX}prices: {exc}") from None
    return Settings(
        limits=Limits(
            strategies=tuple(get("strategies")),
            max_event_bytes=get("event_cap"),
            max_decoded_bytes=get("decoded_cap"),
            max_calls=get("max_calls"),
            max_argument_chars=get("argument_cap"),
            stall_seconds=get("stall_seconds") or None,
        ),
        body_cap=get("body_cap"),
        marker=get("marker"),
        hosts=tuple(get("hosts")),
        inject=tuple(get("inject")),
        repair=tuple(get("repair")),
        rewrite_filter=rewrite_filter,
        redact=get("redact"),
        live_every=1.0 / rate if rate else 0.0,
        index_size=get("index_size"),
        index_bytes=get("index_bytes"),
        jsonl=get("jsonl"),
        websocket_keep=get("websocket_keep"),
        loop_after=get("loop_after"),
        prices=prices,
        otlp_endpoint=endpoint,
        otlp_headers=tuple(headers),
        otlp_content=get("otlp_content"),
        worker=get("worker"),
    )
