"""The OpenAI Agents SDK (openai-agents), a real agent with OpenAI's built-in client tools (ShellTool,
ApplyPatchTool), through a real mitmdump with the addon against the fake provider, over HTTP and over the
SDK's Responses WebSocket transport: its tools run what the provider sent (a shell command, a patch adding
a file), and the addon rebuilds both calls as built-in calls, declared, answered and echoed, with no
warning. Before the built-in tools were read the addon said "no calls" for that turn."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from fake_provider.agent import FINAL_TEXT, PATCH_OPERATION, PATCHED, PATCHED_TEXT
from lab import start_fake_provider, start_mitmdump
from streams import ROOT

pytestmark = pytest.mark.live

CLIENT = ROOT / "tests" / "openai_agents_client.py"


def run(api: str, worker: bool, tmp: Path) -> dict:
    work = tmp / "work"
    work.mkdir()
    export = tmp / "records.jsonl"
    provider, provider_port = start_fake_provider(0.002)
    try:
        options = (f"toolcall_lens_jsonl={export}", f"toolcall_lens_worker={str(worker).lower()}")
        proxy, port = start_mitmdump(provider_port, tmp / "flows.mitm", *options)
        try:
            argv = [sys.executable, str(CLIENT), f"http://127.0.0.1:{port}/v1", "--dir", str(work)]
            done = subprocess.run(
                [*argv, "--api", api],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
        finally:
            proxy.stop()
        with urllib.request.urlopen(f"http://127.0.0.1:{provider_port}/agent", timeout=10) as answer:
            sent = json.loads(answer.read())
    finally:
        provider.stop()
    assert done.returncode == 0, done.stderr[-4000:]
    records = [json.loads(line) for line in export.read_text().splitlines()]
    return {"client": json.loads(done.stdout), "sent": sent, "records": records, "work": work}


@pytest.mark.parametrize("worker", [False, True], ids=["in-proxy", "worker"])
@pytest.mark.parametrize("api", ["responses", "websocket"])
def test_the_agents_sdks_shell_and_patch_calls_are_rebuilt_declared_and_answered(api, worker, tmp_path):
    outcome = run(api, worker, tmp_path)
    # The SDK ran what the provider sent, and finished.
    assert outcome["client"]["done"] == [
        {"tool": "shell", "command": "echo hi", "exit": 0},
        {"tool": "apply_patch", "operation": "create_file", "path": PATCHED},
    ]
    assert (outcome["work"] / PATCHED).read_text().strip() == PATCHED_TEXT.strip()  # as the SDK applied it
    assert outcome["client"]["final"] == FINAL_TEXT
    # The addon rebuilt the calls the provider sent: named by their tools' types, said built-in.
    (turn,) = [entry for entry in outcome["sent"] if entry["answer"] == "calls"]
    shell, patch = turn["calls"]
    expected = [
        (shell["id"], "shell", {"commands": ["echo hi"], "timeout_ms": None, "max_output_length": None}),
        (patch["id"], "apply_patch", PATCH_OPERATION),
    ]
    rebuilt = [
        (call["id"], call["name"], json.loads(call["arguments"]))
        for record in outcome["records"]
        for choice in record["result"].get("choices", ())
        for call in choice["tool_calls"]
    ]
    assert rebuilt == expected
    builtins = [call.get("builtin") for r in outcome["records"] for ch in r["result"].get("choices", ()) for call in ch["tool_calls"]]  # fmt: skip
    assert builtins == ["shell", "apply_patch"]
    # Declared by their types, whole in their items, answered: nothing to warn of.
    loud = [(w["code"], w["message"]) for r in outcome["records"] for w in r["result"]["warnings"] if w["severity"] == "warning"]  # fmt: skip
    assert loud == []
    ids = {shell["id"], patch["id"]}
    if api == "websocket":
        answered = {i for r in outcome["records"] for i in ((r["result"]["websocket"]["evidence"] or {}).get("answered") or ())}  # fmt: skip
        assert answered == ids
    else:  # the request after them echoed both calls as streamed and answered both
        (evidence,) = [r["result"]["evidence"] for r in outcome["records"] if (r["result"].get("evidence") or {}).get("earlier_flows")]  # fmt: skip
        assert evidence["matched"] == 2 and evidence["unanswered"] == [] and evidence["unknown"] == []
