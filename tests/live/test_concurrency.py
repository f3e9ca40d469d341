"""Flows never share state: several streams of every format, cut at hostile boundaries (inside `data:`,
inside a multi-byte character, between CR and LF) and interleaved chunk by chunk, each rebuild exactly
what they rebuild alone; in the addon's callables and through one real mitmdump."""

from __future__ import annotations

import hashlib
import http.client
import itertools
import json
from concurrent.futures import ThreadPoolExecutor

import fake_provider
import pytest
from chat_flows import at_headers
from lab import start_mitmdump
from mitmproxy import io as mio
from mitmproxy.test import taddons
from streams import core_part, without_timing

import addon as addon_module
from accumulator import analyze
from accumulator.boundaries import cut, hostile_cuts

SCENARIOS = ("unicode", "interleaved", "sequential")
CASES = [(fmt, name) for fmt in fake_provider.FORMATS for name in SCENARIOS]


def same_calls(got: list[dict], fmt: str, name: str) -> bool:
    """The calls the scenario sends (arguments compared as JSON: whole-object formats serialise them)."""

    def key(calls):
        return [(c["id"], c["name"], json.loads(c["arguments"])) for c in calls]

    return key(got) == key(fake_provider.expected_calls(name, fmt))


def hostile_pieces(body: bytes) -> list[bytes]:
    return cut(body, hostile_cuts(body))


def test_the_cuts_are_hostile_in_every_way_the_streams_allow():
    # The bodies below are cut inside field names, inside characters and between CR and LF.
    cuts = {"field": 0, "character": 0, "crlf": 0}
    for fmt, name in CASES:
        body = fake_provider.body(fmt, name)
        for position in hostile_cuts(body):
            before, after = body[position - 1], body[position]
            cuts["character"] += after & 0xC0 == 0x80
            cuts["crlf"] += (before, after) == (0x0D, 0x0A)
            cuts["field"] += body[max(0, position - 4) : position + 2].find(b"data") >= 0
    assert all(cuts.values()), cuts


def test_flows_fed_chunk_by_chunk_in_turn_never_share_state():
    lens = addon_module.ToolcallLens()
    bodies = {(fmt, name): fake_provider.body(fmt, name) for fmt, name in CASES}
    with taddons.context(lens):
        flows = {}
        for fmt, name in bodies:
            flow = at_headers()
            flow.request.path = fake_provider.path(fmt, name)
            flow.request.content = fake_provider.request_body(fmt, name)
            flow.response.headers["content-type"] = fake_provider.content_type(fmt)
            lens.responseheaders(flow)
            assert callable(flow.response.stream)
            flows[fmt, name] = flow
        # Round robin over every flow: one hostile piece of each in turn, until all are done.
        queues = {key: hostile_pieces(body) for key, body in bodies.items()}
        for pieces in itertools.zip_longest(*queues.values()):
            for key, piece in zip(queues, pieces, strict=True):
                if piece is not None:
                    assert flows[key].response.stream(piece) is piece
        for flow in flows.values():
            lens.response(flow)
    assert lens.watches == {}
    for (fmt, name), flow in flows.items():
        alone = analyze(bodies[fmt, name], fmt, request=flow.request.content)
        got = flow.metadata["toolcall_lens"]
        assert without_timing(core_part(got)) == without_timing(alone), (fmt, name)
        assert same_calls(got["choices"][0]["tool_calls"], fmt, name), (fmt, name)


@pytest.fixture
def proxy(provider, tmp_path):
    dump = tmp_path / "flows.mitm"
    process, port = start_mitmdump(provider, dump)
    try:
        yield process, port, dump
    finally:
        process.stop()


def fetch(port: int, fmt: str, name: str) -> tuple[str, str]:
    """One streamed request, its body written by the upstream in hostile pieces: (received, sent) hashes."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        path = fake_provider.path(fmt, name)
        path += ("&" if "?" in path else "?") + f"case={fmt}.{name}"
        headers = {"Content-Type": "application/json", "X-Fake-Chunking": "hostile"}
        conn.request("POST", path, fake_provider.request_body(fmt, name), headers)
        response = conn.getresponse()
        return hashlib.sha256(response.read()).hexdigest(), response.headers["X-Body-SHA256"]
    finally:
        conn.close()


def test_many_streams_cut_at_hostile_boundaries_through_one_proxy(proxy):
    process, port, dump = proxy
    cases = CASES * 2  # 48 streams, 8 at a time
    with ThreadPoolExecutor(8) as pool:
        hashes = list(pool.map(lambda case: fetch(port, *case), cases))
    assert all(received == sent for received, sent in hashes)
    process.stop()
    with open(dump, "rb") as f:
        flows = list(mio.FlowReader(f).stream())
    assert len(flows) == len(cases)
    for flow in flows:
        fmt, name = flow.request.query["case"].split(".")
        result = flow.metadata["toolcall_lens"]
        assert same_calls(result["choices"][0]["tool_calls"], fmt, name), (fmt, name)
        assert result["complete"], (fmt, name)
        alone = analyze(fake_provider.body(fmt, name), fmt, request=flow.request.content)
        assert [w["code"] for w in result["warnings"]] == [w["code"] for w in alone["warnings"]], (fmt, name)
