"""The providers' `--help`, run as the docs run them: every format, scenario, X-Fake-* header (with its
values) and fault is listed, and (fake_provider only) every WebSocket protocol with its scenarios, read
from the package's own tables so the test cannot drift from them; and h2_provider.py's help is its whole
description, saying what its clients need."""

from __future__ import annotations

import ast
import re
import subprocess
import sys

import fake_provider as fp
import pytest
from fake_provider.faults import CHUNKINGS, FAULT_HELP, FRAMINGS
from fake_provider.scenarios import SCRIPTS, WS_SCRIPTS
from fake_provider.usage import REQUEST_HEADERS, WS_REQUEST_HEADERS, epilog
from fake_provider.websocket import WS_FAULT_HELP, WS_FAULTS
from fake_provider.ws_protocols import WS_PROTOCOLS
from streams import ROOT

SCRIPTS_DIR = ROOT / "scripts"
SAFETY_TIMEOUT = 30  # only so a hung process fails the test instead of hanging it
# The header values the package defines as tables; each must be listed beside its header.
HEADER_VALUES = {
    "X-Fake-Encoding": fp.ENCODINGS,
    "X-Fake-Chunking": CHUNKINGS,
    "X-Fake-Framing": FRAMINGS,
    "X-Fake-Fault": fp.FAULTS,
}


def help_of(script: str) -> str:
    done = subprocess.run(
        [sys.executable, str(SCRIPTS_DIR / script), "--help"],
        cwd=ROOT,
        check=False,
        capture_output=True,
        text=True,
        timeout=SAFETY_TIMEOUT,
    )
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    return done.stdout


def words(text: str) -> str:
    return " ".join(text.split())


def entries(text: str) -> dict[str, str]:
    """The two-column lines of a help text: {left column: the text beside it, continuation lines joined}."""
    found: dict[str, str] = {}
    key = None
    for line in text.splitlines():
        if re.match(r"  \S", line):
            key, _, rest = re.split(r"( {2,}|$)", line.strip(), maxsplit=1)
            found[key] = rest.strip()
        elif key is not None and line.startswith("    ") and line.strip():
            found[key] = words(found[key] + " " + line)
        else:
            key = None
    return found


def assert_lists_what_a_request_can_ask_for(text: str, websocket: bool = True) -> None:
    listed = entries(text)
    for fmt in fp.FORMATS:
        assert fmt in listed, fmt
    for name in fp.SCENARIOS:
        served = [fmt for fmt in fp.FORMATS if name in fp.FORMAT_SCENARIOS[fmt]]
        assert words(SCRIPTS[name]["about"]) in listed[name]
        if len(served) < len(fp.FORMATS):  # a scenario only some formats serve says which
            assert all(fmt in listed[name] for fmt in served), (name, listed[name])
    for header in REQUEST_HEADERS:
        [key] = [key for key in listed if key.startswith(header + ": ")]
        values = key.partition(": ")[2].split("|")
        assert set(HEADER_VALUES.get(header, ())) <= set(values), (header, values)
    for fault, meaning in FAULT_HELP.items():
        assert listed[fault] == words(meaning)
    if websocket:
        assert_lists_the_websocket_protocols(listed)
    else:
        assert not set(listed) & ({*WS_PROTOCOLS, *WS_SCRIPTS, *WS_FAULTS} - set(fp.FORMATS))


def assert_lists_the_websocket_protocols(listed: dict[str, str]) -> None:
    for header in WS_REQUEST_HEADERS:
        assert any(key.startswith(header + ": ") for key in listed), header
    [fault_key] = [key for key in listed if key.startswith("X-Fake-Fault: ")]
    assert set(WS_FAULTS) <= set(fault_key.partition(": ")[2].split("|"))
    for fault, meaning in WS_FAULT_HELP.items():
        assert listed[fault] == words(meaning)
    for protocol in WS_PROTOCOLS.values():
        listed_scenarios = listed[protocol.name].rpartition("scenarios: ")[2].split(", ")
        assert listed_scenarios == list(protocol.scenarios), protocol.name
    for name, script in WS_SCRIPTS.items():
        assert words(script["about"]) in listed[name] and script["only"] in listed[name]


def test_the_header_table_names_every_header_the_provider_reads():
    # Headers are read by their lower-case names; the help's table must hold each one.
    sources = [*(SCRIPTS_DIR / "fake_provider").rglob("*.py"), SCRIPTS_DIR / "h2_provider.py"]
    read = {name for path in sources for name in re.findall(r"[\"'](x-fake-[a-z-]+)[\"']", path.read_text())}
    assert read and read == {header.lower() for header in (*REQUEST_HEADERS, *WS_REQUEST_HEADERS)}


def test_the_check_can_fail():
    text = epilog()
    assert entries("x:\n  -h, --help  help\n  X-Fake-Delay: SECONDS\n                      meaning\n") == {
        "-h, --help": "help",
        "X-Fake-Delay: SECONDS": "meaning",
    }
    assert_lists_what_a_request_can_ask_for(text)
    for missing in ("  gated ", "  index-collision ", "|zstd", "  json-429 ", "  ws-drop ", ", live-cancel"):
        start = text.index(missing)
        with pytest.raises((AssertionError, KeyError, ValueError)):
            assert_lists_what_a_request_can_ask_for(text[:start] + text[start + len(missing) :])


def test_fake_provider_help_lists_every_format_scenario_header_and_fault():
    text = help_of("fake_provider")
    assert text.startswith("usage: fake_provider")
    assert_lists_what_a_request_can_ask_for(text)


def test_h2_provider_help_is_whole_and_says_its_clients_need_http2():
    text = help_of("h2_provider.py")
    docstring = ast.get_docstring(ast.parse((SCRIPTS_DIR / "h2_provider.py").read_text()))
    *description, command_line = docstring.split("\n\n")
    assert command_line.startswith(".venv/bin/python scripts/h2_provider.py")
    for paragraph in description:  # whole: no paragraph cut short
        assert words(paragraph) in words(text)
    for needed in ("HTTP/2", "ALPN", "self-signed", "--ssl-insecure"):
        assert needed in text
    assert_lists_what_a_request_can_ask_for(text, websocket=False)
