"""200 concurrent streams from the fake provider through one ``mitmdump -s addon.py``: every client gets
its exact bytes, every flow in the dump carries the right reconstruction and warnings, and no per-flow
state of the addon outlives its flow.

A second script addon (written into tmp_path, loaded with another ``-s``) reads the running ToolcallLens
instance: a request for ``/__state__?probe=NAME`` through the proxy is answered by it (never upstream)
and logs ``toolcall-lens-test-state probe=NAME watches=N echo=M ...``: the sizes of
``ToolcallLens.watches`` and ``ToolcallLens.echo_warnings``, the flows (by X-Test-Case) still in them,
the most watches ever live at once, and the StreamAccumulator objects still alive in the process.

The 200 clients are threads. All send at once; each reads its first event, then waits until every
client has its own (so all 200 streams are open at that moment). A fifth of them are the ``gated``
scenario, which the provider holds after its first event until GET /release: they are certainly still
running in the proxy when the first probe is sent, and are released after it. The rest stream with
X-Fake-Delay between events (1-3 s a stream), long enough that here 175-200 flows are live in the proxy
at once; only the gated ones' count is asserted, the rest depends on the machine's speed.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import re
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import fake_provider as fp
import pytest
from lab import ROOT, Process, proxy_argv, start_fake_provider, start_proxy
from mitmproxy import io as mio

CLIENTS = 200
DELAY = "0.2"  # X-Fake-Delay, seconds between events: every stream lasts a second or more
TIMEOUT = 30.0

FRAGMENTED = ("anthropic-messages", "openai-responses", "bedrock-converse")
# (format, scenario) -> the warning codes its flow must carry, in order.
EXPECTED_CODES: dict[tuple[str, str], list[str]] = {
    ("openai-chat", "interleaved"): ["recency-misroute"],
    ("openai-chat", "sequential"): [],
    ("openai-chat", "index-collision"): [
        "index-collision",
        "index-collision",
        "index-only-misroute",
        "id-then-index-misroute",
        "field-concat-misroute",
        "last-wins-misroute",
    ],
    ("openai-chat", "name-repeated"): ["name-repeated", "recency-misroute", "field-concat-misroute"],
    ("openai-chat", "gated"): [],
    **{(f, "interleaved"): ["recency-misroute"] for f in FRAGMENTED},
    **{(f, "sequential"): [] for f in FRAGMENTED},
    ("anthropic-messages", "gated"): [],
    ("openai-responses", "gated"): [],
    ("gemini", "interleaved"): [],  # every call arrives whole: nothing to misroute
    ("gemini", "sequential"): [],
}
MIX = list(EXPECTED_CODES)
ENCODINGS = {3: "gzip", 7: "br"}  # every tenth client's non-gated stream arrives compressed

STATE_ADDON = '''\
"""Test helper: reports the toolcall-lens addon's per-flow state when /__state__ is requested."""

import gc
import logging

from mitmproxy import ctx, http

logger = logging.getLogger("scale_state")


class ScaleState:
    def __init__(self):
        self.max_watches = 0
        self.cases = {}  # flow id -> X-Test-Case, to name the flows whose state is left behind

    def lens(self):
        lens = ctx.master.addons.get("toolcalllens")
        if lens is None:
            raise RuntimeError("no addon named toolcalllens is loaded")
        return lens

    def requestheaders(self, flow):
        self.cases[flow.id] = flow.request.headers.get("X-Test-Case", flow.request.path)

    def responseheaders(self, flow):  # after ToolcallLens.responseheaders: the new watch is in
        self.max_watches = max(self.max_watches, len(self.lens().watches))

    def request(self, flow):
        if not flow.request.path.startswith("/__state__"):
            return
        lens = self.lens()
        gc.collect()
        accumulators = sum(type(o).__name__ == "StreamAccumulator" for o in gc.get_objects())
        left = sorted({self.cases.get(i, i) for i in [*lens.watches, *lens.echo_warnings]})
        line = (
            f"toolcall-lens-test-state probe={flow.request.query.get('probe', '')} "
            f"watches={len(lens.watches)} echo={len(lens.echo_warnings)} "
            f"max_watches={self.max_watches} accumulators={accumulators} left={','.join(left) or '-'}"
        )
        logger.info(line)
        flow.response = http.Response.make(200, line.encode(), {"Content-Type": "text/plain"})


addons = [ScaleState()]
'''


class State:
    def __init__(self, match: re.Match) -> None:
        self.watches, self.echo, self.max_watches, self.accumulators = (int(match[i]) for i in range(1, 5))
        self.left = match[5]
        self.line = match[0]


def probe(proxy: Process, port: int, name: str) -> State:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/__state__?probe={name}", timeout=TIMEOUT) as r:
        r.read()
    match = proxy.wait_for(
        rf"toolcall-lens-test-state probe={name} watches=(\d+) echo=(\d+) max_watches=(\d+) "
        r"accumulators=(\d+) left=(\S+)",
        timeout=TIMEOUT,
    )
    return State(match)


def case_of(number: int) -> dict:
    format, scenario = MIX[number % len(MIX)]
    encoding = ENCODINGS.get(number % 10) if scenario != "gated" else None
    name = f"{number:03d}/{format}/{scenario}" + (f"/{encoding}" if encoding else "")
    return {"name": name, "format": format, "scenario": scenario, "encoding": encoding}


class Clients:
    """The client threads' common gates: start together, then all hold until every one has its first
    event."""

    def __init__(self, count: int) -> None:
        self.start = threading.Barrier(count, timeout=TIMEOUT)
        self.all_first = threading.Event()
        self.first = threading.Barrier(count, action=self.all_first.set, timeout=TIMEOUT)

    def abort(self) -> None:
        self.start.abort()
        self.first.abort()

    def run(self, port: int, case: dict) -> dict:
        headers = {"Content-Type": "application/json", "X-Test-Case": case["name"], "X-Fake-Delay": DELAY}
        if case["encoding"]:
            headers["X-Fake-Encoding"] = case["encoding"]
        request = fp.request_body(case["format"], case["scenario"])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
        try:
            self.start.wait()
            conn.request("POST", fp.path(case["format"], case["scenario"]), request, headers)
            response = conn.getresponse()
            first = response.read1(65536) if response.status == 200 else b""
            self.first.wait()
            body = first + response.read()
            return {"status": response.status, "body": body, "hash": response.getheader("X-Body-SHA256")}
        except BaseException:
            self.abort()  # the others must not wait for this one
            raise
        finally:
            conn.close()


def calls(result: dict) -> list[dict]:
    return [
        {"id": c["id"], "name": c["name"], "arguments": c["arguments"]}
        for choice in result["choices"]
        for c in choice["tool_calls"]
    ]


def same_calls(got: list[dict], expected: list[dict]) -> bool:
    """Ids and names equal, arguments equal as JSON values."""
    return len(got) == len(expected) and all(
        (g["id"], g["name"]) == (e["id"], e["name"])
        and json.loads(g["arguments"]) == json.loads(e["arguments"])
        for g, e in zip(got, expected, strict=True)
    )


@pytest.fixture
def provider():
    process, port = start_fake_provider(delay=0.002)
    try:
        yield process, port
    finally:
        process.stop()


@pytest.fixture
def proxy(provider, tmp_path):
    """mitmdump as lab.start_mitmdump runs it, plus the state script; stalls never noted (gated streams
    wait for the release, however long 200 clients take to get going)."""
    script = tmp_path / "scale_state.py"
    script.write_text(STATE_ADDON)
    dump = tmp_path / "flows.mitm"
    argv = proxy_argv(
        provider[1], "toolcall_lens_stall_seconds=0", scripts=(ROOT / "addon.py", script), dump=dump
    )
    process, port = start_proxy(argv)
    try:
        yield process, port, dump
    finally:
        process.stop()


def test_200_concurrent_streams_through_one_proxy(provider, proxy):
    _, provider_port = provider
    process, port, dump = proxy
    cases = [case_of(n) for n in range(CLIENTS)]
    gated = sum(case["scenario"] == "gated" for case in cases)
    clients = Clients(CLIENTS)
    with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
        futures = [pool.submit(clients.run, port, case) for case in cases]
        try:
            deadline = time.monotonic() + 2 * TIMEOUT
            while not clients.all_first.wait(0.1):
                failed = [f for f in futures if f.done() and f.exception() is not None]
                assert not failed and time.monotonic() < deadline, (
                    f"not every client got its first event: {failed[:1] and failed[0].exception()!r}"
                )
            # Every gated stream is held upstream after its first event: their flows are running.
            during = probe(process, port, "during")
        finally:
            with urllib.request.urlopen(f"http://127.0.0.1:{provider_port}/release", timeout=TIMEOUT) as r:
                released = int(r.read())
        seen = {case["name"]: future.result(2 * TIMEOUT) for case, future in zip(cases, futures, strict=True)}
    after = probe(process, port, "after")

    assert released == gated
    assert during.watches >= gated, during.line
    assert during.max_watches >= gated, during.line

    # No per-flow state outlives its flow.
    assert (after.watches, after.echo, after.left) == (0, 0, "-"), after.line
    assert after.accumulators == 0, after.line

    process.stop()  # mitmdump closes its dump
    with open(dump, "rb") as f:
        flows = list(mio.FlowReader(f).stream())
    by_case = {flow.request.headers.get("X-Test-Case"): flow for flow in flows}
    llm = [flow for flow in flows if "toolcall_lens" in flow.metadata]
    assert len(llm) == CLIENTS, f"{len(llm)} LLM flows in the dump"

    problems = []
    for case in cases:
        name, format, scenario = case["name"], case["format"], case["scenario"]
        observed, flow = seen[name], by_case.get(name)
        if observed["status"] != 200 or hashlib.sha256(observed["body"]).hexdigest() != observed["hash"]:
            problems.append(f"{name}: the client got status {observed['status']}, not the whole body")
            continue
        if flow is None or "toolcall_lens" not in flow.metadata:
            problems.append(f"{name}: no annotated flow in the dump")
            continue
        result = flow.metadata["toolcall_lens"]
        expected = fp.expected_calls(scenario, format)
        codes = [w["code"] for w in result["warnings"]]
        if flow.response.raw_content != observed["body"]:
            problems.append(f"{name}: the flow keeps other bytes than the client got")
        if result["format"] != format or result["complete"] is not True:
            problems.append(f"{name}: format {result['format']}, complete {result['complete']}")
        if not same_calls(calls(result), expected):
            problems.append(f"{name}: calls {calls(result)} != {expected}")
        if codes != EXPECTED_CODES[format, scenario]:
            problems.append(f"{name}: warnings {codes} != {EXPECTED_CODES[format, scenario]}")
    assert not problems, f"{len(problems)} of {CLIENTS} flows wrong:\n" + "\n".join(problems)
    # The mix covered every (format, scenario), compressed streams included.
    assert {(c["format"], c["scenario"]) for c in cases} == set(EXPECTED_CODES)
    assert {c["encoding"] for c in cases} == {None, "gzip", "br"}
