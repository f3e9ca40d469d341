"""One way to read an exchange: for every format's scenarios, streamed and not, compressed, and every fault
the fake provider sends, the result the addon gave live equals the result the CLI gives on the proxy's
dump of that same flow (timing aside: a file has no clock).

Before the one classifier, the CLI read a JSON 429 on a chat path as a provider-error message, while the
addon had said http-error: this test is the one that would have caught it."""

from __future__ import annotations

import http.client
import json
import subprocess

import fake_provider as fp
import pytest
from lab import BIN, start_fake_provider, start_mitmdump
from streams import without_timing

FAULTS = {  # fault -> (format, headers beyond X-Fake-Fault); each kept small enough for the body cap
    "drop-mid-event": ("anthropic-messages", {}),
    "drip": ("openai-chat", {"X-Fake-Drip-Bytes": "200"}),
    "huge-event": ("openai-chat", {"X-Fake-Size": "300000"}),
    "bomb": ("openai-chat", {"X-Fake-Encoding": "gzip", "X-Fake-Size": "3000000"}),
    "html-502": ("openai-chat", {}),
    "json-429": ("openai-chat", {}),
    "endless-calls": ("openai-chat", {}),
    "endless-arguments": ("openai-chat", {}),
}
ENDLESS_READ = 256 * 1024  # the client of an endless stream leaves after this much


def _send(port: int, format: str, scenario: str, case: str, *, stream=True, headers=None) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    sent = {"Content-Type": "application/json", "X-Test-Case": case, **(headers or {})}
    body = fp.request_body(format, scenario, stream=stream)
    conn.request("POST", fp.path(format, scenario, stream=stream), body, sent)
    response = conn.getresponse()
    try:
        if "endless" in sent.get("X-Fake-Fault", ""):
            response.read(ENDLESS_READ)
        else:
            response.read()
    except http.client.IncompleteRead:
        pass  # a dropped upstream: the client gets what was written
    conn.close()


@pytest.fixture(scope="module")
def flows(tmp_path_factory):
    """(case -> the addon's live result, case -> the CLI's result on the dump)."""
    work = tmp_path_factory.mktemp("front-doors")
    dump, jsonl = work / "flows.mitm", work / "live.jsonl"
    provider, provider_port = start_fake_provider(delay=0.0)
    try:
        proxy, port = start_mitmdump(provider_port, dump, f"toolcall_lens_jsonl={jsonl}")
        try:
            for format in fp.FORMATS:
                for scenario in fp.FORMAT_SCENARIOS[format]:
                    if scenario == "gated":
                        continue  # waits for a release: not a shape of its own
                    _send(port, format, scenario, f"{format}/{scenario}")
                    _send(port, format, scenario, f"{format}/{scenario}/message", stream=False)
                _send(port, format, "interleaved", f"{format}/gzip", headers={"X-Fake-Encoding": "gzip"})
            for fault, (format, headers) in FAULTS.items():
                _send(
                    port, format, "interleaved", f"fault/{fault}", headers={"X-Fake-Fault": fault, **headers}
                )
        finally:
            proxy.stop()
    finally:
        provider.stop()
    live = {}
    for line in jsonl.read_bytes().splitlines():
        record = json.loads(line)
        live[record["flow_id"]] = record["result"]
    done = subprocess.run(
        [str(BIN / "toolcall-lens"), "--json", str(dump)], capture_output=True, timeout=120, check=False
    )
    assert done.returncode in (0, 1), done.stderr.decode()
    from_dump = {r["source"]["flow_id"]: r for r in json.loads(done.stdout)["results"]}
    return live, from_dump


def _comparable(result: dict) -> dict:
    out = without_timing(result)
    out.pop("source", None)
    # Notes that only a clock can give.
    out["warnings"] = [w for w in out["warnings"] if w["code"] != "stalled"]
    return out


def test_every_flow_the_addon_read_the_cli_reads_the_same(flows):
    live, from_dump = flows
    assert len(live) >= 3 * len(fp.FORMATS) + len(FAULTS) - 1
    assert set(from_dump) == set(live), "the two front doors disagree on which flows are LLM exchanges"
    differ = [flow_id for flow_id in live if _comparable(live[flow_id]) != _comparable(from_dump[flow_id])]
    assert differ == [], [
        (live[f]["format"], _comparable(live[f]), _comparable(from_dump[f])) for f in differ[:2]
    ]


def test_a_json_429_is_an_http_error_on_both_sides(flows):
    live, from_dump = flows
    errors = {
        w["status"]: flow_id
        for flow_id, r in live.items()
        for w in r["warnings"]
        if w["code"] == "http-error"
    }
    assert {429, 502} <= set(errors)  # the faults; error scenarios add their own statuses
    for flow_id in errors.values():
        assert [w["code"] for w in from_dump[flow_id]["warnings"]] == ["http-error"]
        assert from_dump[flow_id]["error"] is not None and from_dump[flow_id]["complete"] is False
