"""Smoke test of scripts/bench.py: `all --quick` runs every mode end to end (real mitmdump processes) and
prints every table. No timing assertions: the figures live in the benchmark's own output."""

from __future__ import annotations

import re
import subprocess
import sys

from streams import ROOT

HEADERS = (
    "== toolcall-lens benchmark",
    "CPU:",
    "== core: side by side",
    "== core: small stream",
    "== core: medium stream",
    "== core: large stream",
    "== core: cost per event as parallel calls grow",
    "== core: memory of one accumulator",
    "== proxy: throughput, long streams",
    "core off-process: the bare core",
    "addon.py: addon.py at its defaults (toolcall_lens_worker=true)",
    "addon.py, in the proxy: toolcall_lens_worker=false",
    "Added CPU per event inside mitmdump",
    "== proxy: throughput, short flows",
    "== proxy: the addon's own work per short flow, by part",
    "annotate: the log line (a record, or held for a shared one)",
    "the log records (as the flow is annotated, or shared a tenth of a second later)",
    "The whole addon adds",
    "== proxy: the collector's work per short flow, by generation",
    "== proxy: latency added per event",
    "added by the addon: p50",
    "== proxy: the proxy's thread per flow, by the length of the request",
    "== soak: 200 flows through one mitmdump",
    "toolcall-lens-state watches=",
    "== WebSocket: messages per second through mitmdump",
    "mitmdump + the core alone (Connection)",
    "mitmdump + addon, in the proxy",
    "== targets",
)


def test_bench_all_quick_prints_every_table():
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench.py"), "all", "--quick"],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    missing = [header for header in HEADERS if header not in run.stdout]
    assert not missing, f"missing {missing} in:\n{run.stdout}"
    # Every contender rebuilt the generated calls (the floor rebuilds none and says "-").
    assert "WRONG" not in run.stdout
    assert "FAILURES" not in run.stdout
    # Long requests, plain and compressed as Codex sends its own: a row each, both ways of analysing.
    for coding in ("none", "zstd"):
        assert re.search(
            rf"^20 +{coding} +\d+ +\d+\.\d+ \d+\.\d+ +\d+\.\d+ \d+\.\d+$", run.stdout, re.MULTILINE
        ), coding
    # The off-process reference proxy's worker answered every flow with a result holding its calls.
    said = [line for line in run.stdout.splitlines() if line.startswith("core off-process (")]
    assert len(said) == 2, said  # the long streams' proxy and the short flows'
    for line in said:
        results, calls = (int(n) for n in re.findall(r"(\d+) (?:results|tool calls)", line))
        assert results > 0 and calls >= results, line
    # The reference of what telling each flow in the log costs wrote its line for every flow it saw.
    lines = [line for line in run.stdout.splitlines() if line.startswith("identity + a line a flow (")]
    assert len(lines) == 2 and all(int(re.findall(r"(\d+) log lines", line)[0]) > 0 for line in lines), lines
    assert "identity with a line a flow:" in run.stdout
    # The shares the targets judge are paired round by round, and say their rounds' range.
    assert run.stdout.count("paired (rounds)") == 3  # the two proxy tables and the WebSocket one
    judged = [line for line in run.stdout.splitlines() if "through mitmdump: >= 90%" in line]
    assert len(judged) == 2 and all(re.search(r"\d+\.\d% paired by round \(\d+-\d+", j) for j in judged), (
        judged
    )
    assert re.search(r"WebSocket: messages/s with the addon >= 90%.*paired by round", run.stdout)
    # The reference of the design's least cost ran both its scripts in one mitmdump: the worker answered
    # its flows with their calls, and each flow it saw got its log line.
    design = [
        line for line in run.stdout.splitlines() if line.startswith("core off-process + a line a flow (")
    ]
    assert len(design) == 1, design
    results, calls, lines = (int(n) for n in re.findall(r"(\d+) (?:results|tool calls|log lines)", design[0]))
    assert results > 0 and calls >= results and lines > 0, design
    assert "for reference, the bare core in a worker + a line a flow, no features (short flows)" in run.stdout
    # The probes of the short flows switched off what they name: the first's flows are still told in the
    # log, each with the probe's constant summary, and in no session; the second's, annotated not at
    # all, are not.
    probes = {
        line.split(" (provider): ")[0]: line
        for line in run.stdout.splitlines()
        if line.startswith("addon.py without ") and " (provider): " in line
    }
    labels = (
        "addon.py without request reading, session, summary",
        "addon.py without request reading, redaction, annotation",
    )
    thin, bare = (probes[label] for label in labels)
    assert "request, session, summary switched off; 0 agent sessions kept" in thin, thin
    told, constant = (int(n) for n in re.findall(r"(\d+) (?:log lines|with the constant)", thin))
    assert told > 0 and constant == told, thin
    assert "annotate, redact, request switched off; 0 agent sessions kept; 0 log lines written" in bare, bare
    assert all(probe.endswith("; 0 addon errors") for probe in probes.values()), probes
    for label in labels:
        assert f"for reference, {label} (a probe) (short flows)" in run.stdout
    # The probe timed every part it wraps, on every flow it saw.
    parts = re.findall(
        r"^(the \w+ hook|annotate|responseheaders|request|the stream callable).*?(\d+\.\d+)\s+(\d+\.\d+)$",
        run.stdout,
        re.MULTILINE,
    )
    assert len(parts) >= 12 and all(float(calls) > 0 for *_, calls in parts), parts
    # The collector was counted in each of its five mitmdumps, and its two probes switched off what they name.
    section = run.stdout.split("== proxy: the collector's work per short flow, by generation")[1]
    rows = re.findall(
        r"^(.+?)\s+(\d+\.\d{4} \d+\.\d{4} \d+\.\d{4})\s+([\d. ]+?)\s+(\d+\.\d)$", section, re.MULTILINE
    )
    assert [row[0].strip() for row in rows] == [
        "identity callable",
        "core off-process + a line a flow",
        "addon.py, its plumbing alone (a probe)",
        "addon.py",
        "addon.py, its result taken off each flow (a probe)",
    ], section[:2000]
    assert "addon.py, its plumbing alone (a probe): annotate, redact, request switched off" in section
    assert "addon.py, its result taken off each flow (a probe): result switched off" in section
