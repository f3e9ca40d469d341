"""scripts/fake_provider as a real process, spoken to by real clients: raw sockets, http.client, the openai
and anthropic SDKs; every wire format decoded here, independently of the module, to check its bodies."""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import selectors
import signal
import socket
import struct
import subprocess
import sys
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import NamedTuple

import anthropic
import brotli
import fake_provider as fp
import openai
import pytest
from backports import zstd
from streams import DATA, ROOT

SCRIPT = ROOT / "scripts" / "fake_provider"

COMPLETE = [name for name in fp.SCENARIOS if name not in ("truncated", "gated")]
TOOL_SCENARIOS = [name for name in fp.SCENARIOS if name not in ("text", "error-midstream")]
SAFETY_TIMEOUT = 15  # only so a broken server fails the test instead of hanging it
MESSAGES = [{"role": "user", "content": "hi"}]


@contextmanager
def running_provider(*args: str) -> Iterator[tuple[subprocess.Popen, int]]:
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            ready = sel.select(SAFETY_TIMEOUT)
        line = proc.stdout.readline() if ready else ""
        prefix = "fake_provider listening on http://127.0.0.1:"
        assert line.startswith(prefix) and line.endswith("\n"), f"first line {line!r}"
        yield proc, int(line[len(prefix) :])
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(SAFETY_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        proc.stdout.close()
        proc.stderr.close()


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    with running_provider("--delay", "0.001") as (_, bound):
        yield bound


def events_of(name: str) -> list[bytes]:
    body = fp.sse_body(name)
    return [event + b"\n\n" for event in body.split(b"\n\n")[:-1]]


def request_bytes(model: str, *, stream: bool = True, close: bool = True) -> bytes:
    body = json.dumps({"model": model, "messages": MESSAGES, "stream": stream}).encode()
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n" + ("Connection: close\r\n" if close else "") + "\r\n"
    )
    return head.encode() + body


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=SAFETY_TIMEOUT)


def read_to_eof(sock: socket.socket, data: bytes = b"") -> bytes:
    while piece := sock.recv(65536):
        data += piece
    return data


def split_response(raw: bytes) -> tuple[str, bytes]:
    head, sep, rest = raw.partition(b"\r\n\r\n")
    assert sep, raw
    return head.decode("latin-1"), rest


def dechunk(data: bytes) -> tuple[list[bytes], bool]:
    """The complete chunks in data, and whether the terminating zero-length chunk was among them."""
    chunks, pos = [], 0
    while (eol := data.find(b"\r\n", pos)) != -1:
        size = int(data[pos:eol], 16)
        if size == 0:
            return chunks, data[eol + 2 : eol + 4] == b"\r\n"
        end = eol + 2 + size
        if len(data) < end + 2:
            break
        assert data[end : end + 2] == b"\r\n"
        chunks.append(data[eol + 2 : end])
        pos = end + 2
    return chunks, False


def post(conn: http.client.HTTPConnection, payload: dict | bytes, headers: dict | None = None):
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    conn.request(
        "POST",
        "/v1/chat/completions",
        body=body,
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    return conn.getresponse()


def client(port: int) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="test", max_retries=0)


# -- the scenario data, without a server ---------------------------------------------------------------------


def test_scenario_names_and_reconstructions():
    assert fp.SCENARIOS == (
        "interleaved",
        "sequential",
        "index-collision",
        "name-repeated",
        "truncated",
        "error-midstream",
        "text",
        "unicode",
        "custom-interleaved",
        "gated",
    )
    assert fp.expected_calls("custom-interleaved") == [
        {"id": "call_p1", "name": "apply_patch", "arguments": "*** Begin Patch\n*** Update File: a.py\n@@\n-x = 1\n+x = 2\n*** End Patch"},
        {"id": "call_r1", "name": "read_file", "arguments": '{"path": "a.py"}'},
    ]  # fmt: skip
    assert fp.expected_calls("unicode") == [
        {"id": "call_u1", "name": "get_weather", "arguments": '{"city": "Zürich", "note": "東京 ✓"}'},
        {"id": "call_u2", "name": "translate", "arguments": '{"text": "Grüße", "to": "日本語"}'},
    ]
    assert fp.expected_calls("interleaved") == [
        {"id": "call_abc", "name": "search_circulars", "arguments": '{"query": "RBI circulars"}'},
        {"id": "call_xyz", "name": "get_user_profile", "arguments": '{"user_id": "u123"}'},
    ]
    assert fp.expected_calls("truncated") == fp.expected_calls("interleaved")
    assert (
        fp.expected_calls("sequential")
        == fp.expected_calls("gated")
        == [
            {"id": "call_w1", "name": "get_weather", "arguments": '{"city": "Paris"}'},
            {"id": "call_t1", "name": "get_time", "arguments": '{"tz": "Europe/Paris"}'},
        ]
    )
    assert [
        (c["id"], json.loads(c["arguments"])["location"]) for c in fp.expected_calls("index-collision")
    ] == [
        ("call_c1", "San Francisco"),
        ("call_c2", "Tokyo"),
        ("call_c3", "Paris"),
    ]
    assert fp.expected_calls("name-repeated") == [
        {"id": "call_r1", "name": "get_current_weather", "arguments": '{"city": "Oslo", "unit": "c"}'}
    ]
    assert fp.expected_calls("error-midstream") == [
        {"id": "call_e1", "name": "lookup", "arguments": '{"q": '}
    ]
    assert fp.expected_calls("text") == []
    with pytest.raises(KeyError, match="unknown scenario"):
        fp.sse_body("nope")


@pytest.mark.parametrize("name", fp.SCENARIOS)
def test_bodies_look_like_openai_chunks(name):
    events = events_of(name)
    assert b"".join(events) == fp.sse_body(name)
    assert events[-1] == b"data: [DONE]\n\n"
    objs = [json.loads(e[len(b"data: ") :]) for e in events[:-1]]
    assert objs[0]["choices"][0]["delta"] == {"role": "assistant", "content": None}
    for obj in objs:
        if "error" in obj:
            continue
        assert obj["id"] == f"chatcmpl-fake-{name}" and obj["model"] == name
        assert obj["object"] == "chat.completion.chunk" and obj["created"] == 1767225600
    if name == "error-midstream":
        assert objs[-1] == {"error": {"message": "upstream overloaded", "type": "server_error", "code": 502}}
    else:
        assert objs[-1]["choices"] == [] and objs[-1]["usage"]["total_tokens"] == 70
        finish = objs[-2]["choices"][0]
        assert finish["delta"] == {} and finish["finish_reason"] == (
            "stop" if name == "text" else "tool_calls"
        )


# -- streamed over the wire ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", COMPLETE)
def test_streamed_body_is_exactly_the_scripted_bytes(port, name):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=SAFETY_TIMEOUT)
    try:
        resp = post(conn, {"model": name, "messages": MESSAGES, "stream": True})
        body = resp.read()
    finally:
        conn.close()
    assert resp.status == 200
    assert resp.getheader("Content-Type") == "text/event-stream; charset=utf-8"
    assert resp.getheader("Cache-Control") == "no-cache"
    assert resp.getheader("Transfer-Encoding") == "chunked"
    assert resp.getheader("X-Scenario") == name
    digest = hashlib.sha256(body).hexdigest()
    assert digest == resp.getheader("X-Body-SHA256") == hashlib.sha256(fp.sse_body(name)).hexdigest()
    assert body.endswith(b"data: [DONE]\n\n")


@pytest.mark.parametrize("name", COMPLETE)
def test_each_event_is_one_http_chunk(port, name):
    with connect(port) as sock:
        sock.sendall(request_bytes(name))
        head, rest = split_response(read_to_eof(sock))
    assert head.startswith("HTTP/1.1 200 ")
    chunks, terminated = dechunk(rest)
    assert chunks == events_of(name)
    assert terminated


@pytest.mark.parametrize("name", ["sequential", "interleaved"])
def test_openai_sdk_stream_collected_by_index(port, name):
    calls: dict[int, dict] = {}
    with client(port) as sdk:
        for chunk in sdk.chat.completions.create(model=name, messages=MESSAGES, stream=True):
            for choice in chunk.choices:
                for tc in choice.delta.tool_calls or []:
                    call = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
                    if tc.id:
                        call["id"] = tc.id
                    if tc.function and tc.function.name:
                        call["name"] += tc.function.name
                    if tc.function and tc.function.arguments:
                        call["arguments"] += tc.function.arguments
    assert [calls[i] for i in sorted(calls)] == fp.expected_calls(name)


@pytest.mark.parametrize("name", ["sequential", "interleaved"])
def test_openai_sdk_stream_helper_final_completion(port, name):
    with client(port) as sdk:
        # The helper left `beta` in later 1.x releases; the dev extra allows openai>=1.40.
        stream_helper = getattr(sdk.chat.completions, "stream", None) or sdk.beta.chat.completions.stream
        with stream_helper(model=name, messages=MESSAGES) as stream:
            final = stream.get_final_completion()
    got = [
        {"id": tc.id, "name": tc.function.name, "arguments": tc.function.arguments}
        for tc in final.choices[0].message.tool_calls
    ]
    assert got == fp.expected_calls(name)
    assert final.choices[0].finish_reason == "tool_calls"


# -- not streamed --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", TOOL_SCENARIOS)
def test_non_streamed_completion_holds_the_correct_calls(port, name):
    with client(port) as sdk:
        completion = sdk.chat.completions.create(model=name, messages=MESSAGES)
    assert completion.object == "chat.completion" and completion.model == name
    message = completion.choices[0].message
    got = [
        {"id": tc.id, "name": tc.custom.name, "arguments": tc.custom.input}  # a custom tool's call
        if tc.type == "custom"
        else {"id": tc.id, "name": tc.function.name, "arguments": tc.function.arguments}
        for tc in message.tool_calls
    ]
    assert got == fp.expected_calls(name)
    assert message.content == (fp.final_response("openai-chat", name)["choices"][0]["message"]["content"])
    assert completion.choices[0].finish_reason == "tool_calls"
    assert completion.usage.total_tokens == 70


def test_non_streamed_text(port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=SAFETY_TIMEOUT)
    try:
        resp = post(conn, {"model": "text", "messages": MESSAGES})
        doc = json.loads(resp.read())
    finally:
        conn.close()
    assert resp.status == 200 and resp.getheader("Content-Type") == "application/json"
    assert doc["choices"] == [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Hello from the fake provider."},
            "finish_reason": "stop",
        }
    ]


def test_non_streamed_error_scenario_is_a_502(port):
    with client(port) as sdk, pytest.raises(openai.InternalServerError) as info:
        sdk.chat.completions.create(model="error-midstream", messages=MESSAGES)
    assert info.value.status_code == 502


# -- cut short, held back ------------------------------------------------------------------------------------


def read_cut_stream(port: int, target: str, payload: bytes) -> tuple[http.client.HTTPResponse, bytes]:
    """POST, then read the streamed body until the connection drops: it must end in an IncompleteRead."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=SAFETY_TIMEOUT)
    received = b""
    try:
        conn.request("POST", target, body=payload, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        assert resp.status == 200
        with pytest.raises(http.client.IncompleteRead):
            while piece := resp.read1(65536):
                received += piece
    finally:
        conn.close()
    return resp, received


def test_truncated_stream_ends_without_the_last_chunk(port):
    resp, received = read_cut_stream(
        port, "/v1/chat/completions", request_bytes("truncated").partition(b"\r\n\r\n")[2]
    )
    assert received == b"".join(events_of("truncated")[:4])
    assert received.endswith(b'{\\"query\\": \\"RBI"}}]},"finish_reason":null}]}\n\n')
    assert resp.getheader("X-Body-SHA256") == hashlib.sha256(fp.sse_body("truncated")).hexdigest()


def test_truncated_on_the_wire_has_no_terminating_chunk(port):
    with connect(port) as sock:
        sock.sendall(request_bytes("truncated", close=False))
        _, rest = split_response(read_to_eof(sock))  # EOF although the client asked to keep the connection
    chunks, terminated = dechunk(rest)
    assert chunks == events_of("truncated")[:4]
    assert not terminated


def test_gated_stream_sends_the_first_event_then_waits_for_release(port):
    first = events_of("gated")[0]
    with connect(port) as sock:
        sock.sendall(request_bytes("gated"))
        data = b""
        while not (b"\r\n\r\n" in data and dechunk(split_response(data)[1])[0]):
            piece = sock.recv(65536)
            assert piece, "connection closed before the first event"
            data += piece
        head, rest = split_response(data)
        assert head.startswith("HTTP/1.1 200 ")
        assert dechunk(rest) == ([first], False)

        release = http.client.HTTPConnection("127.0.0.1", port, timeout=SAFETY_TIMEOUT)
        try:
            release.request("GET", "/release")
            resp = release.getresponse()
            assert (resp.status, resp.read()) == (200, b"1\n")  # the stream above was the one held back
        finally:
            release.close()

        _, rest = split_response(read_to_eof(sock, data))
    chunks, terminated = dechunk(rest)
    assert chunks == events_of("gated") and terminated
    assert chunks[-1] == b"data: [DONE]\n\n"


# -- other traffic, errors, connections ----------------------------------------------------------------------


def get(port: int, path: str) -> tuple[int, str, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=SAFETY_TIMEOUT)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.getheader("Content-Type"), resp.read()
    finally:
        conn.close()


def test_health(port):
    assert get(port, "/health") == (200, "text/plain", b"ok\n")


def test_models_lists_the_scenarios(port):
    status, ctype, body = get(port, "/v1/models")
    assert (status, ctype) == (200, "application/json")
    assert json.loads(body) == {
        "object": "list",
        "data": [{"id": n, "object": "model"} for n in fp.SCENARIOS],
    }


def test_unknown_path_is_404(port):
    assert get(port, "/nothing/here")[:2] == (404, "text/plain")


def test_release_with_nothing_waiting(port):
    assert get(port, "/release") == (200, "text/plain", b"0\n")


@pytest.mark.parametrize(
    ("payload", "status", "words"),
    [
        ({"model": "no-such-scenario", "stream": True}, 404, "unknown scenario"),
        (b"this is not json", 400, "not JSON"),
        (b"[1, 2]", 400, "JSON object"),
    ],
)
def test_bad_chat_requests_get_json_errors(port, payload, status, words):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=SAFETY_TIMEOUT)
    try:
        resp = post(conn, payload)
        doc = json.loads(resp.read())
        assert (resp.status, resp.getheader("Content-Type")) == (status, "application/json")
        assert words in doc["error"]["message"] and doc["error"]["type"] == "invalid_request_error"
        # A well-formed HTTP request that the provider refused leaves the connection usable.
        conn.request("GET", "/health")
        assert conn.getresponse().read() == b"ok\n"
    finally:
        conn.close()


def test_openai_sdk_sees_unknown_model_as_not_found(port):
    with client(port) as sdk, pytest.raises(openai.NotFoundError):
        sdk.chat.completions.create(model="no-such-scenario", messages=MESSAGES, stream=True)


def test_bad_delay_header_is_400(port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=SAFETY_TIMEOUT)
    try:
        resp = post(conn, {"model": "text", "stream": True}, {"X-Fake-Delay": "soon"})
        assert resp.status == 400 and b"X-Fake-Delay" in resp.read()
        resp = post(conn, {"model": "text", "stream": True}, {"X-Fake-Delay": "0"})
        assert resp.status == 200 and resp.read() == fp.sse_body("text")
    finally:
        conn.close()


@pytest.mark.parametrize(
    "garbage",
    [b"garbage\r\n\r\n", b"GET / HTTP/9\r\n\r\n", b"GET /health HTTP/1.1\r\nno colon\r\n\r\n"],
)
def test_malformed_request_gets_400_and_the_connection_closes(port, garbage):
    with connect(port) as sock:
        sock.sendall(garbage)
        head, _ = split_response(read_to_eof(sock))
    assert head.startswith("HTTP/1.1 400 ")
    assert get(port, "/health")[0] == 200  # and the server is still there


def test_keep_alive_carries_two_streams_on_one_connection(port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=SAFETY_TIMEOUT)
    try:
        first = post(conn, {"model": "interleaved", "stream": True})
        assert first.read() == fp.sse_body("interleaved")
        sock = conn.sock
        assert sock is not None
        second = post(conn, {"model": "sequential", "stream": True})
        assert second.read() == fp.sse_body("sequential")
        assert conn.sock is sock  # the same TCP connection served both
    finally:
        conn.close()


def test_openai_sdk_reuses_the_connection_for_several_streams(port):
    with client(port) as sdk:
        for name in ("interleaved", "text", "sequential"):
            chunks = list(sdk.chat.completions.create(model=name, messages=MESSAGES, stream=True))
            assert chunks[-1].usage.total_tokens == 70


# -- the process ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_exits_0_quietly_on_signal_after_clients_misbehave(sig):
    with running_provider("--delay", "0.001") as (proc, bound):
        # A client that resets the connection while its stream is held back, then the stream resumes.
        dropped = connect(bound)
        dropped.sendall(request_bytes("gated"))
        seen = b""
        while b"\n\n" not in seen.partition(b"data: ")[2]:  # the head may arrive before the first event
            piece = dropped.recv(65536)
            assert piece
            seen += piece
        dropped.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close sends RST
        dropped.close()
        assert get(bound, "/release")[2] == b"1\n"
        # A client idling on a keep-alive connection, and one stopped halfway through its request head.
        idle = connect(bound)
        idle.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert idle.recv(65536).startswith(b"HTTP/1.1 200 ")
        halfway = connect(bound)
        halfway.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nContent-Le")
        assert get(bound, "/health")[2] == b"ok\n"

        proc.send_signal(sig)
        assert proc.wait(SAFETY_TIMEOUT) == 0
        stderr = proc.stderr.read()
        idle.close()
        halfway.close()
    assert stderr == ""


def test_main_rejects_a_negative_delay(capsys):
    with pytest.raises(SystemExit) as info:
        fp.main(["--delay", "-1"])
    assert info.value.code == 2
    assert "--delay" in capsys.readouterr().err


# == every wire format ======================================================================================

EXAMPLES = DATA / "fake"  # copies of the reference example streams (shared/reference/examples)
FORMAT_CASES = [(fmt, name) for fmt in fp.FORMATS for name in fp.FORMAT_SCENARIOS[fmt]]
COMPLETE_CASES = [(fmt, name) for fmt, name in FORMAT_CASES if name not in ("truncated", "gated")]
NEW_FORMATS = [fmt for fmt in fp.FORMATS if fmt != "openai-chat"]
BEDROCK = ("bedrock-converse", "bedrock-invoke")
CALL_SCENARIOS = ("interleaved", "sequential")


def aws_frames(data: bytes) -> list[tuple[dict[str, str], bytes]]:
    """AWS event-stream messages as (headers, payload), every length and both CRCs checked."""
    frames, pos = [], 0
    while pos < len(data):
        total, head_len = struct.unpack_from(">II", data, pos)
        frame = data[pos : pos + total]
        assert len(frame) == total > 16
        assert struct.unpack_from(">I", frame, 8)[0] == zlib.crc32(frame[:8]), "prelude CRC"
        assert struct.unpack_from(">I", frame, total - 4)[0] == zlib.crc32(frame[:-4]), "message CRC"
        headers, i = {}, 12
        while i < 12 + head_len:
            size = frame[i]
            name = frame[i + 1 : i + 1 + size].decode()
            i += 1 + size
            assert frame[i] == 7  # string
            (length,) = struct.unpack_from(">H", frame, i + 1)
            headers[name] = frame[i + 3 : i + 3 + length].decode()
            i += 3 + length
        assert i == 12 + head_len
        frames.append((headers, frame[12 + head_len : total - 4]))
        pos += total
    return frames


def sse_events(data: bytes) -> list[tuple[str | None, dict]]:
    events = []
    for block in data.replace(b"\r\n", b"\n").split(b"\n\n"):
        if not block:
            continue
        name, lines = None, []
        for line in block.decode().split("\n"):
            field, _, value = line.partition(": ")
            if field == "event":
                name = value
            else:
                assert field == "data", line
                lines.append(value)
        if lines != ["[DONE]"]:
            events.append((name, json.loads("\n".join(lines))))
    return events


def decode(fmt: str, data: bytes, *, gemini_sse: bool = True) -> list[tuple[str | None, dict]]:
    """A body as (event name, JSON payload) pairs; AWS exceptions are named `exception:<type>`."""
    if fmt in BEDROCK:
        events = []
        for headers, payload in aws_frames(data):
            obj = json.loads(payload)
            if headers[":message-type"] == "exception":
                events.append(("exception:" + headers[":exception-type"], obj))
            elif fmt == "bedrock-invoke":
                assert headers[":event-type"] == "chunk" and list(obj) == ["bytes", "p"]
                inner = json.loads(base64.b64decode(obj["bytes"]))
                events.append((inner["type"], inner))
            else:
                assert obj.pop("p")
                events.append((headers[":event-type"], obj))
        return events
    if fmt == "gemini" and not gemini_sse:
        return [(None, obj) for obj in json.loads(data)]
    if fmt == "ollama-chat":
        return [(None, json.loads(line)) for line in data.split(b"\n") if line]
    events = sse_events(data)
    if fmt in ("openai-responses", "anthropic-messages", "cohere-v2"):
        assert all(name == obj["type"] for name, obj in events)
    return events


def rebuild(fmt: str, events: list[tuple[str | None, dict]]) -> list[dict]:
    """The tool calls of a decoded body, each format's deltas joined by that format's own identity."""
    calls: dict = {}
    at_index: dict = {}

    def new(key, call_id, name, arguments=""):
        calls[key] = {"id": call_id, "name": name, "arguments": arguments}

    def whole(call_id, name, args):
        new(len(calls), call_id, name, json.dumps(args, ensure_ascii=False))

    for name, obj in events:
        if fmt == "openai-chat":
            for tc in obj["choices"][0]["delta"].get("tool_calls", []) if obj.get("choices") else []:
                key = at_index[tc["index"]] = tc.get("id") or at_index[tc["index"]]
                body, text = ("custom", "input") if "custom" in tc else ("function", "arguments")
                if key not in calls:
                    new(key, key, tc[body]["name"])
                calls[key]["arguments"] += tc[body][text]
        elif fmt == "openai-responses" and name == "response.output_item.added":
            if obj["item"]["type"] in ("function_call", "custom_tool_call"):
                new(obj["output_index"], obj["item"]["call_id"], obj["item"]["name"])
                at_index[obj["output_index"]] = obj["item"]["id"]
        elif fmt == "openai-responses" and name in (
            "response.function_call_arguments.delta",
            "response.custom_tool_call_input.delta",
        ):
            assert at_index[obj["output_index"]] == obj["item_id"]
            calls[obj["output_index"]]["arguments"] += obj["delta"]
        elif name == "content_block_start" and obj["content_block"]["type"] == "tool_use":
            new(obj["index"], obj["content_block"]["id"], obj["content_block"]["name"])
        elif name == "content_block_delta" and obj["delta"]["type"] == "input_json_delta":
            calls[obj["index"]]["arguments"] += obj["delta"]["partial_json"]
        elif name == "contentBlockStart":
            tool = obj["start"]["toolUse"]
            new(obj["contentBlockIndex"], tool["toolUseId"], tool["name"])
        elif name == "contentBlockDelta" and "toolUse" in obj["delta"]:
            calls[obj["contentBlockIndex"]]["arguments"] += obj["delta"]["toolUse"]["input"]
        elif name in ("tool-call-start", "tool-call-delta"):
            tc = obj["delta"]["message"]["tool_calls"]
            if name == "tool-call-start":
                new(obj["index"], tc["id"], tc["function"]["name"])
            calls[obj["index"]]["arguments"] += tc["function"]["arguments"]
        elif fmt == "gemini" and "candidates" in obj:
            for part in obj["candidates"][0]["content"]["parts"]:
                if call := part.get("functionCall"):
                    whole(call.get("id"), call["name"], call["args"])
        elif fmt == "ollama-chat":
            for tc in obj.get("message", {}).get("tool_calls", []):
                whole(tc["id"], tc["function"]["name"], tc["function"]["arguments"])
    return list(calls.values())


def ending(fmt: str, events: list[tuple[str | None, dict]]) -> str:
    name, last = events[-1]
    if fmt == "openai-chat":
        return "usage" if "usage" in last else "error"
    if fmt == "gemini":
        return "finish" if "finishReason" in last.get("candidates", [{}])[0] else "error"
    if fmt == "ollama-chat":
        return "done" if last.get("done") else "error"
    assert name is not None
    return name


class Facts(NamedTuple):
    content_type: str  # of the stream
    end: str  # what ending() says of the last event when the stream completes
    error_end: str  # … and after `error-midstream`'s error
    error_status: int  # `error-midstream` not streamed
    delta: tuple[str, str] | None = None  # the argument-delta event and its identity field, if it has one


SSE = "text/event-stream; charset=utf-8"
AWS = "application/vnd.amazon.eventstream"
THROTTLED = "exception:throttlingException"
FACTS = {
    "openai-chat": Facts(SSE, "usage", "error", 502),
    "openai-responses": Facts(
        SSE,
        "response.completed",
        "response.failed",
        502,
        ("response.function_call_arguments.delta", "output_index"),
    ),
    "anthropic-messages": Facts(SSE, "message_stop", "error", 529, ("content_block_delta", "index")),
    "gemini": Facts(SSE, "finish", "error", 503),
    "bedrock-converse": Facts(AWS, "metadata", THROTTLED, 429, ("contentBlockDelta", "contentBlockIndex")),
    "bedrock-invoke": Facts(AWS, "message_stop", THROTTLED, 429, ("content_block_delta", "index")),
    "cohere-v2": Facts(SSE, "message-end", "message-end", 500, ("tool-call-delta", "index")),
    "ollama-chat": Facts("application/x-ndjson", "done", "error", 500),
}


def test_format_names_and_scenarios():
    assert fp.FORMATS == tuple(FACTS)
    chat_only = ("index-collision", "name-repeated")
    common = tuple(name for name in fp.SCENARIOS if name not in (*chat_only, "custom-interleaved"))
    assert fp.FORMAT_SCENARIOS["openai-chat"] == fp.SCENARIOS
    responses = tuple(name for name in fp.SCENARIOS if name not in chat_only)
    assert fp.FORMAT_SCENARIOS["openai-responses"] == responses
    assert all(fp.FORMAT_SCENARIOS[fmt] == common for fmt in NEW_FORMATS if fmt != "openai-responses")
    with pytest.raises(KeyError, match="only served as openai-chat, not"):
        fp.body("anthropic-messages", "index-collision")
    with pytest.raises(KeyError, match="only served as openai-chat or openai-responses, not gemini"):
        fp.body("gemini", "custom-interleaved")
    with pytest.raises(KeyError, match="unknown format"):
        fp.body("soap", "text")
    assert fp.sse_body("interleaved") == fp.body("openai-chat", "interleaved")


def test_expected_calls_name_each_call_as_its_format_does():
    ids = {fmt: [c["id"] for c in fp.expected_calls("interleaved", fmt)] for fmt in fp.FORMATS}
    assert ids == {
        "openai-chat": ["call_abc", "call_xyz"],
        "openai-responses": ["call_abc", "call_xyz"],
        "anthropic-messages": ["toolu_abc", "toolu_xyz"],
        "gemini": ["call_abc", "call_xyz"],
        "bedrock-converse": ["tooluse_abc", "tooluse_xyz"],
        "bedrock-invoke": ["toolu_abc", "toolu_xyz"],
        "cohere-v2": ["search_circulars_abc", "get_user_profile_xyz"],
        "ollama-chat": ["call_abc", "call_xyz"],
    }
    for fmt in fp.FORMATS:
        for name in ("interleaved", "truncated", "sequential", "gated"):
            chat = fp.expected_calls(name)  # the same calls, with chat ids
            got = fp.expected_calls(name, fmt)
            assert [(c["name"], c["arguments"]) for c in got] == [(c["name"], c["arguments"]) for c in chat]
            # Gemini and Ollama send objects: the text is exactly what json.dumps makes of them.
            assert all(json.dumps(json.loads(c["arguments"])) == c["arguments"] for c in got)
        assert fp.expected_calls("text", fmt) == []
        partial = [] if fmt in ("gemini", "ollama-chat") else [("lookup", '{"q": ')]
        assert [(c["name"], c["arguments"]) for c in fp.expected_calls("error-midstream", fmt)] == partial


@pytest.mark.parametrize(("fmt", "name"), FORMAT_CASES)
def test_every_body_rebuilds_to_the_expected_calls_and_ends_as_the_provider_does(fmt, name):
    for gemini_sse in (True, False) if fmt == "gemini" else (True,):
        events = decode(fmt, fp.body(fmt, name, gemini_sse=gemini_sse), gemini_sse=gemini_sse)
        assert rebuild(fmt, events) == fp.expected_calls(name, fmt)
        facts = FACTS[fmt]
        assert ending(fmt, events) == (facts.error_end if name == "error-midstream" else facts.end)
        assert b"".join(fp.events(fmt, name, gemini_sse=gemini_sse)) == fp.body(
            fmt, name, gemini_sse=gemini_sse
        )
    if name == "error-midstream" and fmt == "cohere-v2":
        assert events[-1][1]["delta"]["finish_reason"] == "ERROR"
    if fmt == "bedrock-converse" and name != "error-midstream":
        assert events[-2][0] == "messageStop"
    if fmt == "bedrock-invoke" and name != "error-midstream":
        assert events[-1][1]["amazon-bedrock-invocationMetrics"]["outputTokenCount"] == 20


def test_interleaved_fragments_alternate_by_each_formats_identity():
    fragments = ('{"query": "RBI', '{"user_id": "u', ' circulars"}', '123"}')
    for fmt, (event, field) in ((fmt, facts.delta) for fmt, facts in FACTS.items() if facts.delta):
        deltas = [obj for name, obj in decode(fmt, fp.body(fmt, "interleaved")) if name == event]
        carrying = [
            obj[field] for obj in deltas if any(json.dumps(f)[1:-1] in json.dumps(obj) for f in fragments)
        ]
        assert carrying == [0, 1, 0, 1], fmt
    # Formats that send whole calls: two parts / lines, one call each.
    for fmt in ("gemini", "ollama-chat"):
        assert len(fp.events(fmt, "interleaved")) == 3


def test_sequential_carries_reasoning_where_the_format_has_it():
    anthropic_events = [
        obj for _, obj in decode("anthropic-messages", fp.body("anthropic-messages", "sequential"))
    ]
    assert anthropic_events[2]["content_block"]["type"] == "thinking"
    assert any(e.get("delta", {}).get("type") == "signature_delta" for e in anthropic_events)
    responses = [name for name, _ in decode("openai-responses", fp.body("openai-responses", "sequential"))]
    assert "response.reasoning_summary_text.delta" in responses
    cohere = [name for name, _ in decode("cohere-v2", fp.body("cohere-v2", "sequential"))]
    assert cohere[1:3] == ["tool-plan-delta", "tool-plan-delta"]
    gemini = decode("gemini", fp.body("gemini", "sequential"))
    assert gemini[0][1]["candidates"][0]["content"]["parts"][0]["thought"] is True
    converse = decode("bedrock-converse", fp.body("bedrock-converse", "sequential"))
    assert "reasoningContent" in converse[1][1]["delta"]


def test_gemini_framings():
    sse = fp.body("gemini", "interleaved")
    assert sse.count(b"\r\n\r\n") == 3 and b"\n\n" not in sse
    array = fp.events("gemini", "interleaved", gemini_sse=False)
    assert (
        array[0].startswith(b"[{\n  ")
        and array[1].startswith(b"\r\n,\r\n{")
        and array[-1].endswith(b"}\r\n]")
    )
    ndjson = fp.events("ollama-chat", "sequential")
    assert all(line.endswith(b"}\n") and line.count(b"\n") == 1 for line in ndjson)


def test_aws_encoder_matches_the_reference_bytes():
    for example, fmt in (
        ("bedrock_converse_parallel.bin", "bedrock-converse"),
        ("bedrock_invoke_anthropic_parallel.bin", "bedrock-invoke"),
    ):
        reference = aws_frames((EXAMPLES / example).read_bytes())
        ours = aws_frames(fp.body(fmt, "sequential"))
        assert {tuple(h) for h, _ in reference} == {tuple(h) for h, _ in ours}
        assert {h[":message-type"] for h, _ in ours} == {"event"}
        # Re-encoding a reference frame's headers and payload gives back its exact bytes.
        data = (EXAMPLES / example).read_bytes()
        headers, payload = reference[0]
        assert data.startswith(fp.aws_message(headers, payload))
        if fmt == "bedrock-converse":
            assert [h[":event-type"] for h, _ in ours][:1] + [h[":event-type"] for h, _ in ours][-2:] == [
                "messageStart",
                "messageStop",
                "metadata",
            ]
    exception = aws_frames(fp.events("bedrock-converse", "error-midstream")[-1])
    assert exception == [
        (
            {
                ":exception-type": "throttlingException",
                ":content-type": "application/json",
                ":message-type": "exception",
            },
            b'{"message":"Too many requests, please wait before trying again."}',
        )
    ]


# -- every format over the wire ------------------------------------------------------------------------------


def parse_head(head: str) -> tuple[int, dict[str, str]]:
    status_line, *lines = head.split("\r\n")
    fields = (line.partition(":") for line in lines)
    return int(status_line.split(" ")[1]), {name.lower(): value.strip() for name, _, value in fields}


def exchange(
    port: int,
    fmt: str,
    name: str,
    *,
    stream: bool = True,
    gemini_sse: bool = True,
    headers: dict | None = None,
    target: str | None = None,
    payload: bytes | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """One request on its own connection, read to EOF: status, headers, the raw (still chunked) body."""
    target = target or fp.path(fmt, name, stream=stream, gemini_sse=gemini_sse)
    payload = fp.request_body(fmt, name, stream=stream) if payload is None else payload
    lines = [f"POST {target} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    lines += [f"Content-Length: {len(payload)}", "Connection: close"]
    lines += [f"{key}: {value}" for key, value in (headers or {}).items()]
    with connect(port) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + payload)
        head, rest = split_response(read_to_eof(sock))
    status, fields = parse_head(head)
    return status, fields, rest


@pytest.mark.parametrize(("fmt", "name"), [case for case in COMPLETE_CASES if case[0] != "openai-chat"])
def test_each_format_streams_the_scripted_bytes_on_its_path(port, fmt, name):
    status, headers, rest = exchange(port, fmt, name)
    chunks, terminated = dechunk(rest)
    raw = b"".join(chunks)
    assert (status, headers["content-type"], headers["transfer-encoding"]) == (
        200,
        FACTS[fmt].content_type,
        "chunked",
    )
    assert hashlib.sha256(raw).hexdigest() == headers["x-body-sha256"] == headers["x-decoded-sha256"]
    assert raw == fp.body(fmt, name) and terminated
    assert chunks == list(fp.events(fmt, name))  # one event, one chunk
    assert "content-encoding" not in headers and headers["x-scenario"] == name
    if fmt == "bedrock-invoke":
        assert headers["x-amzn-bedrock-content-type"] == "application/json"


@pytest.mark.parametrize("name", [name for name in fp.FORMAT_SCENARIOS["gemini"] if name != "gated"])
def test_gemini_without_alt_sse_streams_a_json_array(port, name):
    status, headers, rest = exchange(port, "gemini", name, gemini_sse=False)
    chunks, terminated = dechunk(rest)
    assert (status, headers["content-type"]) == (200, "application/json")
    assert chunks == list(fp.events("gemini", name, gemini_sse=False, cut=True))
    assert terminated == (name != "truncated")
    assert headers["x-body-sha256"] == hashlib.sha256(fp.body("gemini", name, gemini_sse=False)).hexdigest()


@pytest.mark.parametrize(
    ("fmt", "target"),
    [
        ("gemini", "/v1beta/models/inter%6Ceaved:streamGenerateContent?key=k&alt=sse"),
        (
            "gemini",
            "/v1/projects/p/locations/global/publishers/google/models/interleaved:streamGenerateContent?alt=sse",
        ),
        ("bedrock-converse", "/model/inter%6Ceaved/converse-stream"),
        ("openai-responses", "/openai/v1/responses"),
        ("anthropic-messages", "/anthropic/v1/messages"),
    ],
)
def test_paths_elsewhere_and_url_encoded_models(port, fmt, target):
    status, _, rest = exchange(port, fmt, "interleaved", target=target)
    assert status == 200 and b"".join(dechunk(rest)[0]) == fp.body(fmt, "interleaved")


def test_ollama_streams_unless_told_not_to(port):
    _, headers, rest = exchange(port, "ollama-chat", "text", payload=b'{"model": "text"}')
    assert headers["content-type"] == "application/x-ndjson"
    assert b"".join(dechunk(rest)[0]) == fp.body("ollama-chat", "text")


@pytest.mark.parametrize("fmt", NEW_FORMATS)
def test_truncated_ends_in_an_incomplete_read_in_every_format(port, fmt):
    resp, received = read_cut_stream(port, fp.path(fmt, "truncated"), fp.request_body(fmt, "truncated"))
    sent = fp.events(fmt, "truncated", cut=True)
    assert received == b"".join(sent) and 0 < len(sent) < len(fp.events(fmt, "truncated"))
    assert resp.getheader("X-Body-SHA256") == hashlib.sha256(fp.body(fmt, "truncated")).hexdigest()
    partial = [c["arguments"] for c in rebuild(fmt, decode(fmt, received))]
    # Gemini and Ollama send whole calls: theirs is cut after both calls, before the end of the stream.
    whole = [c["arguments"] for c in fp.expected_calls("truncated", fmt)]
    assert partial == (whole if fmt in ("gemini", "ollama-chat") else ['{"query": "RBI', ""])


def test_gated_holds_any_format_after_its_first_event(port):
    first = fp.events("anthropic-messages", "gated")[0]
    target = fp.path("anthropic-messages", "gated")
    payload = fp.request_body("anthropic-messages", "gated")
    with connect(port) as sock:
        sock.sendall(
            f"POST {target} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(payload)}\r\nConnection: close\r\n\r\n".encode()
            + payload
        )
        data = b""
        while not (b"\r\n\r\n" in data and dechunk(split_response(data)[1])[0]):
            piece = sock.recv(65536)
            assert piece
            data += piece
        assert dechunk(split_response(data)[1]) == ([first], False)
        assert get(port, "/release")[2] == b"1\n"
        chunks, terminated = dechunk(split_response(read_to_eof(sock, data))[1])
    assert chunks == list(fp.events("anthropic-messages", "gated")) and terminated


# -- compressed ----------------------------------------------------------------------------------------------


def gzip_compress(data: bytes) -> bytes:
    compressor = zlib.compressobj(wbits=31)
    return compressor.compress(data) + compressor.flush()


def decompressor(encoding: str) -> Callable[[bytes], bytes]:
    if encoding in ("gzip", "deflate"):
        return zlib.decompressobj(wbits=31 if encoding == "gzip" else 15).decompress
    if encoding == "br":
        return brotli.Decompressor().process
    return zstd.ZstdDecompressor().decompress


@pytest.mark.parametrize("encoding", fp.ENCODINGS)
@pytest.mark.parametrize(
    ("fmt", "gemini_sse"), [("anthropic-messages", True), ("bedrock-converse", True), ("gemini", False)]
)
def test_compressed_stream_is_one_flushed_piece_per_event(port, fmt, gemini_sse, encoding):
    name = "sequential"
    status, headers, rest = exchange(
        port, fmt, name, gemini_sse=gemini_sse, headers={"X-Fake-Encoding": encoding}
    )
    chunks, terminated = dechunk(rest)
    assert status == 200 and terminated
    assert (headers["content-encoding"], headers["transfer-encoding"]) == (encoding, "chunked")
    wire = b"".join(chunks)
    plain = fp.body(fmt, name, gemini_sse=gemini_sse)
    assert hashlib.sha256(wire).hexdigest() == headers["x-body-sha256"]
    assert hashlib.sha256(plain).hexdigest() == headers["x-decoded-sha256"] != headers["x-body-sha256"]
    # Every chunk decodes, as it arrives, to exactly the event it carries.
    feed = decompressor(encoding)
    assert [feed(chunk) for chunk in chunks] == list(fp.events(fmt, name, gemini_sse=gemini_sse))
    assert len(chunks) > 1


@pytest.mark.parametrize("encoding", ["gzip", "zstd"])
def test_compressed_truncated_stream_decodes_to_what_was_sent(port, encoding):
    _, headers, rest = exchange(port, "cohere-v2", "truncated", headers={"X-Fake-Encoding": encoding})
    chunks, terminated = dechunk(rest)
    assert not terminated
    feed = decompressor(encoding)
    assert b"".join(feed(chunk) for chunk in chunks) == b"".join(
        fp.events("cohere-v2", "truncated", cut=True)
    )
    assert headers["x-decoded-sha256"] == hashlib.sha256(fp.body("cohere-v2", "truncated")).hexdigest()


def test_compressed_non_streamed_response(port):
    status, headers, data = exchange(
        port, "anthropic-messages", "interleaved", stream=False, headers={"X-Fake-Encoding": "br"}
    )
    assert (status, headers["content-encoding"]) == (200, "br")
    assert hashlib.sha256(data).hexdigest() == headers["x-body-sha256"]
    assert json.loads(brotli.decompress(data)) == fp.final_response("anthropic-messages", "interleaved")


@pytest.mark.parametrize("encoding", fp.ENCODINGS)
def test_a_compressed_request_body_is_read_decoded(port, encoding):
    # Codex sends its requests zstd-compressed, and OpenAI's backend reads them: so does this provider.
    compress = {"gzip": gzip_compress, "deflate": zlib.compress, "br": brotli.compress, "zstd": zstd.compress}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=SAFETY_TIMEOUT)
    try:
        body = compress[encoding](json.dumps({"model": "interleaved", "stream": True}).encode())
        resp = post(conn, body, {"Content-Encoding": encoding})
        assert resp.status == 200 and resp.read() == fp.sse_body("interleaved")
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        (
            b"\x28\xb5\x2f\xfd" + b"\xff" * 50,
            400,
            "request body: its content-encoding 'zstd' does not decode",
        ),
        (zstd.compress(b" " * (fp.MAX_BODY_BYTES + 1)), 413, "request body: it decodes to"),
    ],
)
def test_a_compressed_request_body_that_cannot_be_read_is_refused(port, body, status, words):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=SAFETY_TIMEOUT)
    try:
        resp = post(conn, body, {"Content-Encoding": "zstd"})
        assert resp.status == status and words in json.loads(resp.read())["error"]["message"]
    finally:
        conn.close()


def test_unknown_encoding_is_400(port):
    status, _, data = exchange(port, "gemini", "text", headers={"X-Fake-Encoding": "lzma"})
    assert status == 400 and b"X-Fake-Encoding" in data


# -- not streamed ----------------------------------------------------------------------------------------------


def calls_in_response(fmt: str, doc: dict) -> list[dict]:
    """The tool calls of a format's non-streamed response."""

    def call(call_id, name, arguments):
        return {
            "id": call_id,
            "name": name,
            "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
        }

    if fmt == "openai-chat":
        return [call(c["id"], **c["function"]) for c in doc["choices"][0]["message"]["tool_calls"]]
    if fmt == "openai-responses":
        return [
            call(i["call_id"], i["name"], i["arguments"])
            for i in doc["output"]
            if i["type"] == "function_call"
        ]
    if fmt in ("anthropic-messages", "bedrock-invoke"):
        return [call(b["id"], b["name"], b["input"]) for b in doc["content"] if b["type"] == "tool_use"]
    if fmt == "gemini":
        parts = doc["candidates"][0]["content"]["parts"]
        return [
            call(p["functionCall"]["id"], p["functionCall"]["name"], p["functionCall"]["args"])
            for p in parts
            if "functionCall" in p
        ]
    if fmt == "bedrock-converse":
        blocks = doc["output"]["message"]["content"]
        return [
            call(b["toolUse"]["toolUseId"], b["toolUse"]["name"], b["toolUse"]["input"])
            for b in blocks
            if "toolUse" in b
        ]
    if fmt == "cohere-v2":
        return [call(c["id"], **c["function"]) for c in doc["message"]["tool_calls"]]
    assert doc["done"] is True
    return [
        call(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in doc["message"]["tool_calls"]
    ]


@pytest.mark.parametrize("fmt", fp.FORMATS)
@pytest.mark.parametrize("name", ["interleaved", "sequential", "truncated"])
def test_non_streamed_responses_hold_the_expected_calls(port, fmt, name):
    status, headers, data = exchange(port, fmt, name, stream=False)
    assert (status, headers["content-type"]) == (200, "application/json")
    assert "transfer-encoding" not in headers and len(data) == int(headers["content-length"])
    doc = json.loads(data)
    assert doc == fp.final_response(fmt, name)
    assert calls_in_response(fmt, doc) == fp.expected_calls(name, fmt)


@pytest.mark.parametrize("fmt", fp.FORMATS)
def test_non_streamed_error_is_the_formats_error_status(port, fmt):
    status, headers, data = exchange(port, fmt, "error-midstream", stream=False)
    assert status == FACTS[fmt].error_status
    assert json.loads(data)
    if fmt in BEDROCK:
        assert headers["x-amzn-errortype"] == "ThrottlingException"


@pytest.mark.parametrize(
    ("fmt", "target", "payload"),
    [
        ("anthropic-messages", "/v1/messages", b'{"model": "index-collision", "stream": true}'),
        ("gemini", "/v1beta/models/nope:streamGenerateContent", b"{}"),
        ("bedrock-invoke", "/model/name-repeated/invoke", b"{}"),
        ("cohere-v2", "/v2/chat", b"[]"),
    ],
)
def test_unknown_or_chat_only_scenarios_are_refused(port, fmt, target, payload):
    status, _, data = exchange(port, fmt, "text", target=target, payload=payload)
    assert status in (400, 404) and json.loads(data)["error"]["type"] == "invalid_request_error"


# -- the official SDKs ---------------------------------------------------------------------------------------


def anthropic_client(port: int) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=f"http://127.0.0.1:{port}", api_key="test", max_retries=0)


def tool_uses(content) -> list[dict]:
    return [
        {"id": b.id, "name": b.name, "arguments": json.dumps(b.input)}
        for b in content
        if b.type == "tool_use"
    ]


@pytest.mark.parametrize("name", CALL_SCENARIOS)
def test_anthropic_sdk_stream_final_message(port, name):
    with (
        anthropic_client(port) as sdk,
        sdk.messages.stream(model=name, max_tokens=64, messages=MESSAGES) as stream,
    ):
        final = stream.get_final_message()
    assert tool_uses(final.content) == fp.expected_calls(name, "anthropic-messages")
    assert final.stop_reason == "tool_use" and final.usage.output_tokens == 20
    if name == "sequential":
        assert final.content[0].type == "thinking" and final.content[0].signature
        assert final.content[0].thinking == "Weather first, then the local time."


def test_anthropic_sdk_not_streamed_and_midstream_error(port):
    with anthropic_client(port) as sdk:
        message = sdk.messages.create(model="interleaved", max_tokens=64, messages=MESSAGES)
        assert tool_uses(message.content) == fp.expected_calls("interleaved", "anthropic-messages")
        failing = sdk.messages.stream(model="error-midstream", max_tokens=64, messages=MESSAGES)
        with pytest.raises(anthropic.APIStatusError, match="overloaded_error"), failing as stream:
            stream.get_final_message()


def function_calls(output) -> list[dict]:
    return [
        {"id": item.call_id, "name": item.name, "arguments": item.arguments}
        for item in output
        if item.type == "function_call"
    ]


@pytest.mark.parametrize("name", CALL_SCENARIOS)
def test_openai_sdk_responses_stream(port, name):
    with client(port) as sdk:
        done = [
            event.item
            for event in sdk.responses.create(model=name, input="hi", stream=True)
            if event.type == "response.output_item.done"
        ]
        with sdk.responses.stream(model=name, input="hi") as stream:
            final = stream.get_final_response()
    assert function_calls(done) == function_calls(final.output) == fp.expected_calls(name, "openai-responses")
    assert final.status == "completed" and final.usage.total_tokens == 70
    if name == "sequential":
        assert final.output[0].type == "reasoning"
        assert final.output[0].summary[0].text == "Weather first, then the local time."


def test_openai_sdk_responses_not_streamed_and_failed(port):
    with client(port) as sdk:
        response = sdk.responses.create(model="sequential", input="hi")
        assert function_calls(response.output) == fp.expected_calls("sequential", "openai-responses")
        events = list(sdk.responses.create(model="error-midstream", input="hi", stream=True))
    assert [event.type for event in events[-2:]] == ["error", "response.failed"]
    assert events[-1].response.status == "failed"
