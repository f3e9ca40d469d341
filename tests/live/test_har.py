"""HAR files real producers wrote, all real: mitmdump's own ``hardump`` beside its ``-w`` dump of the same
traffic (every format's interleaved stream from scripts/fake_provider, and a Responses WebSocket
conversation), and headless Chromium recording a HAR with Playwright while a page streams a Chat
Completions response with ``fetch``. The CLI reads each HAR as it reads the dump of the same flows, and the
addon reads a HAR loaded with ``mitmdump -nr`` as the CLI does."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
from pathlib import Path

import fake_provider as fp
import pytest
from lab import BIN, ROOT, Process, start_fake_provider, start_mitmdump
from websockets.sync.client import connect

CHROMIUM = Path("/usr/bin/chromium")
TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("search_circulars", "get_user_profile", "get_weather", "get_time")
]


def cli(*args: str) -> tuple[int, dict, str]:
    done = subprocess.run(
        [str(BIN / "toolcall-lens"), "--json", *args], capture_output=True, timeout=120, check=False
    )
    return done.returncode, json.loads(done.stdout), done.stderr.decode()


def essence(result: dict) -> tuple:
    """What a reading of an exchange must agree on, whatever it was read from (timing aside)."""
    calls = [(c["id"], c["name"], c["arguments"]) for ch in result["choices"] for c in ch["tool_calls"]]
    return result["format"], calls, [w["code"] for w in result["warnings"]], result["complete"]


def websocket_turn(port: int) -> None:
    with connect(f"ws://127.0.0.1:{port}/v1/responses", compression=None) as ws:
        ws.send(json.dumps({"type": "response.create", "model": "interleaved", "tools": TOOLS}))
        for _ in range(200):
            if json.loads(ws.recv(timeout=20)).get("type") in ("response.completed", "error"):
                break


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    """(a mitmdump -w dump, the HAR the same mitmdump wrote of the same flows)."""
    work = tmp_path_factory.mktemp("har")
    dump, har = work / "flows.mitm", work / "flows.har"
    provider, provider_port = start_fake_provider(delay=0.0)
    try:
        proxy, port = start_mitmdump(provider_port, dump, f"hardump={har}")
        try:
            for format in fp.FORMATS:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                conn.request(
                    "POST",
                    fp.path(format, "interleaved"),
                    fp.request_body(format, "interleaved"),
                    {"Content-Type": "application/json"},
                )
                conn.getresponse().read()
                conn.close()
            websocket_turn(port)
        finally:
            assert proxy.stop() == 0  # mitmdump writes its HAR as it ends
    finally:
        provider.stop()
    return dump, har


def test_the_har_mitmproxy_wrote_reads_as_its_dump_of_the_same_flows(captured):
    dump, har = captured
    code, from_har, err = cli(str(har))
    assert code == 1 and err == "", err  # interleaved streams: recency warnings
    _, from_dump, _ = cli(str(dump))
    assert [essence(r) for r in from_har["results"]] == [essence(r) for r in from_dump["results"]]
    formats = [r["format"] for r in from_har["results"]]
    assert formats == [*fp.FORMATS, "openai-responses"]  # the last: the WebSocket connection's response
    assert from_har["results"][-1]["source"]["url"].endswith("/v1/responses")
    for result in from_har["results"][:-1]:
        assert result["source"]["timing"].startswith("the flow's timestamps")
        assert result["timing"]["time_to_first_byte"] >= 0


def test_a_har_loaded_into_the_proxy_is_read_as_the_cli_reads_it(captured, tmp_path):
    _, har = captured
    jsonl = tmp_path / "loaded.jsonl"
    argv = [str(BIN / "mitmdump"), "-n", "-r", str(har), "-s", str(ROOT / "addon.py")]
    argv += ["--set", f"toolcall_lens_jsonl={jsonl}"]
    with Process("mitmdump -nr HAR", argv) as loader:
        assert loader.popen.wait(60) == 0, "\n".join(loader.lines)
    loaded = [json.loads(line)["result"] for line in jsonl.read_bytes().splitlines()]
    _, from_har, _ = cli(str(har))
    # mitmproxy's HAR reader keeps no WebSocket messages: the addon reads the HTTP exchanges.
    http_results = [r for r in from_har["results"] if r.get("websocket") is None]
    assert [essence(r) for r in loaded] == [essence(r) for r in http_results]
    assert all(r["source"]["read"] == "whole: loaded from a file" for r in loaded)


@pytest.mark.needs(
    os.access(CHROMIUM, os.X_OK),
    f"the browser's HAR needs Debian's chromium at {CHROMIUM} (apt-get install chromium; .ci/run installs it)",
)
def test_the_har_chromium_recorded_of_a_streamed_fetch_reads_as_the_stream(tmp_path):
    from playwright.sync_api import sync_playwright

    har = tmp_path / "browser.har"
    provider, port = start_fake_provider(delay=0.005)
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=str(CHROMIUM), args=["--headless", "--no-sandbox", "--disable-gpu"]
            )
            try:
                context = browser.new_context(record_har_path=str(har), record_har_content="embed")
                page = context.new_page()
                page.goto(f"http://127.0.0.1:{port}/")  # the page's origin: the fetch below is same-origin
                body = fp.request_body("openai-chat", "interleaved").decode()
                received = page.evaluate(
                    """async (body) => {
                        const response = await fetch("/v1/chat/completions", {method: "POST", body,
                            headers: {"content-type": "application/json"}});
                        const reader = response.body.getReader();
                        let size = 0;
                        for (;;) { const {done, value} = await reader.read(); if (done) break; size += value.length; }
                        return size;
                    }""",
                    body,
                )
                context.close()  # writes the HAR
            finally:
                browser.close()
    finally:
        provider.stop()
    expected = fp.body("openai-chat", "interleaved")
    assert received == len(expected)
    code, doc, err = cli(str(har))
    assert code == 1, err
    (result,) = doc["results"]
    assert [(c["name"], c["arguments"]) for c in result["choices"][0]["tool_calls"]] == [
        (c["name"], c["arguments"]) for c in fp.expected_calls("interleaved", "openai-chat")
    ]
    assert [w["code"] for w in result["warnings"]] == ["recency-misroute"]
    assert result["source"]["url"] == f"http://127.0.0.1:{port}/v1/chat/completions"


def test_a_dump_loaded_into_the_proxy_keeps_every_websocket_message_and_reads_the_connection(
    captured, tmp_path
):
    dump, _ = captured
    saved, jsonl = tmp_path / "saved.flows", tmp_path / "loaded.jsonl"
    argv = [str(BIN / "mitmdump"), "-n", "-r", str(dump), "-s", str(ROOT / "addon.py"), "-w", str(saved)]
    argv += ["--set", f"toolcall_lens_jsonl={jsonl}", "--set", "toolcall_lens_websocket_keep=2"]
    with Process("mitmdump -nr dump", argv) as loader:
        assert loader.popen.wait(60) == 0, "\n".join(loader.lines)
    from mitmproxy import io as mio

    with open(dump, "rb") as f:
        (original,) = [flow for flow in mio.FlowReader(f).stream() if flow.websocket is not None]
    with open(saved, "rb") as f:
        (loaded,) = [flow for flow in mio.FlowReader(f).stream() if flow.websocket is not None]
    # A record: not one message trimmed, whatever toolcall_lens_websocket_keep says of live connections.
    assert [m.content for m in loaded.websocket.messages] == [m.content for m in original.websocket.messages]
    records = [json.loads(line) for line in jsonl.read_bytes().splitlines()]
    (connection,) = [r["result"] for r in records if r["result"].get("websocket")]
    _, from_dump, _ = cli(str(dump))
    assert essence(connection) == essence(from_dump["results"][-1])
