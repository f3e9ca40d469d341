"""The proxy as a test bench, all real: mitmdump with toolcall_lens_inject / _repair in front of the fake
provider, the official openai and anthropic SDKs and a recency-routing client of our own (the pre-fix
Bifrost rule) as clients. Injections keep a correct client's calls; the recency client breaks under
`interleave` and is right again with `serialize`; what the SDKs do under each shape is pinned down."""

from __future__ import annotations

import gzip
import hashlib
import http.client
import json
import time
from pathlib import Path

import anthropic
import fake_provider
import openai
import pytest
from lab import start_mitmdump

from accumulator import analyze
from accumulator.rewrite import supported

MESSAGES = [{"role": "user", "content": "Weather and time in Paris?"}]


class Bench:
    """One mitmdump per set of options, started on first use and stopped with the module."""

    def __init__(self, provider_port: int, tmp: Path) -> None:
        self.provider_port, self.tmp = provider_port, tmp
        self.proxies: dict[tuple, tuple] = {}

    def port(self, inject: tuple = (), repair: tuple = ()) -> int:
        key = (inject, repair)
        if key not in self.proxies:
            export = self.tmp / f"flows-{len(self.proxies)}.jsonl"
            options = [f"toolcall_lens_jsonl={export}"]
            options += [f"toolcall_lens_inject={name}" for name in inject]
            options += [f"toolcall_lens_repair={name}" for name in repair]
            process, port = start_mitmdump(self.provider_port, None, *options)
            self.proxies[key] = (process, port, export)
        return self.proxies[key][1]

    def record(self, inject: tuple = (), repair: tuple = (), case: str = "", timeout: float = 30) -> dict:
        """The JSONL record of the last flow of that proxy (whose URL names ``case``)."""
        _, _, export = self.proxies[inject, repair]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if export.exists():
                # Whole lines only: the last one may be being written while we read.
                records = [json.loads(line) for line in export.read_bytes().split(b"\n")[:-1]]
                records = [r for r in records if case in r["url"]]
                if records:
                    return records[-1]
            time.sleep(0.05)
        raise AssertionError(f"no record for {case!r}")

    def stop(self) -> None:
        for process, _, _ in self.proxies.values():
            process.stop()


@pytest.fixture(scope="module")
def bench(provider, tmp_path_factory):
    bench = Bench(provider, tmp_path_factory.mktemp("rewrite"))
    try:
        yield bench
    finally:
        bench.stop()


def raw(port: int, fmt: str, scenario: str, case: str, **headers) -> tuple[http.client.HTTPResponse, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        path = fake_provider.path(fmt, scenario)
        path += ("&" if "?" in path else "?") + f"case={case}"
        sent = {"Content-Type": "application/json", **{k.replace("_", "-"): v for k, v in headers.items()}}
        conn.request("POST", path, fake_provider.request_body(fmt, scenario), sent)
        response = conn.getresponse()
        return response, response.read()
    finally:
        conn.close()


def sse_payloads(body: bytes) -> list[tuple[str | None, dict]]:
    """(event name, JSON data) of each SSE event, read as a plain client reads them."""
    out = []
    for block in body.replace(b"\r\n", b"\n").split(b"\n\n"):
        name, data = None, []
        for line in block.split(b"\n"):
            if line.startswith(b"event:"):
                name = line[6:].strip().decode()
            elif line.startswith(b"data:"):
                data.append(line[5:].strip())
        if data and data != [b"[DONE]"]:
            out.append((name, json.loads(b"\n".join(data))))
    return out


def recency_chat(body: bytes) -> list[dict]:
    """The pre-fix Bifrost rule: a delta with a function name starts a call, any other fragment goes to the
    most recent call."""
    calls: list[dict] = []
    for _, chunk in sse_payloads(body):
        for choice in chunk.get("choices") or ():
            for delta in (choice.get("delta") or {}).get("tool_calls") or ():
                function = delta.get("function") or {}
                if function.get("name"):
                    calls.append({"id": delta.get("id"), "name": function["name"], "arguments": ""})
                if calls:
                    calls[-1]["arguments"] += function.get("arguments") or ""
    return calls


def recency_responses(body: bytes) -> list[dict]:
    """The same rule on the Responses API (Bifrost's second incident): each argument delta goes to the
    function call added last."""
    calls: list[dict] = []
    for _, event in sse_payloads(body):
        if event.get("type") == "response.output_item.added" and event["item"].get("type") == "function_call":
            item = event["item"]
            calls.append({"id": item["call_id"], "name": item["name"], "arguments": ""})
        elif event.get("type") == "response.function_call_arguments.delta" and calls:
            calls[-1]["arguments"] += event["delta"]
    return calls


RECENCY = {"openai-chat": recency_chat, "openai-responses": recency_responses}


@pytest.mark.parametrize("fmt", sorted(RECENCY))
def test_a_recency_client_breaks_under_interleave_and_is_right_again_with_serialize(bench, fmt):
    expected = fake_provider.expected_calls("sequential", fmt)
    rebuild = RECENCY[fmt]
    _, plain = raw(bench.port(), fmt, "sequential", "plain")
    assert rebuild(plain) == expected  # the provider streams calls one after another: it copes
    _, hostile = raw(bench.port(("interleave",)), fmt, "sequential", "interleaved")
    broken = rebuild(hostile)
    assert broken != expected and [c["name"] for c in broken] == [c["name"] for c in expected]
    assert "".join(c["arguments"] for c in broken) != "".join(c["arguments"] for c in expected)
    _, repaired = raw(bench.port(("interleave",), ("serialize",)), fmt, "sequential", "repaired")
    assert rebuild(repaired) == expected
    # The flows say what was done and what the client got.
    record = bench.record(("interleave",), case="interleaved")["result"]
    assert record["rewrite"]["inject"] == ["interleave"] and record["rewrite"]["upstream"]["calls_same"]
    assert record["compatibility"]["recency"]["verdict"] == "breaks"
    assert "recency-misroute" not in record["rewrite"]["upstream"]["warnings"]
    record = bench.record(("interleave",), ("serialize",), case="repaired")["result"]
    assert record["compatibility"]["recency"]["verdict"] == "ok"


def openai_chat_calls(port: int, scenario: str = "sequential") -> list[dict]:
    sdk = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-test", max_retries=0)
    with sdk.chat.completions.stream(model=scenario, messages=MESSAGES) as stream:
        final = stream.get_final_completion()
    return [
        {"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
        for c in final.choices[0].message.tool_calls or ()
    ]


def openai_responses_calls(port: int, scenario: str = "sequential") -> list[dict]:
    sdk = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-test", max_retries=0)
    with sdk.responses.stream(model=scenario, input="hi") as stream:
        final = stream.get_final_response()
    return [
        {"id": item.call_id, "name": item.name, "arguments": item.arguments}
        for item in final.output
        if item.type == "function_call"
    ]


def anthropic_calls(port: int, scenario: str = "sequential") -> list[dict]:
    sdk = anthropic.Anthropic(base_url=f"http://127.0.0.1:{port}", api_key="sk-ant-test", max_retries=0)
    with sdk.messages.stream(model=scenario, max_tokens=1024, messages=MESSAGES) as stream:
        final = stream.get_final_message()
    return [
        {"id": block.id, "name": block.name, "arguments": json.dumps(block.input, ensure_ascii=False)}
        for block in final.content
        if block.type == "tool_use"
    ]


SDKS = {
    "openai-chat": openai_chat_calls,
    "openai-responses": openai_responses_calls,
    "anthropic-messages": anthropic_calls,
}
SAME_FOR_A_CORRECT_CLIENT = [
    ("openai-chat", "interleave"),
    ("openai-chat", "split-names"),
    ("openai-chat", "rechunk"),
    ("openai-responses", "interleave"),
    ("openai-responses", "rechunk"),
    ("anthropic-messages", "interleave"),
    ("anthropic-messages", "rechunk"),
]


@pytest.mark.parametrize("scenario", ["sequential", "unicode"])
@pytest.mark.parametrize(("fmt", "injection"), SAME_FOR_A_CORRECT_CLIENT)
def test_the_official_sdks_rebuild_the_same_calls_under_each_injection(bench, fmt, injection, scenario):
    calls = SDKS[fmt]
    without = calls(bench.port(), scenario)
    assert without  # the SDK got the calls through the proxy as it is
    assert calls(bench.port((injection,)), scenario) == without
    record = bench.record((injection,))["result"]
    assert record["rewrite"]["inject"] == [injection] and record["rewrite"]["upstream"]["calls_same"]


def test_openai_python_stream_helper_doubles_repeated_names_and_ids(bench):
    # Fireworks' and LiteLLM's shape: openai-python's ChatCompletionStreamState concatenates every string
    # field it sees again (accumulate_delta), so the name and id come out repeated once per delta.
    got = openai_chat_calls(bench.port(("repeat-names",)))
    expected = fake_provider.expected_calls("sequential")
    assert [c["arguments"] for c in got] == [c["arguments"] for c in expected]
    assert [c["name"] for c in got] == [c["name"] * 4 for c in expected]
    record = bench.record(("repeat-names",))["result"]
    assert "field-concat-misroute" in [w["code"] for w in record["warnings"]]
    # reindex also drops the id and name a later delta of the same call repeats: the helper is right.
    assert openai_chat_calls(bench.port(("repeat-names",), ("reindex",))) == expected


def test_openai_python_stream_helper_merges_calls_that_collide_on_index_and_reindex_repairs_it(bench):
    # Groq's and Ollama's shape: every call at index 0. The helper keys by index alone: one merged call.
    got = openai_chat_calls(bench.port(("collide-index",)))
    expected = fake_provider.expected_calls("sequential")
    assert len(got) == 1 and got[0]["name"] == "".join(c["name"] for c in expected)
    record = bench.record(("collide-index",))["result"]
    assert "index-collision" in [w["code"] for w in record["warnings"]]
    # The repair gives each call id its own index again: the helper is right.
    assert openai_chat_calls(bench.port(("collide-index",), ("reindex",))) == expected


def test_rechunk_changes_the_writes_not_the_bytes(bench):
    response, body = raw(bench.port(("rechunk",)), "openai-chat", "unicode", "rechunked")
    assert hashlib.sha256(body).hexdigest() == response.headers["X-Body-SHA256"]
    record = bench.record(("rechunk",), case="rechunked")["result"]
    assert record["rewrite"]["writes"] > 3 * record["stats"]["events"]


def test_a_gzip_stream_is_rewritten_and_encoded_again(bench):
    response, body = raw(
        bench.port(("interleave",)), "openai-chat", "sequential", "gz", X_Fake_Encoding="gzip"
    )
    assert response.headers.get("Content-Encoding") == "gzip"
    assert response.headers.get("Transfer-Encoding") == "chunked"
    body = gzip.decompress(body)
    assert recency_chat(body) != fake_provider.expected_calls("sequential")  # interleaved, and readable
    # The SDK over the same compressed upstream.
    sdk = openai.OpenAI(
        base_url=f"http://127.0.0.1:{bench.port(('interleave',))}/v1",
        api_key="sk-test",
        max_retries=0,
        default_headers={"X-Fake-Encoding": "gzip"},
    )
    with sdk.chat.completions.stream(model="sequential", messages=MESSAGES) as stream:
        final = stream.get_final_completion()
    assert [
        {"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
        for c in final.choices[0].message.tool_calls
    ] == fake_provider.expected_calls("sequential")
    assert bench.record(("interleave",), case="gz")["result"]["rewrite"]["decoded"] == "gzip"


def test_text_streams_pass_through_untouched(bench):
    _, plain = raw(bench.port(), "openai-chat", "text", "text-plain")
    _, rewritten = raw(bench.port(("interleave",), ("serialize",)), "openai-chat", "text", "text-rw")
    assert rewritten == plain


@pytest.mark.parametrize("injection", ["split-names", "repeat-names"])
def test_an_upstream_content_length_is_not_left_stale(bench, injection):
    # The upstream sends Content-Length; the rewritten body is longer. The proxy drops the length and
    # sends chunks, so the client reads the whole new body (a stale length would cut it short).
    port = bench.port((injection,))
    response, body = raw(port, "openai-chat", "sequential", f"length-{injection}", X_Fake_Framing="length")
    assert response.headers.get("Content-Length") is None
    assert response.headers.get("Transfer-Encoding") == "chunked"
    assert body.endswith(b"data: [DONE]\n\n")
    assert len(body) > len(fake_provider.body("openai-chat", "sequential"))
    record = bench.record((injection,), case=f"length-{injection}")["result"]
    assert record["complete"] and record["rewrite"]["upstream"]["calls_same"]
    _, untouched = raw(bench.port(), "openai-chat", "sequential", "length-plain", X_Fake_Framing="length")
    assert untouched == fake_provider.body("openai-chat", "sequential")


OTHER_FORMATS = ["bedrock-converse", "bedrock-invoke", "cohere-v2", "gemini", "ollama-chat"]


@pytest.mark.parametrize("fmt", OTHER_FORMATS)
def test_every_format_through_the_live_proxy(bench, fmt):
    # No official SDK here for these: the body the client got is read by the core, and the flow's own
    # account is checked. Whole-call formats only take rechunk (the rest is skipped, with a reason).
    expected = [
        (c["id"], c["name"], json.loads(c["arguments"]))
        for c in fake_provider.expected_calls("sequential", fmt)
    ]

    def calls(result):
        return [(c["id"], c["name"], json.loads(c["arguments"])) for c in result["choices"][0]["tool_calls"]]

    inject = ("interleave", "rechunk")
    _, hostile = raw(bench.port(inject), fmt, "sequential", f"{fmt}-hostile")
    client = analyze(hostile, fmt)
    assert calls(client) == expected and client["complete"]
    record = bench.record(inject, case=f"{fmt}-hostile")["result"]
    fragments = "interleave" in supported(fmt)
    assert record["rewrite"]["inject"] == (["interleave", "rechunk"] if fragments else ["rechunk"])
    assert [s["name"] for s in record["rewrite"]["skipped"]] == ([] if fragments else ["interleave"])
    assert record["rewrite"]["upstream"]["calls_same"]
    if fragments:
        assert record["compatibility"]["recency"]["verdict"] == "breaks"
        _, repaired = raw(bench.port(inject, ("serialize",)), fmt, "sequential", f"{fmt}-repaired")
        again = analyze(repaired, fmt)
        assert calls(again) == expected and again["compatibility"]["recency"]["verdict"] == "ok"
