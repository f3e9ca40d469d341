"""A wrong option at start-up, through a real mitmdump: it exits non-zero on one line that names the option,
without a Python traceback. mitmproxy keeps a ``--set`` name it does not know for addons loaded later, so
a typo in a ``toolcall_lens_*`` name would otherwise start a proxy that silently does nothing asked of it."""

from __future__ import annotations

import pytest
from lab import Process, proxy_argv

CASES = [
    (
        "toolcall_lens_injekt=interleave",
        "toolcall_lens_injekt: no such option of toolcall-lens; did you mean toolcall_lens_inject?",
    ),
    ("toolcall_lens_inject=interleaved", "toolcall_lens_inject: unknown ['interleaved']; known: interleave"),
    ("toolcall_lens_repair=serialise", "toolcall_lens_repair: unknown ['serialise']; known: serialize"),
    ("toolcall_lens_strategies=newest", "toolcall_lens_strategies: unknown ['newest']"),
    ("toolcall_lens_body_cap=-1", "toolcall_lens_body_cap must be 0 or more"),
    ("toolcall_lens_max_calls=0", "toolcall_lens_max_calls must be at least 1"),
]
STOPPED = "Error logged during startup, exiting"  # mitmproxy's own last word when a start-up error was logged


@pytest.mark.parametrize("option,message", CASES, ids=[option for option, _ in CASES])
def test_a_bad_option_stops_mitmdump_with_one_clear_line(option, message):
    process = Process("mitmdump", proxy_argv(None, option))
    try:
        process.wait_for(STOPPED, timeout=60)
        code = process.popen.wait(timeout=30)
    finally:
        process.stop()
    output = "\n".join(process.lines)
    assert code != 0, output
    assert "Traceback" not in output and "Error:" not in output, output
    named = [line for line in process.lines if "toolcall_lens_" in line]
    assert len(named) == 1 and message in named[0], output
