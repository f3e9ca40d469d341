"""End to end, all real: mitmdump with the addon in reverse mode, scripts/fake_provider upstream, the
official openai SDK and raw HTTP clients. Every process binds port 0 and is stopped even on failure."""

from __future__ import annotations

import hashlib
import http.client
import json
import socket
import subprocess
import sys
import time
import urllib.request

import openai
import pytest
from lab import BIN, ROOT, proxy_argv, start_mitmdump
from mitmproxy import io as mio
from streams import without_timing


def tool(name: str) -> dict:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}


# Every function the fake provider's scenarios call: a clean scenario must raise nothing.
TOOLS = [
    tool(name)
    for name in (
        "search_circulars",
        "get_user_profile",
        "get_weather",
        "get_time",
        "weather",
        "get_current_weather",
        "lookup",
    )
]
MESSAGES = [{"role": "user", "content": "Find the RBI circulars and my profile."}]


class Proxy:
    def __init__(self, process, port, dump):
        self.process, self.port, self.dump = process, port, dump

    def flows(self) -> list:
        """Stop mitmdump (it closes its dump file) and read the flows back as mitmproxy does."""
        self.process.stop()
        with open(self.dump, "rb") as f:
            return list(mio.FlowReader(f).stream())

    def wait_logged(self, pattern: str) -> None:
        self.process.wait_for(pattern, timeout=30)


@pytest.fixture
def proxy(provider, tmp_path):
    dump = tmp_path / "flows.mitm"
    process, port = start_mitmdump(provider, dump)
    try:
        yield Proxy(process, port, dump)
    finally:
        process.stop()


def raw_stream(
    port: int, scenario: str, **extra
) -> tuple[http.client.HTTPResponse, http.client.HTTPConnection]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    body = json.dumps({"model": scenario, "stream": True, "messages": MESSAGES, "tools": TOOLS, **extra})
    conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    return conn.getresponse(), conn


def result_of(flow) -> dict:
    return flow.metadata["toolcall_lens"]


def codes(flow) -> list[str]:
    return [w["code"] for w in result_of(flow)["warnings"]]


def calls(flow) -> list[tuple]:
    return [(c["id"], c["name"], c["arguments"]) for c in result_of(flow)["choices"][0]["tool_calls"]]


def test_openai_sdk_through_the_proxy_gets_its_calls_and_the_flow_carries_the_truth(proxy):
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{proxy.port}/v1", api_key="test-key", max_retries=0)
    with client.chat.completions.stream(model="interleaved", messages=MESSAGES, tools=TOOLS) as stream:
        final = stream.get_final_completion()
    sdk_calls = [(c.id, c.function.name, c.function.arguments) for c in final.choices[0].message.tool_calls]
    expected = [
        ("call_abc", "search_circulars", '{"query": "RBI circulars"}'),
        ("call_xyz", "get_user_profile", '{"user_id": "u123"}'),
    ]
    assert sdk_calls == expected  # the SDK routes by index: right

    (flow,) = proxy.flows()
    assert calls(flow) == expected
    assert codes(flow) == ["recency-misroute"]
    misroute = result_of(flow)["warnings"][0]
    assert misroute["would_build"][1]["arguments"] == '{"query": "RBI{"user_id": "u circulars"}123"}'
    assert result_of(flow)["complete"] is True  # however the SDK closed the connection
    assert (
        flow.comment
        == "openai-chat interleaved: 2 calls: search_circulars, get_user_profile | warning: recency-misroute"
    )
    assert flow.marked == ":warning:"
    assert any("toolcall-lens POST" in line and "recency-misroute" in line for line in proxy.process.lines)


@pytest.mark.parametrize(
    "scenario,expected_codes,marked",
    [
        ("sequential", [], False),
        ("interleaved", ["recency-misroute"], True),
        (
            "index-collision",
            ["index-collision", "index-collision"]
            + [
                "index-only-misroute",
                "id-then-index-misroute",
                "field-concat-misroute",
                "last-wins-misroute",
            ],
            True,
        ),
        ("name-repeated", ["name-repeated", "recency-misroute", "field-concat-misroute"], True),
        ("error-midstream", ["provider-error", "invalid-arguments"], True),
        ("text", [], False),
    ],
)
def test_client_receives_exactly_the_upstream_bytes_and_the_dump_carries_annotations(
    proxy, scenario, expected_codes, marked
):
    response, conn = raw_stream(proxy.port, scenario)
    received = response.read()
    conn.close()
    assert response.status == 200
    assert hashlib.sha256(received).hexdigest() == response.getheader("X-Body-SHA256")
    assert received.endswith(b"data: [DONE]\n\n")

    (flow,) = proxy.flows()
    assert flow.response.raw_content == received  # the body kept for mitmweb and dumps
    assert codes(flow) == expected_codes
    assert bool(flow.marked) == marked
    assert flow.comment.startswith(f"openai-chat {scenario}:")


def test_index_collision_keeps_three_calls(proxy):
    response, conn = raw_stream(proxy.port, "index-collision")
    response.read()
    conn.close()
    (flow,) = proxy.flows()
    assert [c[:2] for c in calls(flow)] == [
        ("call_c1", "weather"),
        ("call_c2", "weather"),
        ("call_c3", "weather"),
    ]


def test_first_event_reaches_the_client_while_the_upstream_is_still_streaming(proxy, provider):
    # The gated scenario sends one event, then waits for /release. A buffering proxy would deliver
    # nothing before the release: this read would time out instead.
    response, conn = raw_stream(proxy.port, "gated")
    first = b""
    while b"\n\n" not in first:
        piece = response.read1(65536)
        assert piece, "stream ended before its first event"
        first += piece
    assert first.startswith(b"data: {") and b'"role": "assistant"' in first.replace(b'":"', b'": "')
    with urllib.request.urlopen(f"http://127.0.0.1:{provider}/release", timeout=10) as released:
        assert int(released.read()) >= 1
    rest = response.read()
    conn.close()
    assert (first + rest).endswith(b"data: [DONE]\n\n")
    assert hashlib.sha256(first + rest).hexdigest() == response.getheader("X-Body-SHA256")
    (flow,) = proxy.flows()
    assert result_of(flow)["complete"] is True and codes(flow) == []


def test_upstream_dropping_mid_stream_leaves_a_truncated_flow(proxy):
    response, conn = raw_stream(proxy.port, "truncated")
    with pytest.raises(http.client.IncompleteRead) as cut:
        response.read()
    conn.close()
    assert b'{\\"query\\": \\"RBI' in cut.value.partial or b"RBI" in cut.value.partial
    proxy.wait_logged(r"toolcall-lens POST .*incomplete")
    (flow,) = proxy.flows()
    assert flow.error is not None
    assert "truncated-stream" in codes(flow) and result_of(flow)["complete"] is False
    assert flow.response.raw_content == cut.value.partial
    assert flow.marked


def test_client_disconnecting_early_leaves_a_truncated_flow(proxy, provider):
    response, conn = raw_stream(proxy.port, "gated")
    first = response.read1(65536)
    assert first.startswith(b"data: ")
    conn.sock.shutdown(socket.SHUT_RDWR)
    conn.close()
    try:
        proxy.wait_logged(r"toolcall-lens POST .*incomplete")
    finally:
        urllib.request.urlopen(f"http://127.0.0.1:{provider}/release", timeout=10).read()
    (flow,) = proxy.flows()
    assert "truncated-stream" in codes(flow) and result_of(flow)["complete"] is False


def test_non_llm_traffic_is_untouched_and_unannotated(proxy, provider):
    for path in ("/health", "/v1/models"):
        with urllib.request.urlopen(f"http://127.0.0.1:{proxy.port}{path}", timeout=10) as through:
            via_proxy = through.read()
        with urllib.request.urlopen(f"http://127.0.0.1:{provider}{path}", timeout=10) as direct:
            assert via_proxy == direct.read()
    flows = proxy.flows()
    assert [f.request.path for f in flows] == ["/health", "/v1/models"]
    for flow in flows:
        assert "toolcall_lens" not in flow.metadata and not flow.comment and not flow.marked


def test_non_streamed_response_is_annotated_too(proxy):
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{proxy.port}/v1", api_key="test-key", max_retries=0)
    completion = client.chat.completions.create(model="interleaved", messages=MESSAGES, tools=TOOLS)
    assert [c.function.name for c in completion.choices[0].message.tool_calls] == [
        "search_circulars",
        "get_user_profile",
    ]
    (flow,) = proxy.flows()
    result = result_of(flow)
    assert result["streamed"] is False and codes(flow) == []
    assert [c[1] for c in calls(flow)] == ["search_circulars", "get_user_profile"]
    assert "(not streamed)" in flow.comment


def test_cli_reads_the_dump_the_proxy_wrote(proxy):
    for scenario in ("sequential", "interleaved"):
        response, conn = raw_stream(proxy.port, scenario)
        response.read()
        conn.close()
    with urllib.request.urlopen(f"http://127.0.0.1:{proxy.port}/health", timeout=10) as r:
        r.read()
    flows = proxy.flows()
    done = subprocess.run(
        [str(BIN / "toolcall-lens"), str(proxy.dump), "--json"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 1, done.stderr
    results = json.loads(done.stdout)["results"]
    assert [r["source"]["flow_id"] for r in results] == [f.id for f in flows[:2]]
    assert [[w["code"] for w in r["warnings"]] for r in results] == [[], ["recency-misroute"]]
    # The CLI, re-reading the kept bodies, agrees with what the addon recorded live.
    for flow, result in zip(flows, results, strict=False):
        assert without_timing({k: v for k, v in result.items() if k != "source"}) == without_timing(
            flow.metadata["toolcall_lens"]
        )


def test_proxy_refuses_bad_options(provider):
    done = subprocess.run(
        proxy_argv(provider, "toolcall_lens_body_cap=-5"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "toolcall_lens_body_cap must be 0 or more" in done.stdout + done.stderr


@pytest.mark.parametrize("args", [[], ["--offline"]])
def test_the_readme_demo_runs_and_shows_the_truth(args):
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "demo.py"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert '"query": "RBI circulars"' in out and '"user_id": "u123"' in out
    assert 'would build get_user_profile({"query": "RBI{"user_id": "u circulars"}123"})' in out
    if not args:
        assert "comment: openai-chat interleaved: 2 calls" in out and "marked:  :warning:" in out


def test_request_checks_on_live_flows(proxy):
    # The production calls: search_circulars {"query": "RBI circulars"}, get_user_profile {"user_id": "u123"}.
    def schema(query_type: str) -> list:
        properties = {"query": {"type": query_type}}
        search = {"name": "search_circulars", "parameters": {"type": "object", "properties": properties}}
        return [{"type": "function", "function": search}] + [
            t for t in TOOLS if t["function"]["name"] != "search_circulars"
        ]

    force = {"type": "function", "function": {"name": "get_weather"}}
    cases = [
        ({"tools": schema("integer")}, "schema-mismatch"),
        ({"tools": schema("string")}, None),
        ({"parallel_tool_calls": False}, "parallel-disabled"),
        ({"parallel_tool_calls": True}, None),
        ({"tool_choice": force}, "tool-choice-ignored"),
        ({"tool_choice": {**force, "function": {"name": "search_circulars"}}}, None),
        ({"tools": TOOLS[:1]}, "undeclared-tool"),
    ]
    for extra, _ in cases:
        response, conn = raw_stream(proxy.port, "interleaved", **extra)
        response.read()
        conn.close()
    flows = proxy.flows()
    assert len(flows) == len(cases)
    for flow, (extra, expected) in zip(flows, cases, strict=True):
        found = [c for c in codes(flow) if c != "recency-misroute"]
        assert found == ([expected] if expected else []), (extra, found)


def test_live_timing_facts_and_a_stall(provider, tmp_path):
    # One event, then the upstream holds the stream until released: a silence the addon must notice.
    dump = tmp_path / "stall.mitm"
    process, port = start_mitmdump(provider, dump, "toolcall_lens_stall_seconds=1")
    try:
        response, conn = raw_stream(port, "gated")
        assert response.read1(65536).startswith(b"data: ")
        time.sleep(1.5)  # the silence itself; nothing is measured against it here
        with urllib.request.urlopen(f"http://127.0.0.1:{provider}/release", timeout=10) as released:
            released.read()
        response.read()
        conn.close()
        process.wait_for(r"toolcall-lens POST")
    finally:
        process.stop()
    with open(dump, "rb") as f:
        (flow,) = list(mio.FlowReader(f).stream())
    result = result_of(flow)
    timing = result["timing"]
    assert timing["clock"] is True and timing["time_to_first_byte"] is not None
    assert timing["longest_gap_after_event"] == 1 and timing["longest_gap"] > 1
    stalled = [w for w in result["warnings"] if w["code"] == "stalled"]
    assert stalled and stalled[0]["severity"] == "info" and stalled[0]["after_event"] == 1
    assert all(c["first_at"] is not None for c in result["choices"][0]["tool_calls"])
