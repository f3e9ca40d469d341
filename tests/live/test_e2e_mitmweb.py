"""mitmweb, through its own HTTP API (no browser): the mitmweb command lines the docs give start, with their
ports moved to free ones in the same relation, and both the proxy and the page answer; the addon's
commands run as mitmweb's command bar runs them (``POST /commands/NAME``, token and XSRF cookie)."""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.request

import pytest
from lab import BIN
from recipes import DEFAULT_PROXY_PORT, FLAGS, MODE_PORT, Recipe, recipes
from weblab import free_port, start_mitmweb, start_mitmweb_proxy

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


def localised(recipe: Recipe, web_port: int, provider: int, save: str) -> tuple[list[str], list[int]]:
    """The recipe's command line with every port it uses (its defaults too) moved to a free one, the same
    port to the same one (mitmweb's page to ``web_port``), each upstream replaced by the fake provider, and
    mitmweb kept from opening a browser; and the ports its proxies will listen on."""
    ports = {recipe.web_port: web_port}
    for port in recipe.proxy_ports:
        while port not in ports:
            if (candidate := free_port()) not in ports.values():
                ports[port] = candidate
    argv, args = [str(BIN / recipe.tool)], iter(recipe.argv[1:])
    for arg in args:
        value = next(args) if arg in FLAGS or arg == "--set" else None
        option = FLAGS.get(arg) or (value or "").partition("=")[0]
        if option == "mode":
            spec = MODE_PORT.search(value)
            mode = value[: spec.start()] if spec else value
            mode = f"reverse:http://127.0.0.1:{provider}" if mode.startswith("reverse:") else mode
            value = mode + (f"@{ports[int(spec['port'])]}" if spec else "")
        elif option in ("listen_port", "web_port"):
            moved = str(ports[int(value.rpartition("=")[2])])
            value = f"{option}={moved}" if arg == "--set" else moved
        elif option == "save_stream_file":
            value = save
        argv += [arg] if value is None else [arg, value]
    if not recipe.values("web_port"):  # the default, made explicit: the machine's own 8081 is left alone
        argv += ["--set", f"web_port={web_port}"]
    if not recipe.values("listen_port") and DEFAULT_PROXY_PORT in recipe.proxy_ports:
        argv += ["-p", str(ports[DEFAULT_PROXY_PORT])]
    return [*argv, "--set", "web_open_browser=false"], [ports[port] for port in recipe.proxy_ports]


@pytest.mark.parametrize("recipe", recipes("mitmweb"), ids=lambda recipe: recipe.source)
def test_the_docs_mitmweb_command_starts_and_both_the_proxy_and_the_page_answer(recipe, provider, tmp_path):
    started: dict[int, list[int]] = {}  # web port -> the proxy ports of that attempt

    def command_line(web_port: int) -> list[str]:
        argv, started[web_port] = localised(recipe, web_port, provider, str(tmp_path / "flows"))
        return argv

    web = start_mitmweb(command_line)
    try:
        proxy_ports = started[web.web_port]
        assert proxy_ports and web.web_port not in proxy_ports
        for port in proxy_ports:
            web.process.wait_for(rf"listening at 127\.0\.0\.1:{port}\b")
            assert stream_through(port).endswith(b"data: [DONE]\n\n")
        # The page opens at the address mitmweb printed, with its token, and not without it.
        with urllib.request.urlopen(f"{web.url}/?token={web.password}", timeout=30) as page:
            assert page.status == 200 and b"mitmproxy" in page.read()
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{web.url}/", timeout=30)
        assert refused.value.code == 403
    finally:
        web.process.stop()
    assert not any("Traceback" in line for line in web.process.lines), "\n".join(web.process.lines)


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
    # Then its session and turn (no cost: the fake provider's model has no price).
    assert f"127.0.0.1  {REPORT}  session " in line and line.endswith(" turn 1"), line


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
