"""Google's own Live client (`google-genai`, `client.aio.live`) through a real mitmdump: it speaks only
`wss://` when given an API key, so the proxy terminates TLS with its own CA (a fresh confdir), which the
client trusts through `SSL_CERT_FILE`, as an agent on this machine would. The fake provider's Gemini Live
side answers; the addon must rebuild the calls the SDK handed to its caller."""

from __future__ import annotations

import asyncio
import json

from google import genai
from google.genai import types
from lab import proxy_argv, start_fake_provider, start_proxy
from mitmproxy import io as mio


async def live_session(port: int) -> list:
    """One turn with two tools; every call the SDK hands over is answered. Returns the SDK's messages."""
    client = genai.Client(
        api_key="AIza-not-a-real-key-0123456789",
        http_options=types.HttpOptions(base_url=f"https://127.0.0.1:{port}"),
    )
    declarations = [types.FunctionDeclaration(name=n) for n in ("search_circulars", "get_user_profile")]
    config = types.LiveConnectConfig(
        response_modalities=["TEXT"], tools=[types.Tool(function_declarations=declarations)]
    )
    got = []
    async with client.aio.live.connect(model="interleaved", config=config) as session:
        await session.send_client_content(
            turns=types.Content(role="user", parts=[types.Part(text="Find both.")]), turn_complete=True
        )
        async for message in session.receive():
            got.append(message)
            if message.tool_call:
                answers = [
                    types.FunctionResponse(id=call.id, name=call.name, response={"ok": True})
                    for call in message.tool_call.function_calls
                ]
                await session.send_tool_response(function_responses=answers)
            if message.server_content and message.server_content.turn_complete:
                break
    return got


def test_google_genais_live_client_through_the_proxy(tmp_path, monkeypatch):
    confdir, dump = tmp_path / "mitmproxy", tmp_path / "flows.mitm"
    provider, provider_port = start_fake_provider(delay=0.001)
    try:
        proxy, port = start_proxy(proxy_argv(provider_port, f"confdir={confdir}", dump=dump))
        try:
            monkeypatch.setenv("SSL_CERT_FILE", str(confdir / "mitmproxy-ca-cert.pem"))
            got = asyncio.run(asyncio.wait_for(live_session(port), 30))
        finally:
            proxy.stop()
    finally:
        provider.stop()
    sdk_calls = [(c.id, c.name, c.args) for m in got if m.tool_call for c in m.tool_call.function_calls]
    assert len(sdk_calls) == 2
    with open(dump, "rb") as f:
        (flow,) = [flow for flow in mio.FlowReader(f).stream() if getattr(flow, "websocket", None)]
    record = flow.metadata["toolcall_lens"]
    assert record["connection"]["format"] == "gemini-live"
    first, second = record["responses"]
    rebuilt = [(c["id"], c["name"], json.loads(c["arguments"])) for c in first["choices"][0]["tool_calls"]]
    assert rebuilt == sdk_calls
    assert first["websocket"]["evidence"]["answered"] == sorted(c[0] for c in sdk_calls)
    assert not first["warnings"] and second["choices"][0]["text"]
    assert flow.request.headers["x-goog-api-key"].endswith("...[redacted]")
