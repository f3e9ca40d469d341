"""scripts/fake_provider's WebSocket side as a real process, spoken to by the `websockets` client directly
(no proxy): the Responses WebSocket mode, OpenAI Realtime and Gemini Live, each scenario, several turns on
one connection, prewarm, lanes, permessage-deflate, fragments, binary frames and the faults. The calls are
rebuilt here by identity, independently of the module, and checked against `ws_expected`."""

from __future__ import annotations

import base64
import http.client
import itertools
import json
from collections.abc import Iterator
from contextlib import contextmanager

import fake_provider as fp
import pytest
from websockets.exceptions import ConnectionClosed, ConnectionClosedError, InvalidStatus
from websockets.sync.client import ClientConnection, connect

SAFETY_TIMEOUT = 15  # only so a broken server fails the test instead of hanging it
LIVE_PATH = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
RESPONSES_TERMINAL = ("response.completed", "response.failed")
RESPONSES_CALLS = ("interleaved", "sequential", "unicode")


@contextmanager
def ws(port: int, path: str, headers: dict | None = None, **options) -> Iterator[ClientConnection]:
    url = f"ws://127.0.0.1:{port}{path}"
    with connect(url, additional_headers=headers, proxy=None, open_timeout=SAFETY_TIMEOUT, **options) as conn:
        yield conn


def send(conn: ClientConnection, payload: dict) -> None:
    conn.send(json.dumps(payload))


def receive(conn: ClientConnection) -> dict:
    return json.loads(conn.recv(timeout=SAFETY_TIMEOUT))


def until(conn: ClientConnection, done) -> list[dict]:
    """Messages up to and including the first one ``done`` accepts."""
    got = []
    while True:
        got.append(receive(conn))
        if done(got[-1]):
            return got


def to_close(conn: ClientConnection) -> tuple[list, ConnectionClosed]:
    """Every message until the server closes or drops the connection, and how it ended."""
    got = []
    try:
        while True:
            got.append(conn.recv(timeout=SAFETY_TIMEOUT))
    except ConnectionClosed as exc:
        return got, exc


def create(model: str, **fields) -> dict:
    return {"type": "response.create", "model": model, "input": [{"role": "user", "content": "hi"}], **fields}


def responses_turn(conn: ClientConnection, model: str, **fields) -> list[dict]:
    send(conn, create(model, **fields))
    # A request's error ends it; a stream's error (it has a sequence number) comes before response.failed.
    return until(
        conn,
        lambda e: e["type"] in RESPONSES_TERMINAL or (e["type"] == "error" and "sequence_number" not in e),
    )


_CALL_ITEMS = ("function_call", "custom_tool_call")
_DELTAS = ("response.function_call_arguments.delta", "response.custom_tool_call_input.delta")


def responses_calls(events: list[dict]) -> list[dict]:
    """The calls rebuilt by item id: the item added names them, the deltas carry item_id only."""
    calls: dict[str, dict] = {}
    for event in events:
        if event["type"] == "response.output_item.added" and event["item"]["type"] in _CALL_ITEMS:
            item = event["item"]
            calls[item["id"]] = {
                "id": item["call_id"],
                "item_id": item["id"],
                "name": item["name"],
                "arguments": "",
            }
        elif event["type"] in _DELTAS:
            calls[event["item_id"]]["arguments"] += event["delta"]
    return list(calls.values())


def types(events: list[dict]) -> list[str]:
    return [event["type"] for event in events]


# --- OpenAI Responses, WebSocket mode -------------------------------------------------------------


@pytest.mark.parametrize(
    "name", [n for n in fp.WS_SCENARIOS["openai-responses"] if n not in ("truncated", "gated")]
)
def test_responses_events_are_the_sse_events_with_ids_of_the_response(provider, name):
    with ws(provider, "/v1/responses") as conn:
        events = responses_turn(conn, name)
    sse = fp.payloads("openai-responses", name)
    assert types(events) == types(sse)
    assert events[0]["response"]["id"] == f"resp_fake_{name}_1"
    assert responses_calls(events) == fp.ws_expected("openai-responses", name)
    if name == "error-midstream":  # wrapped as the WebSocket error event is
        [error] = [event for event in events if event["type"] == "error"]
        assert error["error"]["code"] == "server_error" and error["error"]["message"]
        assert events[-1]["type"] == "response.failed"
    else:
        assert events[-1]["response"]["status"] == "completed"
        assert [e["sequence_number"] for e in events] == list(range(len(events)))


def test_responses_several_turns_on_one_connection_chain_and_keep_ids_apart(provider):
    with ws(provider, "/backend-api/codex/responses") as conn:
        first = responses_turn(conn, "interleaved")
        first_id = first[-1]["response"]["id"]
        second = responses_turn(conn, "interleaved", previous_response_id=first_id)
        third = responses_turn(conn, "text", previous_response_id=second[-1]["response"]["id"])
        missing = responses_turn(conn, "text", previous_response_id="resp_nowhere")
        unknown = responses_turn(conn, "no-such-scenario")
        fourth = responses_turn(conn, "sequential")
    assert responses_calls(first) == fp.ws_expected("openai-responses", "interleaved", 1)
    assert responses_calls(second) == fp.ws_expected("openai-responses", "interleaved", 2)
    assert {c["id"] for c in responses_calls(first)}.isdisjoint(c["id"] for c in responses_calls(second))
    assert second[-1]["response"]["previous_response_id"] == first_id == "resp_fake_interleaved_1"
    assert third[-1]["response"]["id"] == "resp_fake_text_3" and responses_calls(third) == []
    assert missing == [
        {
            "type": "error",
            "status": 400,
            "error": {
                "type": "invalid_request_error",
                "code": "previous_response_not_found",
                "message": "Previous response with id 'resp_nowhere' not found.",
                "param": "previous_response_id",
            },
        }
    ]
    [error] = unknown
    assert error["type"] == "error" and error["error"]["code"] == "model_not_found"
    assert responses_calls(fourth) == fp.ws_expected("openai-responses", "sequential", 4)


def test_responses_prewarm_sends_created_and_completed_only(provider):
    with ws(provider, "/v1/responses") as conn:
        warm = responses_turn(conn, "interleaved", generate=False)
        turn = responses_turn(conn, "interleaved", previous_response_id=warm[0]["response"]["id"])
    assert types(warm) == ["response.created", "response.completed"]
    assert warm[-1]["response"]["output"] == [] and warm[-1]["response"]["status"] == "completed"
    assert responses_calls(turn) == fp.ws_expected("openai-responses", "interleaved", 2)


def test_responses_lanes_interleave_and_echo_their_stream_id(provider):
    with ws(provider, "/v1/responses", {"X-Fake-Delay": "0.01"}) as conn:
        send(conn, create("interleaved", stream_id="lane-a"))
        send(conn, create("sequential", stream_id="lane-b"))
        events, done = [], set()
        while len(done) < 2:
            events.append(receive(conn))
            if events[-1]["type"] in RESPONSES_TERMINAL:
                done.add(events[-1]["stream_id"])
    lanes = [event["stream_id"] for event in events]
    a = [event for event in events if event["stream_id"] == "lane-a"]
    b = [event for event in events if event["stream_id"] == "lane-b"]
    assert types(a) == types(fp.payloads("openai-responses", "interleaved"))
    assert types(b) == types(fp.payloads("openai-responses", "sequential"))
    assert responses_calls(a) == fp.ws_expected("openai-responses", "interleaved", 1)
    assert responses_calls(b) == fp.ws_expected("openai-responses", "sequential", 2)
    # Once lane b has started, the lanes take turns until the shorter one is done.
    start = lanes.index("lane-b") - 1
    both = lanes[start : start + 2 * min(len(a), len(b)) - 2]
    assert all(x != y for x, y in itertools.pairwise(both)), lanes


def test_responses_without_stream_id_are_sequential(provider):
    with ws(provider, "/v1/responses") as conn:
        send(conn, create("interleaved"))
        send(conn, create("text"))
        events = until(conn, lambda e: e["type"] == "response.completed" and e["response"]["model"] == "text")
    ids = [
        event["response"]["id"]
        for event in events
        if event["type"] in ("response.created", "response.completed")
    ]
    assert ids == [
        "resp_fake_interleaved_1",
        "resp_fake_interleaved_1",
        "resp_fake_text_2",
        "resp_fake_text_2",
    ]
    assert "stream_id" not in events[0]


def test_responses_truncated_closes_mid_call_with_a_close_frame(provider):
    with ws(provider, "/v1/responses") as conn:
        send(conn, create("truncated"))
        got, closed = to_close(conn)
    events = [json.loads(message) for message in got]
    assert types(events) == types(fp.payloads("openai-responses", "truncated", cut=True))
    assert events[-1]["type"] == "response.function_call_arguments.delta"
    assert isinstance(closed, ConnectionClosedError) and closed.rcvd.code == 1011


def test_responses_gated_waits_for_release(provider):
    with ws(provider, "/v1/responses") as conn:
        send(conn, create("gated"))
        assert receive(conn)["type"] == "response.created"
        with pytest.raises(TimeoutError):
            conn.recv(timeout=0.3)
        release = http.client.HTTPConnection("127.0.0.1", provider, timeout=SAFETY_TIMEOUT)
        release.request("GET", "/release")
        assert release.getresponse().read() == b"1\n"
        rest = until(conn, lambda e: e["type"] == "response.completed")
    assert responses_calls(rest) == fp.ws_expected("openai-responses", "gated")


# --- Wire options and faults ------------------------------------------------------------------------


def test_deflate_is_negotiated_when_offered_and_declined_when_asked(provider):
    offers = [({}, "deflate", True), ({}, None, False), ({"X-Fake-Deflate": "0"}, "deflate", False)]
    for headers, compression, negotiated in offers:
        with ws(provider, "/v1/responses", headers, compression=compression) as conn:
            extensions = conn.response.headers.get("Sec-WebSocket-Extensions") or ""
            events = responses_turn(conn, "unicode")
        assert ("permessage-deflate" in extensions) is negotiated, (headers, compression)
        assert responses_calls(events) == fp.ws_expected("openai-responses", "unicode")


@pytest.mark.parametrize("compression", ["deflate", None])
def test_fragments_hold_at_most_the_asked_bytes_and_rebuild_the_message(provider, compression):
    with ws(provider, "/v1/responses", {"X-Fake-Fragment": "16"}, compression=compression) as conn:
        send(conn, create("unicode"))
        messages = []
        while not messages or messages[-1]["type"] != "response.completed":
            pieces = list(conn.recv_streaming())
            assert all(isinstance(piece, str) and len(piece.encode()) <= 16 for piece in pieces)
            assert len(pieces) > 1 or len(pieces[0].encode()) <= 16
            messages.append(json.loads("".join(pieces)))
    assert responses_calls(messages) == fp.ws_expected("openai-responses", "unicode")


def test_binary_frames_when_asked_for_responses_events(provider):
    with ws(provider, "/v1/responses", {"X-Fake-Binary": "1"}) as conn:
        send(conn, create("interleaved"))
        got = []
        while not got or json.loads(got[-1])["type"] != "response.completed":
            got.append(conn.recv(timeout=SAFETY_TIMEOUT))
    assert all(isinstance(message, bytes) for message in got)
    assert responses_calls([json.loads(m) for m in got]) == fp.ws_expected("openai-responses", "interleaved")


def test_ws_garbage_sends_one_bad_text_and_one_bad_binary_message_mid_response(provider):
    with ws(provider, "/v1/responses", {"X-Fake-Fault": "ws-garbage"}) as conn:
        send(conn, create("interleaved"))
        got = []
        while not got or not isinstance(got[-1], str) or '"response.completed"' not in got[-1]:
            got.append(conn.recv(timeout=SAFETY_TIMEOUT))
    [bad_binary] = [message for message in got if isinstance(message, bytes)]
    with pytest.raises(UnicodeDecodeError):
        bad_binary.decode()
    texts = [message for message in got if isinstance(message, str)]
    bad_text = []
    for message in texts:
        try:
            json.loads(message)
        except json.JSONDecodeError:
            bad_text.append(message)
    assert len(bad_text) == 1
    events = [json.loads(message) for message in texts if message not in bad_text]
    assert 0 < got.index(bad_text[0]) < len(got) - 1
    assert responses_calls(events) == fp.ws_expected("openai-responses", "interleaved")


def test_ws_drop_ends_the_tcp_connection_mid_call_without_a_close_frame(provider):
    with ws(provider, "/v1/responses", {"X-Fake-Fault": "ws-drop"}) as conn:
        send(conn, create("interleaved"))
        got, closed = to_close(conn)
    events = [json.loads(message) for message in got]
    assert closed.rcvd is None  # no close frame came
    assert "response.function_call_arguments.delta" in types(events)
    assert "response.completed" not in types(events)


@pytest.mark.parametrize(
    ("path", "headers", "status"),
    [
        ("/v1/nothing-here", {}, 404),
        ("/v1/responses", {"X-Fake-Fault": "drip"}, 400),
        ("/v1/responses", {"X-Fake-Fragment": "0"}, 400),
        ("/v1/responses", {"X-Fake-Delay": "soon"}, 400),
    ],
)
def test_an_upgrade_that_cannot_be_served_is_refused_as_http(provider, path, headers, status):
    with pytest.raises(InvalidStatus) as refused, ws(provider, path, headers):
        pass
    assert refused.value.response.status_code == status


# --- OpenAI Realtime --------------------------------------------------------------------------------


def realtime_turn(conn: ClientConnection, *, cancel: bool = False) -> list[dict]:
    send(conn, {"type": "response.create"})
    events = until(conn, lambda e: e["type"] in ("response.created", "response.done"))
    if cancel:
        send(conn, {"type": "response.cancel"})
    if events[-1]["type"] != "response.done":
        events += until(conn, lambda e: e["type"] == "response.done")
    return events


def realtime_calls(events: list[dict]) -> list[dict]:
    """The calls rebuilt by (response_id, item_id), the call_id cross-checked on every delta."""
    calls: dict[tuple, dict] = {}
    for event in events:
        if event["type"] == "response.output_item.added" and event["item"]["type"] == "function_call":
            item = event["item"]
            key = (event["response_id"], item["id"])
            calls[key] = {"id": item["call_id"], "item_id": item["id"], "name": item["name"], "arguments": ""}
        elif event["type"] == "response.function_call_arguments.delta":
            call = calls[event["response_id"], event["item_id"]]
            assert call["id"] == event["call_id"]
            call["arguments"] += event["delta"]
    return list(calls.values())


def realtime_path(name: str) -> str:
    return f"/v1/realtime?model={name}"


@pytest.mark.parametrize("name", ["interleaved", "sequential", "unicode", "text"])
def test_realtime_scenarios_stream_function_call_items_by_identity(provider, name):
    with ws(provider, realtime_path(name)) as conn:
        created = receive(conn)
        events = realtime_turn(conn)
    assert created["type"] == "session.created" and created["session"]["model"] == name
    assert events[0]["type"] == "response.created" and events[0]["response"]["status"] == "in_progress"
    assert realtime_calls(events) == fp.ws_expected("openai-realtime", name)
    done = events[-1]["response"]
    assert done["status"] == "completed" and done["usage"]["total_tokens"] == 70
    finished = [item for item in done["output"] if item["type"] == "function_call"]
    assert [(i["call_id"], i["arguments"]) for i in finished] == [
        (call["id"], call["arguments"]) for call in fp.ws_expected("openai-realtime", name)
    ]
    ids = [event["event_id"] for event in [created, *events]]
    assert len(set(ids)) == len(ids)
    if name == "text":
        text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
        assert text == "Hello from the fake provider."


def test_realtime_session_items_and_a_second_turn_after_the_outputs(provider):
    with ws(provider, realtime_path("interleaved")) as conn:
        receive(conn)
        send(conn, {"type": "session.update", "session": {"instructions": "be brief"}})
        updated = receive(conn)
        first = realtime_turn(conn)
        created = []
        for call in realtime_calls(first):
            output = {"type": "function_call_output", "call_id": call["id"], "output": "{}"}
            send(conn, {"type": "conversation.item.create", "item": output})
            created.append(receive(conn))
        answer = realtime_turn(conn)
        again = realtime_turn(conn)
    assert updated["type"] == "session.updated" and updated["session"]["instructions"] == "be brief"
    assert [event["type"] for event in created] == ["conversation.item.created"] * 2
    assert [event["item"]["call_id"] for event in created] == [c["id"] for c in realtime_calls(first)]
    assert created[1]["previous_item_id"] == created[0]["item"]["id"]
    assert answer[0]["response"]["id"] == "resp_fake_text_2" and realtime_calls(answer) == []
    assert realtime_calls(again) == fp.ws_expected("openai-realtime", "interleaved", 3)


def test_realtime_beta_clients_get_the_beta_event_names(provider):
    for headers, delta in (
        ({"OpenAI-Beta": "realtime=v1"}, "response.text.delta"),
        ({}, "response.output_text.delta"),
    ):
        with ws(provider, realtime_path("text"), headers) as conn:
            receive(conn)
            events = realtime_turn(conn)
        assert delta in types(events)


def test_realtime_cancel_scenario_ends_cancelled_after_the_first_deltas(provider):
    with ws(provider, realtime_path("realtime-cancel")) as conn:
        receive(conn)
        events = realtime_turn(conn)
    done = events[-1]["response"]
    assert done["status"] == "cancelled" and done["status_details"]["reason"] == "client_cancelled"
    partial = realtime_calls(events)
    assert [c["arguments"] for c in partial] == ['{"query": "RBI', '{"user_id": "u']
    assert [item["arguments"] for item in done["output"]] == [c["arguments"] for c in partial]
    assert {item["status"] for item in done["output"]} == {"incomplete"}
    # .done comes for a cancelled call too, with the arguments as far as they got.
    dones = [e["arguments"] for e in events if e["type"] == "response.function_call_arguments.done"]
    assert dones == [c["arguments"] for c in partial]


def test_realtime_client_cancel_stops_the_response_where_it_got_to(provider):
    with ws(provider, realtime_path("sequential"), {"X-Fake-Delay": "0.05"}) as conn:
        receive(conn)
        events = realtime_turn(conn, cancel=True)
        send(conn, {"type": "response.cancel"})
        error = receive(conn)
    assert events[-1]["response"]["status"] == "cancelled"
    assert realtime_calls(events) != fp.ws_expected("openai-realtime", "sequential")  # stopped short
    assert {item["status"] for item in events[-1]["response"]["output"]} <= {"completed", "incomplete"}
    assert error["type"] == "error" and error["error"]["code"] == "response_cancel_not_active"


def test_realtime_audio_sends_base64_audio_and_its_transcript(provider):
    with ws(provider, realtime_path("realtime-audio")) as conn:
        receive(conn)
        events = realtime_turn(conn)
    audio = [e["delta"] for e in events if e["type"] == "response.output_audio.delta"]
    transcript = "".join(e["delta"] for e in events if e["type"] == "response.output_audio_transcript.delta")
    assert audio and all(base64.b64decode(chunk, validate=True) for chunk in audio)
    assert transcript == "Let me check the weather in Paris."
    assert realtime_calls(events) == fp.ws_expected("openai-realtime", "realtime-audio")


def test_realtime_error_midstream_and_truncated(provider):
    with ws(provider, realtime_path("error-midstream")) as conn:
        receive(conn)
        events = realtime_turn(conn)
    assert "error" in types(events) and events[-1]["response"]["status"] == "failed"
    with ws(provider, realtime_path("truncated")) as conn:
        receive(conn)
        send(conn, {"type": "response.create"})
        got, closed = to_close(conn)
    assert json.loads(got[-1])["type"] == "response.function_call_arguments.delta"
    assert closed.rcvd.code == 1011


def test_realtime_unknown_scenario_is_an_error_then_a_close(provider):
    with ws(provider, realtime_path("nope")) as conn:
        got, closed = to_close(conn)
    [error] = [json.loads(message) for message in got]
    assert error["error"]["code"] == "model_not_found" and closed.rcvd.code == 1008


# --- Gemini Live ------------------------------------------------------------------------------------


def live_receive(conn: ClientConnection) -> dict:
    message = conn.recv(timeout=SAFETY_TIMEOUT)
    assert isinstance(message, bytes)  # Live sends its JSON in binary frames
    return json.loads(message)


def live_until_turn_ends(conn: ClientConnection) -> list[dict]:
    got = []
    while not got or "usageMetadata" not in got[-1]:
        got.append(live_receive(conn))
    return got


def live_open(conn: ClientConnection, name: str, *, snake: bool = False) -> dict:
    setup = {
        "model": f"models/{name}",
        "tools": [{"function_declarations" if snake else "functionDeclarations": []}],
    }
    send(conn, {"setup": setup})
    return live_receive(conn)


@pytest.mark.parametrize("name", ["interleaved", "sequential", "unicode", "text", "live-cancel"])
def test_live_scenarios_send_whole_calls_in_one_tool_call(provider, name):
    with ws(provider, LIVE_PATH) as conn:
        assert live_open(conn, name) == {"setupComplete": {}}
        send(
            conn,
            {"clientContent": {"turns": [{"role": "user", "parts": [{"text": "hi"}]}], "turnComplete": True}},
        )
        messages = live_until_turn_ends(conn)
    expected = fp.ws_expected("gemini-live", name)
    calls = [m["toolCall"]["functionCalls"] for m in messages if "toolCall" in m]
    if expected:
        assert calls == [[{"id": c["id"], "name": c["name"], "args": c["args"]} for c in expected]]
        assert all(json.loads(c["arguments"]) == c["args"] for c in expected)
    else:
        assert calls == [] and {"serverContent": {"turnComplete": True}} in messages
    cancelled = [m["toolCallCancellation"]["ids"] for m in messages if "toolCallCancellation" in m]
    assert cancelled == ([[expected[0]["id"]]] if name == "live-cancel" else [])
    parts = [
        m["serverContent"]["modelTurn"]["parts"][0]
        for m in messages
        if "modelTurn" in m.get("serverContent", {})
    ]
    if name == "text":
        assert "".join(part["text"] for part in parts) == "Hello from the fake provider."


def test_live_snake_case_turns_and_a_tool_response(provider):
    with ws(provider, "/v1beta/anything/BidiGenerateContent") as conn:
        assert live_open(conn, "interleaved", snake=True) == {"setupComplete": {}}
        send(conn, {"client_content": {"turns": [], "turn_complete": True}})
        first = live_until_turn_ends(conn)
        [calls] = [m["toolCall"]["functionCalls"] for m in first if "toolCall" in m]
        responses = [{"id": c["id"], "name": c["name"], "response": {"ok": True}} for c in calls]
        send(conn, {"tool_response": {"function_responses": responses}})
        answer = live_until_turn_ends(conn)
        send(conn, {"realtimeInput": {"text": "again"}})
        third = live_until_turn_ends(conn)
    assert [c["id"] for c in calls] == [c["id"] for c in fp.ws_expected("gemini-live", "interleaved", 1)]
    assert {"serverContent": {"turnComplete": True}} in answer and "toolCall" not in str(answer)
    [third_calls] = [m["toolCall"]["functionCalls"] for m in third if "toolCall" in m]
    assert [c["id"] for c in third_calls] == [
        c["id"] for c in fp.ws_expected("gemini-live", "interleaved", 3)
    ]


def test_live_error_truncated_and_unknown_model_close_the_connection(provider):
    for name, code, calls in (("error-midstream", 1011, 0), ("truncated", 1011, 0)):
        with ws(provider, LIVE_PATH) as conn:
            live_open(conn, name)
            send(conn, {"clientContent": {"turns": [], "turnComplete": True}})
            got, closed = to_close(conn)
        assert closed.rcvd.code == code
        assert sum("toolCall" in json.loads(message) for message in got) == calls
    with ws(provider, LIVE_PATH) as conn:
        send(conn, {"setup": {"model": "models/gemini-nope"}})
        got, closed = to_close(conn)
    assert got == [] and closed.rcvd.code == 1008 and "gemini-nope" in closed.rcvd.reason


def test_live_fragments_and_faults_in_binary_frames(provider):
    with ws(provider, LIVE_PATH, {"X-Fake-Fragment": "10"}) as conn:
        live_open(conn, "interleaved")
        send(conn, {"clientContent": {"turns": [], "turnComplete": True}})
        pieces = list(conn.recv_streaming())
    assert len(pieces) > 1 and all(isinstance(p, bytes) and len(p) <= 10 for p in pieces)
    assert "toolCall" in json.loads(b"".join(pieces))
    with ws(provider, LIVE_PATH, {"X-Fake-Fault": "ws-drop"}) as conn:
        live_open(conn, "interleaved")
        send(conn, {"clientContent": {"turns": [], "turnComplete": True}})
        got, closed = to_close(conn)
    assert closed.rcvd is None and "toolCall" in json.loads(got[0]) and len(got) == 1
