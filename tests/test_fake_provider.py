"""scripts/fake_provider.py as a real process, spoken to by real clients: raw sockets, http.client, openai."""

from __future__ import annotations

import hashlib
import http.client
import importlib.util
import json
import selectors
import signal
import socket
import struct
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import openai
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "fake_provider.py"
_spec = importlib.util.spec_from_file_location("fake_provider", SCRIPT)
assert _spec and _spec.loader
fp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fp)

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
        "gated",
    )
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
        {"id": tc.id, "name": tc.function.name, "arguments": tc.function.arguments}
        for tc in message.tool_calls
    ]
    assert got == fp.expected_calls(name)
    assert message.content is None and completion.choices[0].finish_reason == "tool_calls"
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


def test_truncated_stream_ends_without_the_last_chunk(port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=SAFETY_TIMEOUT)
    received = b""
    try:
        resp = post(conn, {"model": "truncated", "messages": MESSAGES, "stream": True})
        assert resp.status == 200
        with pytest.raises(http.client.IncompleteRead):
            while piece := resp.read1(65536):
                received += piece
    finally:
        conn.close()
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
