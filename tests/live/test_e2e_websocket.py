"""LLM traffic over WebSockets end to end: the fake provider's WebSocket side, a real mitmdump with the addon
in reverse mode, and real clients: the official openai SDK's Responses WebSocket and Realtime clients, and
the `websockets` library (Gemini Live, lanes, compression, fragments, faults).

Every message must reach the client as the provider sent it (compared with the same conversation held
directly with the provider), and every response must be rebuilt right: the JSONL export (one record per
response) and the dump's stored record say so. One proxy session for the module; each test finds its
connection by the ``X-Test-Case`` header of its upgrade request."""

from __future__ import annotations

import json
import subprocess

import fake_provider as fp
import openai
import pytest
from lab import BIN, start_fake_provider, start_mitmdump
from mitmproxy import io as mio
from streams import without_timing
from websockets.sync.client import connect

LIVE_PATH = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
TOOLS = [{"type": "function", "name": n, "parameters": {"type": "object"}} for n in ("search_circulars", "get_user_profile", "get_weather", "get_time")]  # fmt: skip


def received(ws, until, limit=200) -> list:
    """Messages (str or bytes) until one satisfies ``until`` (parsed JSON) or the server closes."""
    out = []
    for _ in range(limit):
        try:
            message = ws.recv(timeout=20)
        except Exception:  # noqa: BLE001 - closed: what came is what there is
            break
        out.append(message)
        try:
            obj = json.loads(message)
        except ValueError:
            continue
        if until(obj):
            break
    return out


def kind(*types):
    return lambda obj: isinstance(obj, dict) and obj.get("type") in types


def responses_conversation(port, case, headers=None, compression="deflate"):
    """Three turns on one socket: a prewarm, the interleaved calls, then their answers (one left out)."""
    url = f"ws://127.0.0.1:{port}/v1/responses"
    got = []
    with connect(
        url, additional_headers={"X-Test-Case": case, **(headers or {})}, compression=compression
    ) as ws:
        ws.send(json.dumps({"type": "response.create", "model": "text", "generate": False}))
        got += received(ws, kind("response.completed", "error"))
        previous = json.loads(got[-1])["response"]["id"]
        ws.send(json.dumps({"type": "response.create", "model": "interleaved", "tools": TOOLS, "previous_response_id": previous}))  # fmt: skip
        got += received(ws, kind("response.completed", "error"))
        completed = json.loads(got[-1])["response"]
        first = next(item for item in completed["output"] if item["type"] == "function_call")
        answer = [{"type": "function_call_output", "call_id": first["call_id"], "output": "ok"}]
        ws.send(json.dumps({"type": "response.create", "model": "text", "previous_response_id": completed["id"], "input": answer}))  # fmt: skip
        got += received(ws, kind("response.completed", "error"))
    return got


def lanes_conversation(port, case, headers=None):
    url = f"ws://127.0.0.1:{port}/v1/responses"
    with connect(url, additional_headers={"X-Test-Case": case, **(headers or {})}) as ws:
        ws.send(json.dumps({"type": "response.create", "model": "interleaved", "stream_id": "a"}))
        ws.send(json.dumps({"type": "response.create", "model": "sequential", "stream_id": "b"}))
        got, done = [], 0
        for _ in range(400):
            message = ws.recv(timeout=20)
            got.append(message)
            try:
                done += json.loads(message).get("type") == "response.completed"
            except ValueError:  # the garbage fault's messages
                continue
            if done == 2:
                break
    return got


def live_conversation(port, case, scenario="live-cancel"):
    with connect(f"ws://127.0.0.1:{port}{LIVE_PATH}", additional_headers={"X-Test-Case": case}) as ws:
        tools = [{"functionDeclarations": [{"name": "search_circulars"}, {"name": "get_user_profile"}]}]
        ws.send(json.dumps({"setup": {"model": f"models/{scenario}", "tools": tools}}))
        got = received(ws, lambda obj: "setupComplete" in obj)
        ws.send(json.dumps({"clientContent": {"turns": [{"role": "user", "parts": [{"text": "go"}]}], "turnComplete": True}}))  # fmt: skip
        got += received(ws, lambda obj: "usageMetadata" in obj)
        calls = [c for m in got if "toolCall" in (o := json.loads(m)) for c in o["toolCall"]["functionCalls"]]
        # The Python SDK's spelling; every call answered, the cancelled one too.
        answers = [{"id": c["id"], "name": c["name"], "response": {"ok": True}} for c in calls]
        ws.send(json.dumps({"tool_response": {"function_responses": answers}}))
        got += received(ws, lambda obj: "usageMetadata" in obj)
    return got


def realtime_conversation(port, case, scenario="realtime-cancel", cancel=False):
    """One Realtime turn that ends cancelled: by the scenario itself, or by the client's response.cancel
    after the first call's item was added."""
    url = f"ws://127.0.0.1:{port}/v1/realtime?model={scenario}"
    headers = {"X-Test-Case": case, **({"X-Fake-Delay": "0.05"} if cancel else {})}
    with connect(url, additional_headers=headers) as ws:
        got = received(ws, kind("session.created"))
        ws.send(json.dumps({"type": "response.create"}))
        if cancel:
            got += received(ws, kind("response.function_call_arguments.delta", "response.done"))
            ws.send(json.dumps({"type": "response.cancel"}))
        got += received(ws, kind("response.done"))
    return got


@pytest.fixture(scope="module", params=[False, True], ids=["in-proxy", "worker"])
def session(request, tmp_path_factory):
    """All the traffic through one mitmdump, and the same conversations held directly for comparison;
    twice: analysed in the proxy, and in its worker process (toolcall_lens_worker)."""
    folder = tmp_path_factory.mktemp("e2e-websocket")
    dump, jsonl = folder / "flows.mitm", folder / "records.jsonl"
    provider, provider_port = start_fake_provider(delay=0.001)
    seen: dict[str, dict] = {}
    try:
        proxy, port = start_mitmdump(
            provider_port,
            dump,
            f"toolcall_lens_jsonl={jsonl}",
            f"toolcall_lens_worker={str(request.param).lower()}",
        )
        try:
            for where, target in (("proxied", port), ("direct", provider_port)):
                seen.setdefault("responses", {})[where] = responses_conversation(target, "responses")
                seen.setdefault("responses-fragmented", {})[where] = responses_conversation(
                    target, "responses-fragmented", {"X-Fake-Fragment": "7"}
                )
                seen.setdefault("lanes", {})[where] = lanes_conversation(target, "lanes")
                seen.setdefault("live", {})[where] = live_conversation(target, "live")
                seen.setdefault("garbage", {})[where] = lanes_conversation(
                    target, "garbage", {"X-Fake-Fault": "ws-garbage"}
                )
                seen.setdefault("realtime-cancel", {})[where] = realtime_conversation(
                    target, "realtime-cancel"
                )
            # Cancelled by the client mid-response: where it stops depends on timing, so not compared.
            seen["realtime-client-cancel"] = {
                "proxied": realtime_conversation(port, "realtime-client-cancel", "sequential", cancel=True)
            }
            # The official SDK: Responses WebSocket mode, and Realtime with a parallel pair of calls.
            client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-test-websocket-key")
            with client.beta.responses.connect(extra_headers={"X-Test-Case": "sdk-responses"}) as conn:
                conn.send({"type": "response.create", "model": "sequential", "tools": TOOLS})
                sdk_events = []
                for event in conn:
                    sdk_events.append(event)
                    if event.type in ("response.completed", "error"):
                        break
            seen["sdk-responses"] = {"events": sdk_events}
            seen["sdk-lanes"] = sdk_lanes(client)
            with client.realtime.connect(
                model="interleaved", extra_headers={"X-Test-Case": "sdk-realtime"}
            ) as rt:
                rt.session.update(session={"type": "realtime", "tools": TOOLS})
                rt.response.create()
                rt_events = []
                for event in rt:
                    rt_events.append(event)
                    if event.type == "response.done":
                        break
            seen["sdk-realtime"] = {"events": rt_events}
            # A client that drops mid-connection: its flow is still annotated.
            # 50 ms between its messages, so the drop comes well before the response would have ended.
            with connect(
                f"ws://127.0.0.1:{port}/v1/responses",
                additional_headers={"X-Test-Case": "client-drop", "X-Fake-Delay": "0.05"},
            ) as ws:
                ws.send(json.dumps({"type": "response.create", "model": "interleaved"}))
                ws.recv(timeout=20)
                ws.socket.close()  # no close frame: the TCP connection just ends
            # Its end is analysed before the proxy stops (in the worker, its result comes a moment later).
            # How far the response got by then depends on timing: the proxy may have relayed it all.
            proxy.wait_for(r"WebSocket .* response 1: openai-responses interleaved: .*truncated-stream")
        finally:
            proxy.stop()
    finally:
        provider.stop()
    with open(dump, "rb") as f:
        flows = {
            flow.request.headers.get("X-Test-Case"): flow
            for flow in mio.FlowReader(f).stream()
            if getattr(flow, "websocket", None) is not None
        }
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    return {"seen": seen, "flows": flows, "records": records}


def stored(session, case):
    return session["flows"][case].metadata["toolcall_lens"]


def calls(result):
    return [(c["id"], c["name"], c["arguments"]) for ch in result["choices"] for c in ch["tool_calls"]]


def sdk_lanes(client) -> dict:
    """The SDK's own multiplexing (openai.lib.responses_websocket): two lanes of one connection, each a
    response with two calls, their events interleaved on the socket; every event fed to the SDK's own
    accumulator, one per lane, and each lane's final response."""
    from openai.lib.responses_websocket import (
        ResponsesWebSocketAccumulator,
        ResponsesWebSocketLimits,
        ResponsesWebSocketSession,
    )

    out = {}
    limits = ResponsesWebSocketLimits(
        max_lanes=4, max_events_per_lane=512, max_events=1024, max_bytes_per_lane=1 << 22, max_bytes=1 << 23
    )
    connection = client.responses.connect(extra_headers={"X-Test-Case": "sdk-lanes"}).enter()
    with ResponsesWebSocketSession(connection, limits=limits) as session:  # closes the connection
        lanes = {name: session.lane(name) for name in ("first", "second")}
        for name, scenario in (("first", "interleaved"), ("second", "sequential")):
            lanes[name].send({"type": "response.create", "model": scenario, "tools": TOOLS})
        for name, lane in lanes.items():
            accumulator = ResponsesWebSocketAccumulator()
            while True:
                event = lane.recv(timeout=30)
                accumulator.add_event(event)
                if event.type in ("response.completed", "response.failed", "error"):
                    break
            out[name] = {"snapshot": accumulator.snapshot(), "final": accumulator.get_final_response()}
    return out


def by_lane(messages) -> dict:
    """Messages grouped by their lane, each lane's in order (how two lanes interleave depends on timing)."""
    lanes: dict = {}
    for message in messages:
        try:
            lane = json.loads(message).get("stream_id")
        except ValueError:
            lane = "not JSON"
        lanes.setdefault(lane, []).append(message)
    return lanes


@pytest.mark.parametrize(
    "case", ["responses", "responses-fragmented", "lanes", "live", "garbage", "realtime-cancel"]
)
def test_every_message_reaches_the_client_as_the_provider_sent_it(session, case):
    seen = session["seen"][case]
    assert seen["proxied"]
    if case in ("lanes", "garbage"):
        assert by_lane(seen["proxied"]) == by_lane(seen["direct"])
    else:
        assert seen["proxied"] == seen["direct"]


def test_responses_over_a_websocket_one_result_per_turn(session):
    record = stored(session, "responses")
    assert record["transport"] == "websocket" and record["connection"]["format"] == "openai-responses"
    prewarm, calls_turn, answer_turn = record["responses"]
    assert prewarm["websocket"]["prewarm"] and not calls(prewarm)
    expected = [
        (c["id"], c["name"], c["arguments"]) for c in fp.ws_expected("openai-responses", "interleaved", 2)
    ]
    assert calls(calls_turn) == expected
    assert "recency-misroute" in [w["code"] for w in calls_turn["warnings"]]
    # The third turn answered only the first call: the second is a dropped call, flagged on its response.
    flagged = [w for w in calls_turn["warnings"] if w["code"] == "unanswered-call"]
    assert [w["id"] for w in flagged] == [expected[1][0]]
    assert answer_turn["complete"] and answer_turn["choices"][0]["text"]
    assert session["flows"]["responses"].marked  # a warning of severity "warning": the flow is marked


def test_fragmented_and_compressed_messages_are_read_as_mitmproxy_hands_them(session):
    whole, cut = stored(session, "responses"), stored(session, "responses-fragmented")
    assert [calls(r) for r in cut["responses"]] == [calls(r) for r in whole["responses"]]


def test_lanes_are_routed_by_stream_id(session):
    record = stored(session, "lanes")
    by_lane = {r["websocket"]["lane"]: r for r in record["responses"]}
    assert calls(by_lane["a"]) == [
        (c["id"], c["name"], c["arguments"]) for c in fp.ws_expected("openai-responses", "interleaved")
    ]
    assert calls(by_lane["b"]) == [
        (c["id"], c["name"], c["arguments"]) for c in fp.ws_expected("openai-responses", "sequential", 2)
    ]


def test_gemini_live_binary_frames_a_batch_and_a_cancelled_call_answered(session):
    record = stored(session, "live")
    assert record["connection"]["format"] == "gemini-live"
    first = record["responses"][0]
    expected = fp.ws_expected("gemini-live", "live-cancel")
    assert [
        (c["id"], c["name"], json.loads(c["arguments"])) for ch in first["choices"] for c in ch["tool_calls"]
    ] == [(c["id"], c["name"], c["args"]) for c in expected]
    assert [w["code"] for w in first["warnings"]] == ["cancelled-call-answered"]
    assert first["websocket"]["evidence"]["cancelled"]


def realtime_sent(messages) -> list[tuple]:
    """The calls as the client saw them stream: (call_id, name, arguments so far), by item."""
    found: dict = {}
    for message in messages:
        event = json.loads(message)
        if event["type"] == "response.output_item.added" and event["item"]["type"] == "function_call":
            found[event["item"]["id"]] = [event["item"]["call_id"], event["item"]["name"], ""]
        elif event["type"] == "response.function_call_arguments.delta":
            found[event["item_id"]][2] += event["delta"]
    return [tuple(call) for call in found.values()]


@pytest.mark.parametrize("case", ["realtime-cancel", "realtime-client-cancel"])
def test_a_cancelled_realtime_response_is_not_complete_and_keeps_the_calls_as_far_as_they_got(session, case):
    record = stored(session, case)
    assert record["connection"]["format"] == "openai-realtime"
    (result,) = record["responses"]
    done = json.loads(session["seen"][case]["proxied"][-1])
    assert done["type"] == "response.done" and done["response"]["status"] == "cancelled"
    assert not result["complete"] and result["websocket"]["status"] == "cancelled"
    (note,) = [w for w in result["warnings"] if w["code"] == "response-incomplete"]
    assert note["status"] == "cancelled" and note["severity"] == "info"  # a cancel is asked for
    assert calls(result) == realtime_sent(session["seen"][case]["proxied"]) and calls(result)


def test_garbage_messages_are_warnings_and_pass_unchanged(session):
    record = stored(session, "garbage")
    found = {w["code"] for r in record["responses"] for w in r["warnings"]}
    found |= {w["code"] for w in record["connection"]["warnings"]}
    assert {"malformed-event", "invalid-utf8"} <= found


def test_the_sdks_get_their_calls_and_the_addon_rebuilds_the_same(session):
    events = session["seen"]["sdk-responses"]["events"]
    sdk_calls = [
        (e.item.call_id, e.item.name, e.item.arguments)
        for e in events
        if e.type == "response.output_item.done" and e.item.type == "function_call"
    ]
    (result,) = stored(session, "sdk-responses")["responses"]
    assert calls(result) == sdk_calls and len(sdk_calls) == 2 and result["complete"]
    rt_done = session["seen"]["sdk-realtime"]["events"][-1]
    rt_calls = [
        (i.call_id, i.name, i.arguments) for i in rt_done.response.output if i.type == "function_call"
    ]
    record = stored(session, "sdk-realtime")
    assert record["connection"]["format"] == "openai-realtime"
    (realtime,) = record["responses"]
    assert calls(realtime) == rt_calls and len(rt_calls) == 2
    assert "recency-misroute" in [w["code"] for w in realtime["warnings"]]


def test_the_sdks_own_lanes_are_rebuilt_each_as_the_sdk_rebuilt_it(session):
    # Two responses multiplexed on one connection by the SDK's session (stream_id lanes), their events
    # interleaved: the addon puts each event in its lane's response, and each equals what the SDK's own
    # accumulator and final response hold.
    results = {r["websocket"]["lane"]: r for r in stored(session, "sdk-lanes")["responses"]}
    assert set(results) == {"first", "second"}
    for lane, got in session["seen"]["sdk-lanes"].items():
        snapshot = [
            (o.call_id, o.name, o.arguments) for o in got["snapshot"].output if o.type == "function_call"
        ]
        final = [(i.call_id, i.name, i.arguments) for i in got["final"].output if i.type == "function_call"]
        assert calls(results[lane]) == snapshot == final and len(final) == 2, lane
        assert results[lane]["complete"]
    assert "recency-misroute" in [w["code"] for w in results["first"]["warnings"]]  # the interleaved one


def test_the_handshakes_keys_are_redacted(session):
    for case in ("sdk-responses", "sdk-lanes", "sdk-realtime"):
        headers = session["flows"][case].request.headers
        assert "sk-test-websocket-key" not in headers.get("authorization", "")
        assert headers.get("authorization", "").endswith("[redacted]")


def test_a_client_that_drops_mid_connection_leaves_an_annotated_flow(session):
    (result,) = stored(session, "client-drop")["responses"]
    assert not result["complete"] and "truncated-stream" in [w["code"] for w in result["warnings"]]


def test_one_jsonl_record_per_response(session):
    for flow in session["flows"].values():
        positions = [
            r["result"]["websocket"]["position"] for r in session["records"] if r["flow_id"] == flow.id
        ]
        stored_positions = [r["websocket"]["position"] for r in flow.metadata["toolcall_lens"]["responses"]]
        assert sorted(positions) == stored_positions and positions


def test_the_cli_on_the_dump_gives_the_same_responses_as_the_addon(session, tmp_path):
    """The two front doors agree on every WebSocket response (timing aside: the addon's clock is when each
    message passed, the CLI's the stored messages' timestamps)."""
    dump = tmp_path / "ws.mitm"
    with open(dump, "wb") as f:
        writer = mio.FlowWriter(f)
        for flow in session["flows"].values():
            writer.add(flow)
    done = subprocess.run(
        [str(BIN / "toolcall-lens"), "--json", str(dump)], capture_output=True, timeout=120, check=False
    )
    assert done.returncode in (0, 1), done.stderr.decode()
    from_dump = {
        (r["source"]["flow_id"], r["websocket"]["position"]): r for r in json.loads(done.stdout)["results"]
    }
    live = {
        (flow.id, r["websocket"]["position"]): r
        for flow in session["flows"].values()
        for r in flow.metadata["toolcall_lens"]["responses"]
    }
    assert set(from_dump) == set(live) and len(live) >= 15

    def comparable(result):
        out = without_timing(result)
        out.pop("source", None)
        out["warnings"] = [w for w in out["warnings"] if w["code"] != "stalled"]
        return out

    differ = [key for key in live if comparable(live[key]) != comparable(from_dump[key])]
    assert differ == [], [(comparable(live[k]), comparable(from_dump[k])) for k in differ[:1]]
