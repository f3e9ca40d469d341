"""The test bench over WebSockets, end to end: a real mitmdump with `toolcall_lens_inject=interleave` (and
one with `toolcall_lens_repair=serialize`) in front of the fake provider's Responses WebSocket mode and
Realtime, a `websockets` client. The client must get the hostile (or the repaired) shape, with the same
calls; the record must say what the client got, what was done, and what the upstream sent."""

from __future__ import annotations

import itertools
import json

import pytest
from lab import start_fake_provider, start_mitmdump
from mitmproxy import io as mio
from websockets.sync.client import connect


def deltas_order(messages) -> list[int]:
    """The output_index of each argument delta, in the order the client got them."""
    out = []
    for message in messages:
        obj = json.loads(message)
        if obj.get("type") == "response.function_call_arguments.delta":
            out.append(obj["output_index"])
    return out


def per_turn(messages) -> list[list[int]]:
    """``deltas_order`` of each response, cut at its end event."""
    turns, current = [], []
    for message in messages:
        kind = json.loads(message).get("type")
        current.append(message)
        if kind in ("response.completed", "response.done", "error"):
            turns.append(deltas_order(current))
            current = []
    return turns


def serial(order: list[int]) -> bool:
    """Each call's fragments together: the order never returns to a call it left."""
    left = set()
    for previous, index in itertools.pairwise(order):
        if index != previous:
            left.add(previous)
            if index in left:
                return False
    return True


def calls_from(messages) -> list[tuple]:
    """The calls a client that routes by output_index builds from the messages it got (per response)."""
    calls: dict = {}
    names: dict = {}
    for message in messages:
        obj = json.loads(message)
        kind = obj.get("type")
        response = obj.get("response_id") or "r"
        if kind == "response.output_item.added" and obj["item"]["type"] == "function_call":
            names[(response, obj["output_index"])] = (obj["item"]["call_id"], obj["item"]["name"])
            calls[(response, obj["output_index"])] = ""
        elif kind == "response.function_call_arguments.delta":
            calls[(response, obj["output_index"])] += obj["delta"]
    return [(*names[key], arguments) for key, arguments in calls.items()]


def responses_turns(port, scenario, turns=2, case="responses"):
    """``turns`` responses on one socket, one after the other; every message the client got."""
    got = []
    with connect(f"ws://127.0.0.1:{port}/v1/responses", additional_headers={"X-Test-Case": case}) as ws:
        for _ in range(turns):
            ws.send(json.dumps({"type": "response.create", "model": scenario}))
            while True:
                message = ws.recv(timeout=20)
                got.append(message)
                if json.loads(message).get("type") in ("response.completed", "error"):
                    break
    return got


def realtime_turn(port, scenario, case="realtime"):
    got = []
    url = f"ws://127.0.0.1:{port}/v1/realtime?model={scenario}"
    with connect(url, additional_headers={"X-Test-Case": case}) as ws:
        got.append(ws.recv(timeout=20))  # session.created
        ws.send(json.dumps({"type": "response.create"}))
        while True:
            message = ws.recv(timeout=20)
            got.append(message)
            if json.loads(message).get("type") == "response.done":
                break
    return got


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    folder = tmp_path_factory.mktemp("e2e-websocket-rewrite")
    provider, provider_port = start_fake_provider(delay=0.001)
    seen: dict = {}
    try:
        seen["direct/sequential"] = responses_turns(provider_port, "sequential")
        seen["direct/interleaved"] = responses_turns(provider_port, "interleaved")
        seen["direct/realtime"] = realtime_turn(provider_port, "sequential")
        for name, option in (
            ("inject", "toolcall_lens_inject=interleave"),
            ("repair", "toolcall_lens_repair=serialize"),
        ):
            dump = folder / f"{name}.mitm"
            proxy, port = start_mitmdump(provider_port, dump, option)
            try:
                scenario = "sequential" if name == "inject" else "interleaved"
                seen[f"{name}/responses"] = responses_turns(port, scenario)
                seen[f"{name}/realtime"] = realtime_turn(port, scenario)
            finally:
                proxy.stop()
            with open(dump, "rb") as f:
                for flow in mio.FlowReader(f).stream():
                    if getattr(flow, "websocket", None) is not None:
                        seen[f"{name}/{flow.request.headers['X-Test-Case']}/record"] = flow.metadata[
                            "toolcall_lens"
                        ]
    finally:
        provider.stop()
    return seen


def test_interleave_sends_the_client_interleaved_fragments_of_the_same_calls(bench):
    direct, got = bench["direct/sequential"], bench["inject/responses"]
    assert all(serial(turn) for turn in per_turn(direct))  # the provider sends one call after the other
    assert len(per_turn(got)) == 2 and not any(serial(turn) for turn in per_turn(got))
    assert [sorted(turn) for turn in per_turn(got)] == [sorted(turn) for turn in per_turn(direct)]
    assert calls_from(got) == calls_from(direct)


def test_the_record_says_what_the_client_got_and_what_the_upstream_sent(bench):
    record = bench["inject/responses/record"]
    assert record["rewrite"]["inject"] == ["interleave"] and record["rewrite"]["responses"] == 2
    for result in record["responses"]:
        assert "recency-misroute" in [w["code"] for w in result["warnings"]]  # what the client got
    upstream = record["rewrite"]["upstream"]
    assert [u["position"] for u in upstream] == [1, 2]
    assert all(u["calls_same"] and u["compatibility"]["recency"] == "ok" for u in upstream)


def test_realtime_messages_are_rewritten_the_same_way(bench):
    got, direct = bench["inject/realtime"], bench["direct/realtime"]
    assert serial(deltas_order(direct)) and not serial(deltas_order(got))
    assert calls_from(got) == calls_from(direct)
    record = bench["inject/realtime/record"]
    assert record["rewrite"]["inject"] == ["interleave"]
    assert "recency-misroute" in [w["code"] for w in record["responses"][0]["warnings"]]


def test_serialize_repairs_interleaved_fragments_for_the_client(bench):
    direct, got = bench["direct/interleaved"], bench["repair/responses"]
    assert not any(serial(turn) for turn in per_turn(direct))
    assert len(per_turn(got)) == 2 and all(serial(turn) for turn in per_turn(got))
    assert calls_from(got) == calls_from(direct)
    record = bench["repair/responses/record"]
    assert not any(w["code"] == "recency-misroute" for r in record["responses"] for w in r["warnings"])
    assert all("recency-misroute" in u["warnings"] for u in record["rewrite"]["upstream"])


def test_what_cannot_apply_to_a_websocket_message_says_why(tmp_path):
    provider, provider_port = start_fake_provider(delay=0.001)
    try:
        dump = tmp_path / "flows.mitm"
        proxy, port = start_mitmdump(
            provider_port, dump, "toolcall_lens_inject=rechunk", "toolcall_lens_inject=split-names"
        )
        try:
            got = responses_turns(port, "sequential", turns=1)
        finally:
            proxy.stop()
        direct = responses_turns(provider_port, "sequential", turns=1)
    finally:
        provider.stop()
    assert got == direct  # nothing applied: every message as the provider sent it
    with open(dump, "rb") as f:
        (flow,) = [flow for flow in mio.FlowReader(f).stream() if getattr(flow, "websocket", None)]
    skipped = {s["name"]: s["reason"] for s in flow.metadata["toolcall_lens"]["rewrite"]["skipped"]}
    assert set(skipped) == {"rechunk", "split-names"} and "whole" in skipped["rechunk"]
