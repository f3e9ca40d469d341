"""What a person sees, through a real mitmdump: the content view in `--flow-detail 3`, the JSONL export
under concurrent flows, and API keys that never reach a dump, an export, the log or the view, while the
provider still gets them whole."""

from __future__ import annotations

import hashlib
import http.client
import json
import threading

from lab import settle, start_mitmdump
from mitmproxy import contentviews
from mitmproxy import io as mio
from mitmproxy.test import taddons

SENTINELS = {
    "authorization": "Bearer sk-SENTINELauthorization0123456789",
    "x-api-key": "sk-ant-SENTINELxapikey0123456789",
    "api-key": "azSENTINELapikey0123456789",
    "x-goog-api-key": "AIzaSENTINELgoog0123456789",
    "x-amz-security-token": "IQoJSENTINELamztoken0123456789",
}
QUERY_KEY = "AIzaSENTINELquery0123456789"
ORDER = ("authorization", "x-api-key", "api-key", "x-goog-api-key", "x-amz-security-token")


def post(port: int, scenario: str, headers: dict | None = None, query: str = "") -> tuple[bytes, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    body = json.dumps({"model": scenario, "stream": True, "messages": [{"role": "user", "content": "hi"}]})
    conn.request(
        "POST", "/v1/chat/completions" + query, body, {"Content-Type": "application/json", **(headers or {})}
    )
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return data, dict(response.getheaders())


def test_no_key_reaches_the_dump_the_export_the_log_or_the_view(provider, tmp_path):
    dump, export = tmp_path / "flows.mitm", tmp_path / "export.jsonl"
    process, port = start_mitmdump(provider, dump, f"toolcall_lens_jsonl={export}", "flow_detail=3")
    try:
        _, headers = post(port, "interleaved", SENTINELS, f"?key={QUERY_KEY}")
        process.wait_for(r"toolcall-lens POST")
    finally:
        process.stop()
    # The provider got every key whole: nothing was redacted before the request went out.
    sent = hashlib.sha256("\n".join([SENTINELS[n] for n in ORDER] + [QUERY_KEY]).encode()).hexdigest()
    assert headers["X-Received-Credentials-SHA256"] == sent
    log = "\n".join(process.lines)
    assert "toolcall-lens POST" in log and "recency would build" in log  # flow-detail 3 shows the view
    assert "SENTINEL" not in log
    assert b"SENTINEL" not in dump.read_bytes()
    assert export.read_bytes() and b"SENTINEL" not in export.read_bytes()
    with open(dump, "rb") as f:
        (flow,) = list(mio.FlowReader(f).stream())
    import addon  # noqa: F401 - registers the view, as loading the script does

    with taddons.context():
        shown = contentviews.prettify_message(flow.response, flow)
    assert shown.view_name == "toolcall-lens" and "SENTINEL" not in shown.text
    assert flow.request.headers["authorization"].startswith("Bearer sk-")  # a few characters kept
    assert "SENTINEL" not in (flow.comment or "")


def test_flow_detail_3_prints_the_redacted_key_as_typed(provider):
    # mitmdump prints a header's non-ASCII bytes escaped: the marker must be plain ASCII to read as meant.
    process, port = start_mitmdump(provider, None, "flow_detail=3")
    try:
        post(port, "sequential", {"Authorization": "Bearer sk-test-0123456789abcdef"})
        process.wait_for(r"toolcall-lens POST")
    finally:
        process.stop()
    shown = [line.strip() for line in process.lines if line.strip().lower().startswith("authorization:")]
    assert shown == ["Authorization: Bearer sk-tes...[redacted]"], shown


def test_the_jsonl_export_never_shows_half_a_record(provider, tmp_path):
    export = tmp_path / "live.jsonl"
    process, port = start_mitmdump(provider, None, f"toolcall_lens_jsonl={export}")
    torn: list[bytes] = []
    stop = threading.Event()

    def read_while_written() -> None:
        # A JSONL reader takes the lines that end in a newline; each must be one whole record, never two
        # records' bytes mixed (each record is one O_APPEND write) nor a record's front half.
        while not stop.is_set():
            content = export.read_bytes() if export.exists() else b""
            for line in content[: content.rfind(b"\n") + 1].splitlines():
                try:
                    json.loads(line)
                except ValueError:
                    torn.append(line[:200])

    reader = threading.Thread(target=read_while_written)
    reader.start()
    try:
        clients = [threading.Thread(target=post, args=(port, s)) for s in ["interleaved", "sequential"] * 8]
        for client in clients:
            client.start()
        for client in clients:
            client.join(60)
        settle(lambda: sum("toolcall-lens POST" in line for line in process.lines) >= 16)
    finally:
        stop.set()
        reader.join(10)
        process.stop()
    assert torn == []
    records = [json.loads(line) for line in export.read_bytes().splitlines()]
    assert len(records) == 16 and len({r["flow_id"] for r in records}) == 16
    assert sorted(r["result"]["model"] for r in records) == ["interleaved"] * 8 + ["sequential"] * 8
