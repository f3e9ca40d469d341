"""A recorded session played again, all real: the official openai SDK through mitmdump with the addon in
front of scripts/fake_provider, recorded with ``-w``; then, the provider stopped, the same SDK call
answered by mitmproxy's ``--server-replay`` of that dump; and the dump loaded with ``-nr``, as mitmweb's
File > Open loads it. Before, the addon put an empty body in place of a replayed or loaded stream: the
SDK behind a replay got no calls, a dump saved after a load had lost its bodies."""

from __future__ import annotations

import json
import secrets
import subprocess

import openai
import pytest
from doc_commands import commands
from lab import BIN, ROOT, Process, proxy_argv, start_fake_provider, start_mitmdump, start_proxy
from mitmproxy import io as mio
from weblab import start_mitmweb

TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("search_circulars", "get_user_profile")
]
MESSAGES = [{"role": "user", "content": "Find the RBI circulars and my profile."}]
EXPECTED = [
    ("call_abc", "search_circulars", '{"query": "RBI circulars"}'),
    ("call_xyz", "get_user_profile", '{"user_id": "u123"}'),
]


def sdk_calls(port: int) -> list[tuple]:
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="test-key", max_retries=0)
    with client.chat.completions.stream(model="interleaved", messages=MESSAGES, tools=TOOLS) as stream:
        final = stream.get_final_completion()
    return [(c.id, c.function.name, c.function.arguments) for c in final.choices[0].message.tool_calls or ()]


def read(dump) -> list:
    with open(dump, "rb") as f:
        return list(mio.FlowReader(f).stream())


def results(jsonl) -> list[dict]:
    return [json.loads(line)["result"] for line in jsonl.read_bytes().splitlines()]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """(the dump of one SDK call recorded through the addon, the provider's port, now closed)."""
    work = tmp_path_factory.mktemp("replay")
    dump = work / "session.flows"
    provider, provider_port = start_fake_provider(delay=0.0)
    try:
        proxy, port = start_mitmdump(provider_port, dump)
        try:
            assert sdk_calls(port) == EXPECTED
        finally:
            proxy.stop()
    finally:
        provider.stop()
    (flow,) = read(dump)
    assert flow.response.raw_content and flow.metadata["toolcall_lens"]["complete"]
    return dump, provider_port


def test_a_server_replay_sends_the_sdk_the_recorded_stream_and_the_addon_reads_it(recorded, tmp_path):
    dump, provider_port = recorded
    replayed, jsonl = tmp_path / "replayed.flows", tmp_path / "replayed.jsonl"
    argv = proxy_argv(
        provider_port,  # nothing listens there now: every answer must come from the replay
        "connection_strategy=lazy",
        f"toolcall_lens_jsonl={jsonl}",
        dump=replayed,
    )
    proxy, port = start_proxy([*argv, "--server-replay", str(dump)])
    try:
        assert sdk_calls(port) == EXPECTED  # before: an empty body, no calls
    finally:
        proxy.stop()
    (original,), (flow,) = read(dump), read(replayed)
    assert flow.is_replay == "response"
    assert flow.response.raw_content == original.response.raw_content
    (result,) = results(jsonl)
    assert [(c["id"], c["name"], c["arguments"]) for c in result["choices"][0]["tool_calls"]] == EXPECTED
    assert [w["code"] for w in result["warnings"]] == ["recency-misroute"]
    assert result["source"]["read"] == "whole: answered by an addon"
    assert flow.metadata["toolcall_lens"]["choices"] == result["choices"]


def test_a_dump_loaded_into_the_proxy_keeps_its_bodies_and_is_read_as_the_cli_reads_it(recorded, tmp_path):
    dump, _ = recorded
    saved, jsonl = tmp_path / "saved.flows", tmp_path / "loaded.jsonl"
    argv = [str(BIN / "mitmdump"), "-n", "-r", str(dump), "-s", str(ROOT / "addon.py")]
    argv += ["-w", str(saved), "--set", f"toolcall_lens_jsonl={jsonl}"]
    with Process("mitmdump -nr", argv) as loader:
        loader.wait_for(r"toolcall-lens POST .*recency-misroute", timeout=60)
        assert loader.popen.wait(60) == 0
    (original,), (flow,) = read(dump), read(saved)
    assert flow.response.raw_content == original.response.raw_content  # before: b""
    (result,) = results(jsonl)
    assert result["source"] == {
        "read": "whole: loaded from a file",
        "timing": "recorded live by the addon; the rest re-computed from the stored body",
    }
    assert result["timing"] == original.metadata["toolcall_lens"]["timing"]
    cli = subprocess.run(
        [str(BIN / "toolcall-lens"), "--json", str(dump)], capture_output=True, timeout=60, check=False
    )
    (from_cli,) = json.loads(cli.stdout)["results"]
    for key in ("choices", "warnings", "timing", "complete", "usage"):
        assert result[key] == from_cli[key], key


def replay_recipe(dump, upstream: str) -> list[str]:
    """docs/test-bench.md's replay command as written, with the venv's tools, the recorded ``dump``, the
    ``upstream`` it was recorded from, and a free port."""
    (command,) = [
        c for c in commands((ROOT / "docs" / "test-bench.md").read_text()) if "--server-replay" in c.argv
    ]
    argv = []
    for previous, word in zip([None, *command.argv], command.argv, strict=False):
        if word.startswith(".venv/bin/"):
            word = str(BIN / word.rpartition("/")[2])
        elif previous == "--server-replay":
            word = str(dump)
        elif previous == "--mode":
            word = f"reverse:{upstream}@0"
        argv.append(word)
    return argv


def test_the_replay_recipe_plays_the_session_back_in_the_hostile_shape(recorded, tmp_path):
    # docs/test-bench.md's recipe: the recorded session played to the client again, every call at index 0
    # (Groq's and Ollama's shape), with no provider running: openai-python's stream helper keys calls by
    # index and merges them, as Bifrost did.
    dump, provider_port = recorded
    jsonl = tmp_path / "replayed.jsonl"
    argv = replay_recipe(dump, f"http://127.0.0.1:{provider_port}")
    proxy, port = start_proxy([*argv, "--set", f"toolcall_lens_jsonl={jsonl}"])
    try:
        got = sdk_calls(port)
    finally:
        proxy.stop()
    assert [name for _, name, _ in got] == ["search_circularsget_user_profile"]
    (result,) = results(jsonl)
    assert result["rewrite"]["inject"] == ["collide-index"] and result["rewrite"]["upstream"]["calls_same"]
    assert [(c["id"], c["name"], c["arguments"]) for c in result["choices"][0]["tool_calls"]] == EXPECTED
    assert "index-only" in {w["strategy"] for w in result["warnings"] if "strategy" in w}


def test_a_dump_opened_in_mitmweb_shows_each_llm_flow_annotated_with_its_body(recorded):
    # mitmweb -r: what a person opening yesterday's session sees (File > Open loads flows the same way).
    dump, _ = recorded
    password = secrets.token_urlsafe(16)
    web = start_mitmweb(
        lambda web_port: [
            *proxy_argv(
                None,
                f"web_port={web_port}",
                "web_host=127.0.0.1",
                "web_open_browser=false",
                f"web_password={password}",
                tool="mitmweb",
            ),
            "-r",
            str(dump),
        ],
        password,
    )
    try:
        web.process.wait_for(r"toolcall-lens POST .*recency-misroute", timeout=60)
        (flow,) = web.flows()
        status, report = web.command("toolcall.report", "@all")
    finally:
        web.process.stop()
    (original,) = read(dump)
    assert flow["comment"] == original.comment and flow["marked"]
    assert flow["response"]["contentLength"] == len(original.response.raw_content)  # before: 0
    assert status == 200 and "search_circulars, get_user_profile" in report["value"]
