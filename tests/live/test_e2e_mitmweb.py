"""mitmweb, through its own HTTP API (no browser): the addon's commands run as mitmweb's command bar runs
them (``POST /commands/NAME``, token and XSRF cookie)."""

from __future__ import annotations

import http.client
import json
import time

import pytest
from weblab import start_mitmweb_proxy

TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("search_circulars", "get_user_profile")
]
REPORT = "openai-chat  interleaved  calls: search_circulars, get_user_profile  warnings: recency-misroute"


def stream_through(port: int, path: str = "/v1/chat/completions") -> bytes:
    """The fake provider's interleaved Chat Completions stream, through the proxy on ``port``."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        body = json.dumps({"model": "interleaved", "stream": True, "messages": [], "tools": TOOLS})
        conn.request("POST", path, body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        assert response.status == 200
        return response.read()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def web(provider):
    proxy = start_mitmweb_proxy(provider)
    try:
        yield proxy
    finally:
        proxy.process.stop()


@pytest.fixture(scope="module")
def streamed(web) -> None:
    assert stream_through(web.port).endswith(b"data: [DONE]\n\n")
    web.process.wait_for(r"toolcall-lens POST .*recency-misroute", timeout=30)


def test_the_report_command_runs_through_mitmwebs_api(web, streamed):
    # mitmweb has the flow in its view once the addon's hook returned: poll its API until the report has it.
    deadline = time.monotonic() + 30
    while True:
        status, answer = web.command("toolcall.report", "@all")
        assert status == 200 and "error" not in answer, answer
        if answer["value"] != "no LLM flows" or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    (line,) = answer["value"].splitlines()
    assert line.endswith(f"127.0.0.1  {REPORT}"), line


def test_the_export_command_runs_through_mitmwebs_api(web, streamed, tmp_path):
    export = tmp_path / "llm.jsonl"
    status, answer = web.command("toolcall.export", "@all", str(export))
    assert status == 200 and answer == {"value": None}, answer
    (line,) = export.read_bytes().splitlines()
    record = json.loads(line)
    assert record["url"].endswith("/v1/chat/completions") and record["status"] == 200
    calls = [call["name"] for choice in record["result"]["choices"] for call in choice["tool_calls"]]
    assert calls == ["search_circulars", "get_user_profile"]


def test_mitmweb_lists_the_commands_and_refuses_a_call_without_its_token(web):
    status, body = web.api("/commands")
    assert status == 200 and {"toolcall.report", "toolcall.export"} <= set(json.loads(body))
    assert web.api("/commands/toolcall.report", token="not-the-token", body={"arguments": ["@all"]})[0] == 403
    # Why the names changed: mitmweb's command route ([a-z.]+) has no way to the earlier ones.
    assert web.command("toolcall_lens.report", "@all")[0] == 404
