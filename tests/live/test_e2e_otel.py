"""The OpenTelemetry export end to end: a real mitmdump with the addon, the fake provider upstream, the
official openai SDK as the client, and a real OTLP/HTTP receiver (tests/otlp_receiver.py). The spans
arrive while the proxy runs and the session's span when it stops; a collector that is down or slow
leaves every byte of the traffic as the provider sent it."""

from __future__ import annotations

import hashlib
import http.client
import json

import openai
import pytest
from lab import proxy_argv, start_proxy
from otlp_receiver import Receiver

pytestmark = pytest.mark.live

TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("search_circulars", "get_user_profile")
]
MESSAGES = [{"role": "user", "content": "Find the RBI circulars and my profile."}]


def start(provider: int, *options: str):
    return start_proxy(proxy_argv(provider, "toolcall_lens_stall_seconds=0", *options))


def raw(port: int) -> tuple[bytes, str]:
    """The interleaved stream through the proxy, and the digest the provider says it sent."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        body = json.dumps({"model": "interleaved", "stream": True, "messages": MESSAGES, "tools": TOOLS})
        conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.read(), response.headers["x-body-sha256"]
    finally:
        conn.close()


def test_a_streamed_call_is_a_span_in_the_collector_and_its_session_one_at_shutdown(provider):
    with Receiver() as receiver:
        process, port = start(provider, f"toolcall_lens_otlp_endpoint={receiver.url}")
        try:
            client = openai.OpenAI(
                base_url=f"http://127.0.0.1:{port}/v1",
                api_key="test-key",
                max_retries=0,
                default_headers={"session-id": "e2e-run"},
            )
            with client.chat.completions.stream(
                model="interleaved", messages=MESSAGES, tools=TOOLS
            ) as stream:
                stream.get_final_completion()
            (span,) = receiver.wait_for(1)  # sent while the proxy runs (the batch's delay: a second)
        finally:
            process.stop()
        spans = receiver.wait_for(2)
    assert span["name"] == "chat interleaved" and span["kind"] == "SPAN_KIND_CLIENT"
    attributes = span["attributes"]
    assert attributes["gen_ai.conversation.id"] == "e2e-run" and attributes["server.address"] == "127.0.0.1"
    assert attributes["toolcall_lens.warnings"] == ["recency-misroute"]
    assert attributes["toolcall_lens.compatibility.recency"] == "breaks"
    names = [p["name"] for p in json.loads(attributes["gen_ai.output.messages"])[0]["parts"]]
    assert names == ["search_circulars", "get_user_profile"]
    (session,) = [s for s in spans if s["name"] == "invoke_agent e2e-run"]
    assert span["traceId"] == session["traceId"] and span["parentSpanId"] == session["spanId"]
    assert span["startTimeUnixNano"] < span["endTimeUnixNano"] <= session["endTimeUnixNano"]


@pytest.mark.parametrize("collector", ["down", "slow"])
def test_a_collector_down_or_slow_leaves_the_traffic_as_the_provider_sent_it(provider, collector):
    with Receiver(delay=5.0) as receiver:
        url = "http://127.0.0.1:9" if collector == "down" else receiver.url  # port 9: nothing listens
        process, port = start(provider, f"toolcall_lens_otlp_endpoint={url}")
        try:
            for _ in range(3):
                body, digest = raw(port)
                assert hashlib.sha256(body).hexdigest() == digest
            # The slow collector has answered nothing yet: the streams did not wait for it.
            assert receiver.requests == 0
        finally:
            process.stop()
        if collector == "slow":
            # Each response's span, and each one's session (three first turns: three sessions) at shutdown.
            assert len(receiver.wait_for(6)) == 6
    if collector == "down":
        assert any("OTLP export to" in line and "lost" in line for line in process.lines), process.lines[-5:]


def test_a_websocket_response_is_a_span_at_its_messages_times(provider):
    """The official SDK's Responses WebSocket mode through mitmdump: the response's span, inside its
    connection's session, from its first to its last message."""
    with Receiver() as receiver:
        process, port = start(provider, f"toolcall_lens_otlp_endpoint={receiver.url}")
        try:
            client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="test-key", max_retries=0)
            with client.beta.responses.connect() as conn:
                conn.send({"type": "response.create", "model": "sequential", "tools": TOOLS})
                got = []  # the calls the SDK was told of
                for event in conn:
                    if event.type == "response.output_item.added" and event.item.type == "function_call":
                        got.append(event.item.name)
                    if event.type in ("response.completed", "error"):
                        break
            (span,) = receiver.wait_for(1)
        finally:
            process.stop()
        spans = receiver.wait_for(2)
    assert event.type == "response.completed" and len(got) == 2
    assert (
        span["name"] == "chat sequential" and span["attributes"]["toolcall_lens.format"] == "openai-responses"
    )
    assert [p["name"] for p in json.loads(span["attributes"]["gen_ai.output.messages"])[0]["parts"]] == got
    (session,) = [s for s in spans if s["name"].startswith("invoke_agent ")]
    assert span["traceId"] == session["traceId"] and span["parentSpanId"] == session["spanId"]
    assert session["attributes"]["gen_ai.conversation.id"] == span["attributes"]["gen_ai.conversation.id"]
    assert span["startTimeUnixNano"] < span["endTimeUnixNano"]
