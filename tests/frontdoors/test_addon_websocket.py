"""The addon on WebSocket flows, with mitmproxy's own test harness: the hooks, the record on the flow, the
messages left unchanged, the stored messages trimmed to a bound, the handshake's keys redacted, the host
filter, and a failure inside that never reaches the traffic."""

from __future__ import annotations

import gc
import json

import pytest
from faults import Failing
from mitmproxy.test import taddons
from schemas import check_connection
from websocket_turns import send, ws_flow

import addon as addon_module


def a_turn(lens, flow, n, calls=2):
    send(lens, flow, True, {"type": "response.create", "model": "m"})
    send(lens, flow, False, {"type": "response.created", "response": {"id": f"r{n}", "model": "m"}})
    for i in range(calls):
        item = {"type": "function_call", "id": f"fc{n}_{i}", "call_id": f"c{n}_{i}", "name": f"tool_{i}"}
        send(lens, flow, False, {"type": "response.output_item.added", "output_index": i, "item": item})
    for i in range(calls):
        send(
            lens,
            flow,
            False,
            {"type": "response.function_call_arguments.delta", "output_index": i, "delta": "{}"},
        )
    send(
        lens, flow, False, {"type": "response.completed", "response": {"id": f"r{n}", "status": "completed"}}
    )


def test_a_connection_gets_its_record_comment_and_marker(lens):
    flow = ws_flow()
    lens.websocket_start(flow)
    a_turn(lens, flow, 1)
    outputs = [{"type": "function_call_output", "call_id": "c1_0", "output": "ok"}]
    send(
        lens,
        flow,
        True,
        {"type": "response.create", "model": "m", "previous_response_id": "r1", "input": outputs},
    )
    send(lens, flow, False, {"type": "response.created", "response": {"id": "r2"}})
    send(lens, flow, False, {"type": "response.completed", "response": {"id": "r2", "status": "completed"}})
    lens.websocket_end(flow)
    record = flow.metadata["toolcall_lens"]
    check_connection(record)
    assert [r["websocket"]["position"] for r in record["responses"]] == [1, 2]
    assert record["connection"]["closed"]["code"] == flow.websocket.close_code
    assert flow.comment.startswith("openai-responses websocket: 2 responses, calls: tool_0, tool_1")
    assert "unanswered-call" in flow.comment and flow.marked == ":warning:"


def test_a_clean_connection_is_not_marked(lens):
    flow = ws_flow()
    lens.websocket_start(flow)
    a_turn(lens, flow, 1, calls=1)
    lens.websocket_end(flow)
    assert flow.metadata["toolcall_lens"]["responses"][0]["complete"] and not flow.marked


def test_messages_are_never_changed_even_when_the_analysis_fails(lens, monkeypatch):
    flow = ws_flow()
    lens.websocket_start(flow)
    watch = lens.sockets[flow.id]
    monkeypatch.setattr(watch, "connection", Failing(watch.connection, "message", ZeroDivisionError("1 / 0")))
    message = send(lens, flow, False, b'{"type":"response.created"}')
    assert message.content == b'{"type":"response.created"}' and not message.dropped
    lens.websocket_end(flow)
    warnings = (
        flow.metadata["toolcall_lens"]["connection"]["warnings"] if "toolcall_lens" in flow.metadata else []
    )
    assert [w["code"] for w in warnings] == ["internal-error"]


def test_a_connection_that_is_not_llm_traffic_gets_nothing(lens):
    lens.tctx.configure(lens, toolcall_lens_websocket_keep=5)
    flow = ws_flow(path="/socket.io/?EIO=4")
    lens.websocket_start(flow)
    for n in range(30):
        send(lens, flow, n % 2 == 0, {"chat": n})
    assert flow.id not in lens.sockets  # given up after its first messages: no more cost
    assert len(flow.websocket.messages) == 30  # never trimmed: not ours to touch
    lens.websocket_end(flow)
    assert "toolcall_lens" not in flow.metadata and not flow.comment


def test_an_unknown_path_is_recognised_from_the_first_messages(lens):
    flow = ws_flow(path="/my-gateway/socket")
    lens.websocket_start(flow)
    send(lens, flow, True, {"setup": {"model": "models/g"}})
    send(
        lens,
        flow,
        False,
        {"toolCall": {"functionCalls": [{"id": "f1", "name": "a", "args": {}}]}},
        binary=True,
    )
    lens.websocket_end(flow)
    assert flow.metadata["toolcall_lens"]["connection"]["format"] == "gemini-live"


def test_the_host_filter_applies_to_websocket_flows(lens):
    lens.tctx.configure(lens, toolcall_lens_hosts=["*.example.com"])
    flow = ws_flow(host="api.openai.com")
    lens.websocket_start(flow)
    a_turn(lens, flow, 1)
    lens.websocket_end(flow)
    assert "toolcall_lens" not in flow.metadata


def test_analysed_messages_beyond_the_cap_are_dropped_and_counted(lens):
    lens.tctx.configure(lens, toolcall_lens_websocket_keep=10)
    flow = ws_flow()
    lens.websocket_start(flow)
    for n in range(30):
        a_turn(lens, flow, n, calls=1)
        assert len(flow.websocket.messages) < 20
    last = flow.websocket.messages[-1]
    assert json.loads(last.content)["type"] == "response.completed"  # the current message stays
    lens.websocket_end(flow)
    record = flow.metadata["toolcall_lens"]
    assert len(record["responses"]) == 30  # the analysis saw every message
    total = sum(record["connection"]["messages"].values())
    assert record["connection"]["trimmed"] == total - len(flow.websocket.messages)
    assert [w["code"] for w in record["connection"]["warnings"]] == ["websocket-messages-trimmed"]


def test_keep_0_keeps_every_message(lens):
    lens.tctx.configure(lens, toolcall_lens_websocket_keep=0)
    flow = ws_flow()
    lens.websocket_start(flow)
    for n in range(30):
        a_turn(lens, flow, n, calls=1)
    assert len(flow.websocket.messages) == 30 * 5


@pytest.mark.heavy
def test_a_connection_of_100000_messages_holds_bounded_memory(lens):
    """What is alive after 100,000 messages is what was alive after 20,000: the stored messages are
    trimmed, the connection keeps a bounded number of results, each response's analysis is freed once
    settled. (Objects counted by the garbage collector, which tracks every message, result and call.)"""
    flow = ws_flow()
    lens.websocket_start(flow)
    text = "x" * 200

    def traffic(start, stop):
        for n in range(start, stop, 5):
            send(lens, flow, True, {"type": "response.create", "model": "m"})
            send(lens, flow, False, {"type": "response.created", "response": {"id": f"r{n}"}})
            send(lens, flow, False, {"type": "response.output_text.delta", "delta": text})
            send(lens, flow, False, {"type": "response.output_text.delta", "delta": text})
            send(
                lens,
                flow,
                False,
                {"type": "response.completed", "response": {"id": f"r{n}", "status": "completed"}},
            )

    traffic(0, 20_000)  # past every cap: the flow's messages, the connection's results
    gc.collect()
    after_20k = len(gc.get_objects())
    traffic(20_000, 100_000)
    gc.collect()
    after_100k = len(gc.get_objects())
    # 80,000 more messages (about 23 MB of content) leave next to no more objects alive.
    assert after_100k - after_20k < 500, (after_20k, after_100k)
    assert len(flow.websocket.messages) < 2 * 1000


def test_the_handshakes_keys_are_redacted_once_the_upgrade_went_out(lens):
    flow = ws_flow(path="/v1/realtime?model=gpt-realtime&key=AIzaSECRETSECRET")
    flow.request.headers["Authorization"] = "Bearer sk-proj-abcdefghijklmnop"
    flow.request.headers["Sec-WebSocket-Protocol"] = (
        "realtime, openai-insecure-api-key.sk-abcdefghijklmnop, openai-beta.realtime-v1"
    )
    flow.request.headers["x-goog-api-key"] = "AIzaSECRETSECRETSECRET"
    lens.responseheaders(flow)  # the 101: the upgrade request has gone out
    headers = flow.request.headers
    assert headers["Authorization"] == "Bearer sk-pro...[redacted]"
    assert headers["Sec-WebSocket-Protocol"] == (
        "realtime, openai-insecure-api-key.sk-a...[redacted], openai-beta.realtime-v1"
    )
    assert "SECRET" not in headers["x-goog-api-key"] and "SECRET" not in flow.request.path
    assert "toolcall_lens" not in flow.metadata  # the 101 itself is no LLM response


def test_the_keep_option_is_checked(lens):
    from mitmproxy import exceptions

    with pytest.raises(exceptions.OptionsError, match="websocket_keep"):
        lens.tctx.configure(lens, toolcall_lens_websocket_keep=-1)


def first_call_of_r1(lens, flow) -> None:
    """A response asked for and started, its first call (search) added."""
    send(lens, flow, True, {"type": "response.create", "model": "m"})
    send(lens, flow, False, {"type": "response.created", "response": {"id": "r1", "model": "m"}})
    item = {"type": "function_call", "id": "fc0", "call_id": "c0", "name": "search"}
    send(lens, flow, False, {"type": "response.output_item.added", "output_index": 0, "item": item})


def test_a_running_response_shows_its_calls_as_they_grow_at_the_live_update_rate(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(addon_module.time, "time", lambda: now[0])
    lens = addon_module.ToolcallLens()
    with taddons.context(lens) as tctx:
        tctx.configure(lens, toolcall_lens_live_updates=2)  # at most one update per 0.5 s
        flow = ws_flow()
        lens.websocket_start(flow)
        first_call_of_r1(lens, flow)
        # The first message updated it (none before); those within 0.5 s after it did not.
        assert len(flow.metadata["toolcall_lens_live"]["running"]) == 1
        first = flow.comment
        assert first.startswith("openai-responses websocket: 0 response(s) done, 1 running")
        item = {"type": "function_call", "id": "fc1", "call_id": "c1", "name": "fetch"}
        send(lens, flow, False, {"type": "response.output_item.added", "output_index": 1, "item": item})
        assert flow.comment == first  # within 0.5 s of the last update: not updated again
        now[0] += 0.6
        send(
            lens,
            flow,
            False,
            {"type": "response.function_call_arguments.delta", "output_index": 1, "delta": "{}"},
        )
        assert flow.comment.endswith("2 call(s) so far: search, fetch")
        assert [
            c["name"] for c in flow.metadata["toolcall_lens_live"]["running"][0]["choices"][0]["tool_calls"]
        ] == [
            "search",
            "fetch",
        ]
        send(
            lens, flow, False, {"type": "response.completed", "response": {"id": "r1", "status": "completed"}}
        )
        # Settled once the client's next message answered its calls: the record takes over, the snapshot goes.
        outputs = [{"type": "function_call_output", "call_id": c, "output": "ok"} for c in ("c0", "c1")]
        send(lens, flow, True, {"type": "response.create", "previous_response_id": "r1", "input": outputs})
        assert "toolcall_lens_live" not in flow.metadata and "toolcall_lens" in flow.metadata
        assert flow.comment == "openai-responses websocket: 2 responses, calls: search, fetch"


def test_no_live_update_when_it_is_off():
    lens = addon_module.ToolcallLens()
    with taddons.context(lens) as tctx:
        tctx.configure(lens, toolcall_lens_live_updates=0)
        flow = ws_flow()
        lens.websocket_start(flow)
        first_call_of_r1(lens, flow)
        assert "toolcall_lens_live" not in flow.metadata and not flow.comment
