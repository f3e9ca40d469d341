"""What `--help` says after the options: the formats and their paths, the scenarios, the X-Fake-* request
headers and their values, the faults, the other routes. Built from the package's own tables (SCRIPTS,
FAULT_HELP, ENCODINGS, ...), so a scenario or fault added there shows up here without an edit."""

from __future__ import annotations

import re
import textwrap

from .bodies import FORMAT_SCENARIOS
from .faults import CHUNKINGS, FAULT_HELP, FAULTS, FRAMINGS
from .renderers import FORMATS, WIRE_FORMATS
from .request import STREAMED_UNLESS_FALSE
from .scenarios import SCENARIOS, SCRIPTS
from .wire import ENCODINGS

# Every request header the provider reads, as (values, meaning). A test checks the sources read no other.
REQUEST_HEADERS: dict[str, tuple[str, str]] = {
    "X-Fake-Delay": ("SECONDS (0 to 60)", "seconds between events (default: --delay)"),
    "X-Fake-Encoding": ("|".join(ENCODINGS), "compress the body (Content-Encoding), each event flushed"),
    "X-Fake-Chunking": (
        "|".join(CHUNKINGS),
        "each event also cut inside `data:`, inside characters and between CR and LF, a write a piece",
    ),
    "X-Fake-Framing": ("|".join(FRAMINGS), "length: a Content-Length body; chunked (the default): chunks"),
    "X-Fake-Fault": ("|".join(FAULTS), "make the delivery go wrong (the faults below)"),
    "X-Fake-Size": (
        "BYTES (up to 16 GiB)",
        "the size of huge-event's event (default 100 MB), of bomb's decoded line (default 256 MiB)",
    ),
    "X-Fake-Drip-Bytes": ("BYTES", "drip: how many bytes go one per write (default: all)"),
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
        lines = [lead, *textwrap.wrap(text, _WIDTH, initial_indent=indent, subsequent_indent=indent)]
    else:
        lines = textwrap.wrap(text, _WIDTH, initial_indent=lead.ljust(_COLUMN), subsequent_indent=indent)
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


def epilog() -> str:
    """The text after the options in `--help`, one section a table."""
    lines = ['formats, by POST path (the scenario is the body\'s "model", or {scenario} in the path):']
    for fmt in FORMATS:
        lines += _item(fmt, _paths(fmt))
    lines.append("")
    lines.append("scenarios (served by every format unless it says otherwise):")
    for name in SCENARIOS:
        lines += _item(name, _scenario(name))
    lines += ["", "request headers (all optional):"]
    for header, (values, meaning) in REQUEST_HEADERS.items():
        lines += _item(f"{header}: {values}", meaning)
    lines += ["", "faults (X-Fake-Fault):"]
    for name, meaning in FAULT_HELP.items():
        lines += _item(name, meaning)
    lines += [
        "",
        "other routes: GET /health, GET /v1/models (the scenarios), GET /release (lets `gated` streams go on).",
        "Streamed answers carry X-Scenario, X-Body-SHA256 and X-Decoded-SHA256 (the full body's hashes, as",
        "sent and decoded) and X-Received-Credentials-SHA256 (a hash of the API keys that arrived).",
    ]
    return "\n".join(lines)
