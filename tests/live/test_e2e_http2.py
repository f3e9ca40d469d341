"""An HTTP/2 upstream end to end, all real: scripts/h2_provider.py (TLS with a self-signed certificate, ALPN
h2 only) behind a real mitmdump with the addon as a regular proxy (`ssl_insecure`, a per-test confdir whose
CA the clients trust), spoken to over HTTP/2 by the official openai and anthropic SDKs and raw httpx2 clients (the HTTP client both SDKs are built on).
The provider itself is first checked with a bare h2 client. Every process binds port 0 and is stopped even
on failure."""

from __future__ import annotations

import asyncio
import hashlib
import json
import socket
import ssl
import sys
from pathlib import Path

import anthropic
import fake_provider as fp
import h2.config
import h2.connection
import h2.events
import h2.settings
import httpx2 as httpx
import openai
import pytest
from lab import ROOT, Process, proxy_argv, start_proxy
from mitmproxy import io as mio
from streams import core_part, without_timing

from accumulator.stream import analyze

SAFETY_TIMEOUT = 30  # only so a broken server fails the test instead of hanging it
CHAT_TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("search_circulars", "get_user_profile", "get_weather", "get_time")
]
ANTHROPIC_TOOLS = [
    {"name": f["function"]["name"], "description": "a tool", "input_schema": {"type": "object"}}
    for f in CHAT_TOOLS
]
MESSAGES = [{"role": "user", "content": "Find the RBI circulars and my profile."}]
# The hazards the scenarios' streams really carry: anything else would be the transport's doing.
HAZARDS = {"interleaved": ["recency-misroute"], "sequential": []}


def start_h2_provider(delay: float) -> tuple[Process, int]:
    process = Process(
        "h2_provider",
        [sys.executable, str(ROOT / "scripts" / "h2_provider.py"), "--port", "0", "--delay", str(delay)],
    )
    try:
        port = int(process.wait_for(r"^h2_provider listening on https://127\.0\.0\.1:(\d+)$").group(1))
    except BaseException:
        process.stop()
        raise
    return process, port


@pytest.fixture(scope="module")
def upstream():
    process, port = start_h2_provider(delay=0.002)
    try:
        yield port
    finally:
        process.stop()


class Proxy:
    def __init__(self, process: Process, port: int, dump: Path, ca: Path) -> None:
        self.process, self.port, self.dump, self.ca = process, port, dump, ca

    def client(self) -> httpx.Client:
        """An HTTP/2 client that goes through the proxy and trusts its CA (and nothing else)."""
        return httpx.Client(http2=True, proxy=self.url, verify=self.trust(), timeout=SAFETY_TIMEOUT)

    def trust(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=self.ca)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def flows(self) -> list:
        """Stop mitmdump (it closes its dump file) and read the flows back as mitmproxy does."""
        self.process.stop()
        with open(self.dump, "rb") as f:
            return list(mio.FlowReader(f).stream())


def run_proxy(tmp_path: Path, *options: str):
    """mitmdump with the addon as a regular proxy; its CA is made in a confdir of this test's own."""
    confdir = tmp_path / "confdir"
    confdir.mkdir()
    dump = tmp_path / "flows.mitm"
    process, port = start_proxy(proxy_argv(None, *options, f"confdir={confdir}", dump=dump))
    ca = confdir / "mitmproxy-ca-cert.pem"
    if not ca.is_file():
        process.stop()
        raise RuntimeError(f"mitmdump made no CA in {confdir}")
    return Proxy(process, port, dump, ca)


@pytest.fixture
def proxy(tmp_path):
    proxy = run_proxy(tmp_path, "ssl_insecure=true")
    try:
        yield proxy
    finally:
        proxy.process.stop()


def result_of(flow) -> dict:
    return flow.metadata["toolcall_lens"]


def calls(result: dict) -> list[dict]:
    return [
        {"id": c["id"], "name": c["name"], "arguments": c["arguments"]}
        for choice in result["choices"]
        for c in choice["tool_calls"]
    ]


def serious(result: dict) -> list[str]:
    return [w["code"] for w in result["warnings"] if w["severity"] == "warning"]


# How mitmproxy words a client that hangs up once it has the end marker (the SDKs may, before END_STREAM).
HUNG_UP = (None, "Client disconnected.", "stream reset by client (CANCEL)")


def assert_truthful_h2_flow(flow, format: str, scenario: str, *, sdk: bool = False) -> None:
    """An LLM flow that crossed HTTP/2 on both sides, rebuilt exactly, complete, with no warning but the
    stream's own hazard, and analysed live exactly as the upstream's bytes are offline."""
    assert (flow.error and flow.error.msg) in (HUNG_UP if sdk else (None,))
    assert flow.request.http_version == "HTTP/2.0" and flow.response.http_version == "HTTP/2.0"
    result = result_of(flow)
    assert result["format"] == format and result["streamed"] is True and result["complete"] is True
    assert calls(result) == fp.expected_calls(scenario, format)
    assert serious(result) == HAZARDS[scenario]
    # The body kept on the flow is the upstream's, byte for byte (compressed, when it was sent so) ...
    body = flow.response.raw_content
    assert hashlib.sha256(body).hexdigest() == flow.response.headers["x-body-sha256"]
    # ... and what the addon made of it, frame by frame, is what the core makes of it in one piece.
    offline = analyze(
        body,
        format,
        request=flow.request.get_content(strict=False),
        encoding=flow.response.headers.get("content-encoding"),
    )
    live = without_timing(core_part(result))
    # The addon also says what checking the request's echoes did (a first request: nothing to check).
    assert live.pop("evidence")["reason"].startswith("the request echoes no tool call")
    assert live == without_timing(offline)


# -- the provider by itself, with a bare h2 client -----------------------------------------------------------


def h2_exchange(port: int, requests: list[tuple[str, bytes]], window: int | None = None):
    """Send all requests at once on one HTTP/2 connection; returns ({stream id: observations}, the stream id
    of every non-empty DATA frame in arrival order). window: our SETTINGS_INITIAL_WINDOW_SIZE."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # self-signed, by design
    context.set_alpn_protocols(["h2"])
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.initiate_connection()
    if window is not None:
        conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window})
    streams: dict[int, dict] = {}
    for path, body in requests:
        stream_id = conn.get_next_available_stream_id()
        headers = [(":method", "POST"), (":scheme", "https"), (":authority", f"127.0.0.1:{port}")]
        conn.send_headers(stream_id, [*headers, (":path", path), ("content-type", "application/json")])
        conn.send_data(stream_id, body, end_stream=True)
        streams[stream_id] = {"headers": {}, "frames": [], "ended": False, "reset": None}
    order: list[int] = []
    with (
        socket.create_connection(("127.0.0.1", port), timeout=SAFETY_TIMEOUT) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as sock,
    ):
        assert sock.selected_alpn_protocol() == "h2"
        sock.sendall(conn.data_to_send())
        while not all(s["ended"] or s["reset"] is not None for s in streams.values()):
            data = sock.recv(65536)
            assert data, "the provider closed the connection"
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.ResponseReceived):
                    streams[event.stream_id]["headers"] = dict(event.headers)
                elif isinstance(event, h2.events.DataReceived):
                    if event.data:
                        streams[event.stream_id]["frames"].append(event.data)
                        order.append(event.stream_id)
                    conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                elif isinstance(event, h2.events.StreamEnded):
                    streams[event.stream_id]["ended"] = True
                elif isinstance(event, h2.events.StreamReset):
                    streams[event.stream_id]["reset"] = event.error_code
            sock.sendall(conn.data_to_send())
    return streams, order


def test_h2_provider_streams_one_data_frame_per_event_on_concurrent_streams(upstream):
    cases = [("openai-chat", "interleaved"), ("anthropic-messages", "sequential"), ("openai-chat", "text")]
    streams, order = h2_exchange(upstream, [(fp.path(f, s), fp.request_body(f, s)) for f, s in cases])
    for (format, scenario), stream in zip(cases, streams.values(), strict=True):
        assert stream["ended"] and stream["reset"] is None
        assert stream["headers"][":status"] == "200" and stream["headers"]["x-scenario"] == scenario
        assert stream["headers"]["content-type"] == fp.content_type(format)
        assert tuple(stream["frames"]) == fp.events(format, scenario)  # one event, one DATA frame
        body = b"".join(stream["frames"])
        assert hashlib.sha256(body).hexdigest() == stream["headers"]["x-body-sha256"]
    # All three were served at once: their frames interleave instead of coming one stream after another.
    assert order != sorted(order)


def test_h2_provider_waits_for_window_updates_when_the_window_is_small(upstream):
    # A 100-byte window is smaller than every event: each is split to fit, and the provider must wait for
    # our WINDOW_UPDATEs (sent as we read) to send the rest. Nothing may be lost or reordered.
    format, scenario = "openai-chat", "interleaved"
    streams, _ = h2_exchange(upstream, [(fp.path(format, scenario), fp.request_body(format, scenario))], 100)
    (stream,) = streams.values()
    assert stream["ended"]
    assert all(len(frame) <= 100 for frame in stream["frames"])
    assert len(stream["frames"]) > len(fp.events(format, scenario))
    assert b"".join(stream["frames"]) == fp.body(format, scenario)


def test_h2_provider_stops_cleanly_on_sigterm_with_a_stream_open():
    process, port = start_h2_provider(delay=0.002)
    try:
        with httpx.Client(http2=True, verify=False, timeout=SAFETY_TIMEOUT) as client:
            body = fp.request_body("openai-chat", "gated")  # one event, then it waits for GET /release
            url = f"https://127.0.0.1:{port}/v1/chat/completions"
            with client.stream("POST", url, content=body) as response:
                assert next(response.iter_raw()).startswith(b"data: ")
                assert process.stop() == 0  # SIGTERM; a SIGKILL after the grace period would give -9
    finally:
        process.stop()
    assert process.lines == [f"h2_provider listening on https://127.0.0.1:{port}"]  # and nothing else


# -- through a real mitmdump ---------------------------------------------------------------------------------


def test_openai_sdk_over_http2_through_mitmdump_gets_both_interleaved_calls(upstream, proxy):
    client = openai.OpenAI(
        base_url=f"https://127.0.0.1:{upstream}/v1",
        api_key="sk-test",
        max_retries=0,
        http_client=proxy.client(),
    )
    with client.chat.completions.stream(model="interleaved", messages=MESSAGES, tools=CHAT_TOOLS) as stream:
        final = stream.get_final_completion()
    client.close()
    sdk = [
        {"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
        for c in final.choices[0].message.tool_calls
    ]
    assert sdk == fp.expected_calls("interleaved")

    (flow,) = proxy.flows()
    assert_truthful_h2_flow(flow, "openai-chat", "interleaved", sdk=True)
    assert flow.request.headers["authorization"].endswith("...[redacted]")  # before the dump saw it


@pytest.mark.parametrize(
    "format,scenario,encoding",
    [
        ("openai-chat", "interleaved", None),
        ("openai-chat", "sequential", None),
        ("anthropic-messages", "interleaved", None),
        ("openai-chat", "interleaved", "gzip"),
        ("anthropic-messages", "sequential", "br"),
    ],
)
def test_client_over_http2_receives_exactly_the_bytes_the_upstream_sent(
    upstream, proxy, format, scenario, encoding
):
    headers = {"Content-Type": "application/json"} | ({"X-Fake-Encoding": encoding} if encoding else {})
    url = f"https://127.0.0.1:{upstream}{fp.path(format, scenario)}"
    body = fp.request_body(format, scenario)
    with proxy.client() as client, client.stream("POST", url, content=body, headers=headers) as response:
        received = b"".join(response.iter_raw())
    assert response.status_code == 200 and response.http_version == "HTTP/2"
    assert hashlib.sha256(received).hexdigest() == response.headers["x-body-sha256"]
    assert response.headers.get("content-encoding") == encoding

    (flow,) = proxy.flows()
    assert flow.response.raw_content == received
    assert_truthful_h2_flow(flow, format, scenario)
    if encoding:
        assert flow.response.headers["content-encoding"] == encoding
        plain = analyze(fp.body(format, scenario), format, request=flow.request.get_content(strict=False))
        assert without_timing(result_of(flow))["choices"] == without_timing(plain)["choices"]


def test_anthropic_sdk_over_http2_through_mitmdump_gets_its_calls(upstream, proxy):
    client = anthropic.Anthropic(
        base_url=f"https://127.0.0.1:{upstream}",
        api_key="sk-ant-test",
        max_retries=0,
        http_client=proxy.client(),
    )
    messages = {}
    for scenario in ("interleaved", "sequential"):
        with client.messages.stream(
            model=scenario, max_tokens=1024, messages=MESSAGES, tools=ANTHROPIC_TOOLS
        ) as stream:
            messages[scenario] = stream.get_final_message()
    client.close()
    for scenario, message in messages.items():
        sdk = [(b.id, b.name, b.input) for b in message.content if b.type == "tool_use"]
        expected = fp.expected_calls(scenario, "anthropic-messages")
        assert sdk == [(c["id"], c["name"], json.loads(c["arguments"])) for c in expected]

    flows = proxy.flows()
    assert [f.request.json()["model"] for f in flows] == ["interleaved", "sequential"]
    for flow, scenario in zip(flows, messages, strict=True):
        assert_truthful_h2_flow(flow, "anthropic-messages", scenario, sdk=True)


def test_concurrent_streams_share_one_http2_connection_on_both_sides(upstream, proxy):
    scenarios = ["interleaved", "sequential"] * 4

    async def run() -> list[tuple[httpx.Response, bytes]]:
        async with httpx.AsyncClient(
            http2=True, proxy=proxy.url, verify=proxy.trust(), timeout=SAFETY_TIMEOUT
        ) as client:
            # One request first, so the concurrent ones find the HTTP/2 connection open and share it.
            assert (await client.get(f"https://127.0.0.1:{upstream}/health")).text == "ok\n"

            async def one(scenario: str) -> tuple[httpx.Response, bytes]:
                response = await client.post(
                    f"https://127.0.0.1:{upstream}/v1/chat/completions",
                    content=fp.request_body("openai-chat", scenario),
                    headers={"X-Fake-Delay": "0.01"},
                )
                return response, response.content

            return await asyncio.gather(*(one(scenario) for scenario in scenarios))

    for response, body in asyncio.run(run()):
        assert response.http_version == "HTTP/2"
        assert hashlib.sha256(body).hexdigest() == response.headers["x-body-sha256"]

    health, *llm = proxy.flows()
    assert health.request.path == "/health" and "toolcall_lens" not in health.metadata
    assert len(llm) == len(scenarios)
    assert len({f.client_conn.id for f in [health, *llm]}) == 1  # one connection from the client
    assert len({f.server_conn.id for f in [health, *llm]}) == 1  # one to the upstream: multiplexed
    for flow in llm:
        assert_truthful_h2_flow(flow, "openai-chat", flow.request.json()["model"])


def test_upstream_resetting_its_stream_gives_a_truncated_flow_and_the_connection_goes_on(upstream, proxy):
    # `truncated`: RST_STREAM after three events, the HTTP/2 form of a provider dying mid-stream.
    url = f"https://127.0.0.1:{upstream}/v1/chat/completions"
    with proxy.client() as client:
        with client.stream("POST", url, content=fp.request_body("openai-chat", "truncated")) as response:
            assert response.http_version == "HTTP/2"
            partial = bytearray()
            with pytest.raises(httpx.RemoteProtocolError, match="StreamReset"):
                for piece in response.iter_raw():
                    partial += piece
        assert partial == b"".join(fp.events("openai-chat", "truncated", cut=True))
        # The same client connection, through the same proxy, to the same upstream: still serving.
        after = client.post(url, content=fp.request_body("openai-chat", "sequential"))
        assert after.http_version == "HTTP/2"
        assert hashlib.sha256(after.content).hexdigest() == after.headers["x-body-sha256"]

    cut, following = proxy.flows()
    assert cut.error is not None  # mitmproxy's words for it: "stream reset by client (INTERNAL_ERROR)"
    result = result_of(cut)
    assert result["complete"] is False and "truncated-stream" in serious(result)
    assert cut.response.http_version == "HTTP/2.0" and cut.response.raw_content == partial
    assert cut.marked
    assert following.server_conn.id == cut.server_conn.id  # the reset ended a stream, not the connection
    assert_truthful_h2_flow(following, "openai-chat", "sequential")


def test_without_ssl_insecure_the_self_signed_upstream_is_refused_and_the_proxy_keeps_serving(
    upstream, provider, tmp_path
):
    proxy = run_proxy(tmp_path)  # mitmproxy verifies upstream certificates by default
    try:
        with proxy.client() as client:
            for _ in range(2):
                refused = client.post(
                    f"https://127.0.0.1:{upstream}/v1/chat/completions",
                    content=fp.request_body("openai-chat", "interleaved"),
                    headers={"Authorization": "Bearer sk-test-refused"},
                )
                assert refused.status_code == 502
                assert "self-signed certificate" in refused.text
            # The same proxy still carries a stream to a plain-HTTP upstream, whole and annotated.
            with client.stream(
                "POST",
                f"http://127.0.0.1:{provider}/v1/chat/completions",
                content=fp.request_body("openai-chat", "interleaved"),
            ) as response:
                received = b"".join(response.iter_raw())
        assert response.status_code == 200
        assert hashlib.sha256(received).hexdigest() == response.headers["x-body-sha256"]
        flows = proxy.flows()
    finally:
        proxy.process.stop()

    *failed, served = flows
    assert len(failed) == 2
    for flow in failed:
        # No response ever came: the flow carries mitmproxy's reason, the addon has nothing to annotate,
        # and the key it carried is still redacted before the dump was written.
        assert flow.response is None and "self-signed certificate" in flow.error.msg
        assert "toolcall_lens" not in flow.metadata
        assert "sk-test-refused" not in flow.request.headers["authorization"]
    result = result_of(served)
    assert served.response.http_version == "HTTP/1.1" and served.response.raw_content == received
    assert result["complete"] is True and calls(result) == fp.expected_calls("interleaved")
    assert serious(result) == HAZARDS["interleaved"]


def test_rewritten_streams_over_http2_stay_valid(upstream, tmp_path):
    # Injection over HTTP/2 on both sides, from a gzip upstream: the body goes out rewritten and gzipped
    # again in new DATA frames, and the SDK rebuilds the same calls.
    proxy = run_proxy(
        tmp_path,
        "ssl_insecure=true",
        "toolcall_lens_inject=interleave",
        "toolcall_lens_inject=split-names",
        "toolcall_lens_inject=rechunk",
    )
    try:
        client = openai.OpenAI(
            base_url=f"https://127.0.0.1:{upstream}/v1",
            api_key="sk-test",
            max_retries=0,
            http_client=proxy.client(),
            default_headers={"X-Fake-Encoding": "gzip"},
        )
        with client.chat.completions.stream(model="sequential", messages=MESSAGES) as stream:
            final = stream.get_final_completion()
        client.close()
        sdk = [
            {"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
            for c in final.choices[0].message.tool_calls
        ]
        assert sdk == fp.expected_calls("sequential")
        (flow,) = proxy.flows()
    finally:
        proxy.process.stop()
    assert flow.response.http_version == "HTTP/2.0" and flow.response.headers["content-encoding"] == "gzip"
    result = result_of(flow)
    assert result["rewrite"]["inject"] == ["interleave", "split-names", "rechunk"]
    assert result["rewrite"]["reencoded"] and result["rewrite"]["upstream"]["calls_same"]
    assert result["compatibility"]["recency"]["verdict"] == "breaks"  # what the client got was hostile
