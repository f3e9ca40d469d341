"""Faults through a real mitmdump: each ends in a flow annotated with what happened, the client gets the
upstream's bytes unchanged (their hashes agree), the proxy's memory stays at the caps, and the same proxy
keeps serving. One mitmdump serves the whole module, as it would serve an agent all day; the module runs
twice, analysing in the proxy and in its worker process (toolcall_lens_worker), whose memory counts too."""

from __future__ import annotations

import hashlib
import http.client
import itertools
import json
import time
from pathlib import Path

import fake_provider
import openai
import pytest
from lab import children, memory, start_mitmdump

BODY_CAP = 1024 * 1024
MIB = 1024 * 1024


class Proxy:
    def __init__(self, process, port: int, export: Path) -> None:
        self.process, self.port, self.export = process, port, export

    def peak_rss(self) -> int:
        """The peak resident memory so far (VmHWM) of mitmdump and of its analysis worker, in bytes."""
        return memory(self.process.popen.pid, "VmHWM", with_children=True)

    def record(self, case: str, timeout: float = 60.0) -> dict:
        """The JSONL record of the flow whose URL names ``case``, once the addon has written it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.export.exists():
                # Whole lines only: the last one may be being written while we read.
                for line in self.export.read_bytes().split(b"\n")[:-1]:
                    record = json.loads(line)
                    if f"case={case}" in record["url"]:
                        return record
            time.sleep(0.05)
        raise AssertionError(f"no record for {case}; mitmdump said:\n" + "\n".join(self.process.lines[-30:]))

    def log_line(self, case: str) -> str:
        """The addon's one log line for the flow whose URL names ``case``. The JSONL record is written
        before the line is printed, and mitmdump's output is read by a thread: wait for it."""
        self.process.wait_for(rf"toolcall-lens POST .*case={case}\b")
        (line,) = [s for s in self.process.lines if "toolcall-lens POST" in s and f"case={case}" in s]
        return line

    def still_serving(self) -> None:
        """The proxy is alive and a normal streamed request through it gets its calls."""
        assert self.process.popen.poll() is None, "mitmdump exited"
        sdk = openai.OpenAI(base_url=f"http://127.0.0.1:{self.port}/v1", api_key="sk-test", max_retries=0)
        with sdk.chat.completions.stream(
            model="interleaved", messages=[{"role": "user", "content": "hi"}]
        ) as s:
            final = s.get_final_completion()
        calls = [
            {"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
            for c in final.choices[0].message.tool_calls
        ]
        assert calls == fake_provider.expected_calls("interleaved")


@pytest.fixture(scope="module", params=[False, True], ids=["in-proxy", "worker"])
def proxy(request, provider, tmp_path_factory):
    export = tmp_path_factory.mktemp("faults") / "flows.jsonl"
    process, port = start_mitmdump(
        provider,
        None,
        f"toolcall_lens_jsonl={export}",
        f"toolcall_lens_body_cap={BODY_CAP}",
        f"toolcall_lens_worker={str(request.param).lower()}",
    )
    try:
        proxy = Proxy(process, port, export)
        proxy.still_serving()  # warm: the baseline memory includes one ordinary flow (and the worker)
        assert len(children(process.popen.pid)) == request.param  # the worker runs only when asked for
        yield proxy
    finally:
        process.stop()


def request(
    proxy: Proxy, case: str, fault: str | None, scenario: str = "sequential", fmt="openai-chat", **headers
):
    """Send a streamed request for ``scenario`` with X-Fake-Fault ``fault``; the response and connection."""
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=60)
    sent = {"Content-Type": "application/json", **({"X-Fake-Fault": fault} if fault else {})}
    sent.update({k.replace("_", "-"): v for k, v in headers.items()})
    path = fake_provider.path(fmt, scenario)
    path += ("&" if "?" in path else "?") + f"case={case}"
    conn.request("POST", path, fake_provider.request_body(fmt, scenario), sent)
    return conn.getresponse(), conn


def read_all(response: http.client.HTTPResponse) -> tuple[bytes, bool]:
    """(the body bytes the client got, whether the body ended properly)."""
    try:
        return response.read(), True
    except http.client.IncompleteRead as exc:
        return exc.partial, False


def sha256_of(response: http.client.HTTPResponse) -> tuple[str, int]:
    """Read the whole body in 1 MiB reads: (its SHA-256, its length)."""
    digest, total = hashlib.sha256(), 0
    while block := response.read(MIB):
        digest.update(block)
        total += len(block)
    return digest.hexdigest(), total


def codes(record: dict) -> list[str]:
    return [w["code"] for w in record["result"]["warnings"]]


def calls(record: dict) -> list[dict]:
    return [
        {"id": c["id"], "name": c["name"], "arguments": c["arguments"]}
        for c in record["result"]["choices"][0]["tool_calls"]
    ]


def test_upstream_dropping_inside_an_event(proxy):
    response, conn = request(proxy, "drop", "drop-mid-event")
    got, ended = read_all(response)
    conn.close()
    sent = b"".join(fake_provider.drop_mid_event_pieces(fake_provider.events("openai-chat", "sequential")))
    assert not ended and got == sent  # every byte the upstream wrote, and nothing else
    record = proxy.record("drop")
    assert "truncated-stream" in codes(record) and record["result"]["complete"] is False
    assert "peer closed connection" in (record["error"] or "")
    assert calls(record)[0] == fake_provider.expected_calls("sequential")[0]  # the first call was whole
    proxy.still_serving()


def test_a_slow_drip_passes_byte_by_byte_and_is_read_right(proxy):
    # The first 40 bytes one per write, 100 ms apart; the proxy forwards each as it comes.
    response, conn = request(proxy, "drip", "drip", "interleaved", X_Fake_Delay="0.1", X_Fake_Drip_Bytes="40")
    reads, head = 0, b""
    while len(head) < 40:
        piece = response.read1(64)
        assert piece
        head += piece
        reads += 1
    rest, ended = read_all(response)
    conn.close()
    assert ended and hashlib.sha256(head + rest).hexdigest() == response.headers["X-Body-SHA256"]
    # Buffered, the 40 bytes would arrive in one or two reads; passed on as they come, in many.
    assert reads >= 20, reads
    record = proxy.record("drip")
    assert calls(record) == fake_provider.expected_calls("interleaved")
    assert record["result"]["complete"] and "truncated-stream" not in codes(record)
    proxy.still_serving()


def test_a_100_mb_event_without_a_line_end(proxy):
    before = proxy.peak_rss()
    response, conn = request(proxy, "huge", "huge-event")
    digest, total = sha256_of(response)
    conn.close()
    events = fake_provider.events("openai-chat", "sequential")
    assert total == 100 * 1000 * 1000 + len(b"".join(events[: len(events) // 2]))
    assert digest == response.headers["X-Body-SHA256"]
    record = proxy.record("huge")
    assert {"oversized-event", "body-truncated", "truncated-stream"} <= set(codes(record))
    assert record["result"]["stats"]["bytes"] == total
    growth = proxy.peak_rss() - before
    assert growth < 64 * MIB, f"mitmdump grew by {growth / MIB:.0f} MiB for a 100 MB event"
    proxy.still_serving()


def test_a_gzip_bomb(proxy):
    before = proxy.peak_rss()
    response, conn = request(proxy, "bomb", "bomb", X_Fake_Encoding="gzip")
    assert response.headers["Content-Encoding"] == "gzip"
    got, ended = read_all(response)  # http.client does not decompress: the bytes as sent
    conn.close()
    assert ended and hashlib.sha256(got).hexdigest() == response.headers["X-Body-SHA256"]
    assert len(got) < MIB  # 256 MiB once decompressed
    record = proxy.record("bomb")
    assert {"decoded-size-cap", "oversized-event"} <= set(codes(record))
    growth = proxy.peak_rss() - before
    assert growth < 64 * MIB, f"mitmdump grew by {growth / MIB:.0f} MiB for a gzip bomb"
    proxy.still_serving()


@pytest.mark.parametrize(
    ("fault", "megabytes", "expected"),
    [
        # 80 MB: past the 64 MiB analysis cap, and 1,000 calls long before it.
        ("endless-calls", 80, {"calls-cap", "decoded-size-cap", "truncated-stream", "body-truncated"}),
        ("endless-arguments", 30, {"arguments-cap", "truncated-stream", "body-truncated"}),
    ],
)
def test_a_stream_that_never_ends_until_the_client_goes(proxy, fault, megabytes, expected):
    before = proxy.peak_rss()
    response, conn = request(proxy, fault, fault)
    want = megabytes * MIB
    digest, total = hashlib.sha256(), 0
    while total < want:
        block = response.read(min(MIB, want - total))
        assert block
        digest.update(block)
        total += len(block)
    response.close()  # the client gives up (the response holds the socket too): only now does the flow end
    conn.close()
    # What the client got is the start of the stream the provider generates.
    reference, left = hashlib.sha256(), total
    for event in fake_provider.endless(fault):
        reference.update(event[:left])
        left -= min(left, len(event))
        if not left:
            break
    assert digest.hexdigest() == reference.hexdigest()
    record = proxy.record(fault)
    assert expected <= set(codes(record)), codes(record)
    result = record["result"]
    if fault == "endless-calls":
        assert len(result["choices"][0]["tool_calls"]) == 1000 and result["stats"]["calls_dropped"] > 10_000
        assert result["choices"][0]["tool_calls"][999]["id"] == "call_999"
    else:
        (call,) = result["choices"][0]["tool_calls"]
        assert call["arguments_truncated"] and len(call["arguments"]) == 1024 * 1024
    growth = proxy.peak_rss() - before
    assert growth < 64 * MIB, f"mitmdump grew by {growth / MIB:.0f} MiB"
    proxy.still_serving()


def test_an_html_error_page_where_a_stream_was_asked_for(proxy):
    response, conn = request(proxy, "html502", "html-502")
    got, ended = read_all(response)
    conn.close()
    assert response.status == 502 and ended and got == fake_provider.HTML_502
    record = proxy.record("html502")
    assert codes(record) == ["http-error"]  # not a truncated stream
    (warning,) = record["result"]["warnings"]
    assert warning["status"] == 502 and warning["content_type"] == "text/html"
    assert "502 Bad Gateway" in warning["message"] and record["status"] == 502
    assert record["result"]["streamed"] is True  # a stream was asked for, and an error page came
    line = proxy.log_line("html502")
    assert "openai-chat (stream asked for): HTTP 502 Bad Gateway: text/html body: <html>" in line, line
    assert "not streamed" not in line
    proxy.still_serving()


def test_a_json_rate_limit_error_where_a_stream_was_asked_for(proxy):
    response, conn = request(proxy, "json429", "json-429", fmt="anthropic-messages")
    got, ended = read_all(response)
    conn.close()
    assert response.status == 429 and ended and json.loads(got) == fake_provider.RATE_LIMITED
    assert response.headers["Retry-After"] == "20"
    record = proxy.record("json429")
    assert codes(record) == ["http-error"]
    assert record["result"]["error"] == fake_provider.RATE_LIMITED
    assert "Rate limit reached" in record["result"]["warnings"][0]["message"]
    line = proxy.log_line("json429")
    # The log line says the status and the provider's message, not "? (not streamed): no calls".
    assert "anthropic-messages (stream asked for): HTTP 429 Too Many Requests: Rate limit reached" in line, (
        line
    )
    assert "not streamed" not in line and "no calls" not in line
    proxy.still_serving()


def test_the_proxy_served_every_fault_and_wrote_one_record_each(proxy):
    names = [json.loads(line)["url"] for line in proxy.export.read_bytes().split(b"\n")[:-1]]
    faulty = [url for url in names if "case=" in url]
    assert len(faulty) == len(set(faulty))
    assert all(itertools.starmap(lambda a, b: a != b, itertools.pairwise(faulty)))
    proxy.still_serving()
