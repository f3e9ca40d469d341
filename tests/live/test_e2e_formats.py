"""Every wire format end to end: the fake provider on each format's real path, a real mitmdump with the
addon in reverse mode, the official anthropic SDK (Messages) and openai SDK (Responses API), raw HTTP
clients for the rest, compressed streams; then the dump read back and by the CLI.

All traffic runs through one proxy session (module fixture); each test checks its own flows, found by
the ``X-Test-Case`` header its requests carried."""

from __future__ import annotations

import hashlib
import http.client
import json
import subprocess

import anthropic
import fake_provider as fp
import openai
import pytest
from lab import BIN, start_fake_provider, start_mitmdump
from mitmproxy import io as mio
from streams import without_timing

FRAGMENTED = ("openai-responses", "anthropic-messages", "bedrock-converse", "bedrock-invoke", "cohere-v2")
WHOLE = ("gemini", "ollama-chat")  # every call arrives whole: nothing to misroute
FORMATS = [f for f in fp.FORMATS if f != "openai-chat"]  # chat has tests/live/test_e2e.py
# The functions the scenarios call (interleaved: the first two; sequential: the last two).
TOOLS = [
    {"name": name, "description": name, "input_schema": {"type": "object"}}
    for name in ("search_circulars", "get_user_profile", "get_weather", "get_time")
]


def raw(port: int, format: str, scenario: str, case: str, encoding: str | None = None) -> dict:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Content-Type": "application/json", "X-Test-Case": case}
    if encoding:
        headers["X-Fake-Encoding"] = encoding
    conn.request("POST", fp.path(format, scenario), fp.request_body(format, scenario), headers)
    response = conn.getresponse()
    try:
        body, complete = response.read(), True
    except http.client.IncompleteRead as cut:
        body, complete = cut.partial, False
    conn.close()
    return {"body": body, "complete": complete, "hash": response.getheader("X-Body-SHA256")}


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    """Run all the traffic, stop the proxy, read its dump: {case: (client observation, flow)}."""
    dump = tmp_path_factory.mktemp("e2e-formats") / "flows.mitm"
    provider, provider_port = start_fake_provider(delay=0.002)
    seen: dict[str, object] = {}
    try:
        proxy, port = start_mitmdump(provider_port, dump)
        try:
            for format in FORMATS:
                for scenario in ("interleaved", "sequential", "truncated", "error-midstream"):
                    case = f"{format}/{scenario}"
                    seen[case] = raw(port, format, scenario, case)
            for encoding in ("gzip", "br"):
                for format in ("anthropic-messages", "openai-responses"):
                    case = f"{format}/interleaved/{encoding}"
                    seen[case] = raw(port, format, "interleaved", case, encoding)

            messages = anthropic.Anthropic(base_url=f"http://127.0.0.1:{port}", api_key="test", max_retries=0)
            for scenario in ("interleaved", "sequential"):
                case = f"anthropic-sdk/{scenario}"
                with messages.messages.stream(
                    model=scenario,
                    max_tokens=1024,
                    messages=[{"role": "user", "content": "Find the circulars and my profile."}],
                    tools=TOOLS,
                    extra_headers={"X-Test-Case": case},
                ) as stream:
                    seen[case] = stream.get_final_message()

            responses = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="test", max_retries=0)
            for scenario in ("interleaved", "sequential"):
                case = f"responses-sdk/{scenario}"
                with responses.responses.stream(
                    model=scenario,
                    input="Find the circulars and my profile.",
                    tools=[
                        {"type": "function", "name": t["name"], "parameters": {"type": "object"}}
                        for t in TOOLS
                    ],
                    extra_headers={"X-Test-Case": case},
                ) as stream:
                    seen[case] = stream.get_final_response()
            proxy.wait_for(r"toolcall-lens POST .*/responses")
        finally:
            proxy.stop()
    finally:
        provider.stop()
    with open(dump, "rb") as f:
        flows = {flow.request.headers.get("X-Test-Case"): flow for flow in mio.FlowReader(f).stream()}
    return {case: (observed, flows.get(case)) for case, observed in seen.items()} | {"_dump": dump}


def result_of(flow) -> dict:
    assert flow is not None, "the flow is missing from the dump"
    return flow.metadata["toolcall_lens"]


def codes(result: dict) -> list[str]:
    return [w["code"] for w in result["warnings"]]


def calls(result: dict) -> list[dict]:
    return [
        {"id": c["id"], "name": c["name"], "arguments": c["arguments"]}
        for choice in result["choices"]
        for c in choice["tool_calls"]
    ]


def same_json(a: str, b: str) -> bool:
    return json.loads(a) == json.loads(b)


@pytest.mark.parametrize("format", FORMATS)
def test_interleaved_calls_are_rebuilt_in_every_format(session, format):
    observed, flow = session[f"{format}/interleaved"]
    assert observed["complete"] and hashlib.sha256(observed["body"]).hexdigest() == observed["hash"]
    result = result_of(flow)
    assert result["format"] == format and result["complete"] is True
    expected = fp.expected_calls("interleaved", format)
    got = calls(result)
    assert [(c["id"], c["name"]) for c in got] == [(c["id"], c["name"]) for c in expected]
    assert all(same_json(g["arguments"], e["arguments"]) for g, e in zip(got, expected, strict=True))
    verdicts = {name: v["verdict"] for name, v in result["compatibility"].items()}
    if format in FRAGMENTED:
        assert codes(result) == ["recency-misroute"] and flow.marked
        assert verdicts == {"recency": "breaks", "index-only": "ok", "id-then-index": "ok"} | {
            "field-concat": "ok",
            "last-wins": "ok",
            "parse-early": "ok",
        }
    else:
        assert codes(result) == [] and not flow.marked
        assert set(verdicts.values()) == {"n/a"} and len(verdicts) == 6
    assert flow.response.raw_content == observed["body"]


@pytest.mark.parametrize("format", FORMATS)
def test_sequential_calls_raise_nothing(session, format):
    _, flow = session[f"{format}/sequential"]
    result = result_of(flow)
    assert result["warnings"] == [] and result["complete"] is True and not flow.marked
    assert [c["name"] for c in calls(result)] == [c["name"] for c in fp.expected_calls("sequential", format)]


@pytest.mark.parametrize("format", FORMATS)
def test_upstream_dropping_mid_stream_is_truncated(session, format):
    observed, flow = session[f"{format}/truncated"]
    assert not observed["complete"]
    result = result_of(flow)
    assert result["complete"] is False and "truncated-stream" in codes(result)
    assert flow.response.raw_content == observed["body"]


@pytest.mark.parametrize("format", FORMATS)
def test_mid_stream_error_is_a_provider_error(session, format):
    _, flow = session[f"{format}/error-midstream"]
    result = result_of(flow)
    assert "provider-error" in codes(result) and result["complete"] is False


@pytest.mark.parametrize("encoding", ["gzip", "br"])
@pytest.mark.parametrize("format", ["anthropic-messages", "openai-responses"])
def test_compressed_streams_pass_unchanged_and_are_analysed(session, format, encoding):
    observed, flow = session[f"{format}/interleaved/{encoding}"]
    assert hashlib.sha256(observed["body"]).hexdigest() == observed["hash"]  # the compressed bytes, as sent
    assert flow.response.headers["content-encoding"] == encoding
    assert flow.response.raw_content == observed["body"]
    plain = result_of(session[f"{format}/interleaved"][1])
    result = result_of(flow)
    assert calls(result) == calls(plain) and codes(result) == ["recency-misroute"]


def test_anthropic_sdk_gets_its_calls_and_the_flow_the_truth(session):
    for scenario in ("interleaved", "sequential"):
        message, flow = session[f"anthropic-sdk/{scenario}"]
        sdk = [(b.id, b.name, b.input) for b in message.content if b.type == "tool_use"]
        expected = fp.expected_calls(scenario, "anthropic-messages")
        assert sdk == [(c["id"], c["name"], json.loads(c["arguments"])) for c in expected]
        result = result_of(flow)
        assert [(c["id"], c["name"]) for c in calls(result)] == [(c["id"], c["name"]) for c in expected]
        assert codes(result) == (["recency-misroute"] if scenario == "interleaved" else [])


def test_openai_sdk_responses_api_gets_its_calls_and_the_flow_the_truth(session):
    for scenario in ("interleaved", "sequential"):
        response, flow = session[f"responses-sdk/{scenario}"]
        sdk = [(o.call_id, o.name, o.arguments) for o in response.output if o.type == "function_call"]
        expected = fp.expected_calls(scenario, "openai-responses")
        assert [(c, n) for c, n, _ in sdk] == [(c["id"], c["name"]) for c in expected]
        result = result_of(flow)
        assert [(c["id"], c["name"], c["arguments"]) for c in calls(result)] == sdk
        assert codes(result) == (["recency-misroute"] if scenario == "interleaved" else [])


def test_the_cli_reads_every_format_from_the_dump(session):
    done = subprocess.run(
        [str(BIN / "toolcall-lens"), str(session["_dump"]), "--json"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    results = json.loads(done.stdout)["results"]
    assert {r["format"] for r in results} == set(FORMATS)
    flows = {entry[1].id: entry[1] for case, entry in session.items() if case != "_dump" and entry[1]}
    assert len(results) == len(flows)  # one result per LLM flow
    for result in results:
        flow = flows[result["source"]["flow_id"]]
        live = flow.metadata["toolcall_lens"]
        assert without_timing({k: v for k, v in result.items() if k != "source"}) == without_timing(live)
