"""What `--help` says after the options: the formats and their paths, the scenarios, the X-Fake-* request
headers and their values, the faults, the WebSocket protocols, the other routes. Built from the package's own tables (SCRIPTS,
FAULT_HELP, ENCODINGS, ...), so a scenario or fault added there shows up here without an edit."""

from __future__ import annotations

import re
import textwrap

from .agent import ABOUT as AGENT_ABOUT
from .agent import AGENT
from .bodies import FORMAT_SCENARIOS
from .faults import CHUNKINGS, FAULT_HELP, FAULTS, FRAMINGS
from .renderers import FORMATS, WIRE_FORMATS
from .request import STREAMED_UNLESS_FALSE
from .scenarios import SCENARIOS, SCRIPTS, WS_SCRIPTS
from .websocket import MAX_FRAGMENT, WS_FAULT_HELP, WS_FAULTS
from .wire import ENCODINGS
from .ws_protocols import WS_PROTOCOLS

# Every request header the provider reads, as (values, meaning). A test checks the sources read no other.
REQUEST_HEADERS: dict[str, tuple[str, str]] = {
    "X-Fake-Delay": ("SECONDS (0 to 60)", "seconds between events (default: --delay)"),
    "X-Fake-Encoding": ("|".join(ENCODINGS), "compress the body (Content-Encoding), each event flushed"),
    "X-Fake-Chunking": (
        "|".join(CHUNKINGS),
        "each event also cut inside `data:`, inside characters and between CR and LF, a write a piece",
    ),
    "X-Fake-Framing": (
        "|".join(FRAMINGS),
        "length: a Content-Length body; chunked: chunks (a stream's default; a message's when asked)",
    ),
    "X-Fake-Fault": ("|".join(FAULTS), "make the delivery go wrong (the faults below)"),
    "X-Fake-Size": (
        "BYTES (up to 16 GiB)",
        "the size of huge-event's event (default 100 MB), of bomb's decoded line (default 256 MiB)",
    ),
    "X-Fake-Drip-Bytes": ("BYTES", "drip: how many bytes go one per write (default: all)"),
}
# Read on WebSocket upgrade requests only (and X-Fake-Delay, X-Fake-Fault above).
WS_REQUEST_HEADERS: dict[str, tuple[str, str]] = {
    "X-Fake-Fragment": (
        f"BYTES (1 to {MAX_FRAGMENT})",
        "(WebSocket) each message in frames of at most this many bytes (text cut between characters)",
    ),
    "X-Fake-Binary": ("1|0", "(WebSocket) Responses and Realtime events in binary frames, not text"),
    "X-Fake-Deflate": ("1|0", "(WebSocket) 0 declines permessage-deflate (default: accepted when offered)"),
}

_WIDTH = 110
_COLUMN = 22  # where the meanings start
_SIZE = re.compile(r"(\d) (MB|MiB|GiB)")


def _item(name: str, text: str) -> list[str]:
    """``name`` in the left column, ``text`` wrapped beside it (on the next line when the name is long)."""
    lead = "  " + name
    indent = " " * _COLUMN
    # A size stays on one line with its unit: wrapped with a no-break space, which textwrap does not split.
    text = _SIZE.sub("\\1\N{NO-BREAK SPACE}\\2", text)
    if len(lead) >= _COLUMN - 1:
        lines = [
            lead,
            *textwrap.wrap(
                text, _WIDTH, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False
            ),
        ]
    else:
        lines = textwrap.wrap(
            text, _WIDTH, initial_indent=lead.ljust(_COLUMN), subsequent_indent=indent, break_on_hyphens=False
        )
    return [line.replace("\N{NO-BREAK SPACE}", " ") for line in lines]


def _paths(fmt: str) -> str:
    wire = WIRE_FORMATS[fmt]
    if "{model}" not in wire.route:
        if fmt in STREAMED_UNLESS_FALSE:
            return f'{wire.route} (any prefix), streamed unless the body says "stream": false'
        return f'{wire.route} (any prefix), streamed when the body says "stream": true'
    streamed = wire.route.format(model="{scenario}", verb=wire.verbs[0])
    separator = wire.route[wire.route.index("{verb}") - 1]
    if wire.array_frame is not None:
        streamed += "?alt=sse (without ?alt=sse: one JSON array)"
    return f"{streamed}, or {separator}{wire.verbs[1]} not streamed"


def _scenario(name: str) -> str:
    served = [fmt for fmt in FORMATS if name in FORMAT_SCENARIOS[fmt]]
    only = f"{', '.join(served)} only: " if len(served) < len(FORMATS) else ""
    return only + SCRIPTS[name]["about"]


def epilog(websocket: bool = True) -> str:
    """The text after the options in `--help`, one section a table; without the WebSocket ones for a
    provider that serves none (h2_provider.py)."""
    headers = REQUEST_HEADERS
    faults = FAULT_HELP
    if websocket:
        headers = {**headers, **WS_REQUEST_HEADERS}
        headers["X-Fake-Fault"] = ("|".join((*FAULTS, *WS_FAULTS)), headers["X-Fake-Fault"][1])
        faults = {**faults, **WS_FAULT_HELP}
    lines = ['formats, by POST path (the scenario is the body\'s "model", or {scenario} in the path):']
    for fmt in FORMATS:
        lines += _item(fmt, _paths(fmt))
    lines.append("")
    lines.append("scenarios (served by every format unless it says otherwise):")
    for name in SCENARIOS:
        lines += _item(name, _scenario(name))
    lines += _item(AGENT, AGENT_ABOUT)
    lines += ["", "request headers (all optional):"]
    for header, (values, meaning) in headers.items():
        lines += _item(f"{header}: {values}", meaning)
    lines += ["", "faults (X-Fake-Fault):"]
    for name, meaning in faults.items():
        lines += _item(name, meaning)
    if websocket:
        lines += _websocket()
    lines += [
        "",
        "other routes: GET /health, GET /v1/models (the scenarios), GET /release (lets `gated` streams go on),",
        "GET /agent (every answer of the `agent` scenario: the calls sent, the tool results and the echoed calls received).",
        "Streamed answers carry X-Scenario, X-Body-SHA256 and X-Decoded-SHA256 (the full body's hashes, as",
        "sent and decoded) and X-Received-Credentials-SHA256 (a hash of the API keys that arrived).",
    ]
    return "\n".join(lines)


def _websocket() -> list[str]:
    """The WebSocket protocols and their own scenarios."""
    lines = [
        "",
        "WebSocket, on the same port (GET with Upgrade: websocket; X-Fake-Delay, X-Fake-Fault and the",
        "WebSocket headers on the upgrade request), by path:",
    ]
    for protocol in WS_PROTOCOLS.values():
        lines += _item(protocol.name, f"{protocol.paths}; scenarios: {', '.join(protocol.scenarios)}")
    lines += ["", "WebSocket-only scenarios:"]
    for name, steps in WS_SCRIPTS.items():
        lines += _item(name, f"{steps['only']} only: {steps['about']}")
    return lines
