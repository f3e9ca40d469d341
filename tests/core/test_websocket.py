"""One WebSocket connection, message by message (accumulator.websocket): Responses WebSocket mode, OpenAI
Realtime and Gemini Live; one result per response, the client's evidence, bad input."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from schemas import check_connection, check_result

from accumulator import Connection, connection_result, websocket_format
from accumulator.formats import WEBSOCKET_FORMATS, sniff_websocket

GEMINI_LIVE_PATH = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"


class Wire:
    """A connection fed JSON messages; every settled result collected and checked against the schema."""

    def __init__(self, format=None, path=""):
        self.connection = Connection(format if format else websocket_format(path), path=path)
        self.settled: list[dict] = []

    def client(self, obj, **kw):
        return self.send(True, obj, **kw)

    def server(self, obj, **kw):
        return self.send(False, obj, **kw)

    def send(self, from_client, obj, binary=False, raw: bytes | None = None):
        content = raw if raw is not None else json.dumps(obj).encode()
        out = self.connection.message(from_client, content, not binary)
        self.settled += out
        return out

    def finish(self):
        self.settled += self.connection.finish()
        record = connection_result(self.connection)
        check_connection(record)
        for result in self.settled:
            check_result(result)
        return self.settled


def calls(result):
    return [(c["id"], c["name"], c["arguments"]) for ch in result["choices"] for c in ch["tool_calls"]]


def codes(result):
    return [w["code"] for w in result["warnings"]]


# -- Responses WebSocket mode ----------------------------------------------------------------------------


def responses_turn(wire, rid, calls_, *, lane=None, interleave=True):
    """The server's events of one response with these calls ((call_id, name, [fragments]))."""
    extra = {"stream_id": lane} if lane else {}
    wire.server({"type": "response.created", "response": {"id": rid, "model": "gpt-ws"}, **extra})
    for i, (call_id, name, _) in enumerate(calls_):
        item = {
            "type": "function_call",
            "id": f"fc_{call_id}",
            "call_id": call_id,
            "name": name,
            "arguments": "",
        }
        wire.server({"type": "response.output_item.added", "output_index": i, "item": item, **extra})
    pieces = [(i, f) for i, (_, _, frags) in enumerate(calls_) for f in frags]
    if interleave:  # fragment 1 of each call, then fragment 2 of each...
        pieces.sort(
            key=lambda p: [f for i, (_, _, frags) in enumerate(calls_) if i == p[0] for f in frags].index(
                p[1]
            )
        )
    for i, fragment in pieces:
        wire.server(
            {
                "type": "response.function_call_arguments.delta",
                "output_index": i,
                "item_id": f"fc_{calls_[i][0]}",
                "delta": fragment,
                **extra,
            }
        )
    wire.server({"type": "response.completed", "response": {"id": rid, "status": "completed"}, **extra})


TWO = [("c1", "search_documents", ['{"q": ', '"rbi"}']), ("c2", "get_user", ['{"id": ', "7}"])]


def test_each_response_create_starts_a_response_and_each_gets_its_result_in_order():
    wire = Wire(path="/v1/responses")
    wire.client({"type": "response.create", "model": "gpt-ws", "generate": False})
    wire.server({"type": "response.created", "response": {"id": "r0"}})
    wire.server({"type": "response.completed", "response": {"id": "r0", "status": "completed"}})
    wire.client({"type": "response.create", "model": "gpt-ws", "previous_response_id": "r0", "input": []})
    responses_turn(wire, "r1", TWO)
    wire.client(
        {
            "type": "response.create",
            "previous_response_id": "r1",
            "input": [{"type": "function_call_output", "call_id": c, "output": "ok"} for c in ("c1", "c2")],
        }
    )
    wire.server({"type": "response.created", "response": {"id": "r2"}})
    wire.server({"type": "response.output_text.delta", "delta": "done"})
    wire.server({"type": "response.completed", "response": {"id": "r2", "status": "completed"}})
    results = wire.finish()
    assert [r["websocket"]["position"] for r in results] == [1, 2, 3]
    assert [r["websocket"]["prewarm"] for r in results] == [True, False, False]
    assert [r["response_id"] for r in results] == ["r0", "r1", "r2"]
    assert calls(results[1]) == [("c1", "search_documents", '{"q": "rbi"}'), ("c2", "get_user", '{"id": 7}')]
    # Interleaved fragments: rebuilt by identity, and the recency hazard named, as over HTTP.
    assert "recency-misroute" in codes(results[1])
    assert results[1]["websocket"]["evidence"] == {
        "answered": ["c1", "c2"],
        "unanswered": [],
        "cancelled": [],
    }
    assert "unanswered-call" not in codes(results[1])
    assert results[2]["choices"][0]["text"] == "done" and all(r["complete"] for r in results)


def test_lanes_interleave_and_each_event_goes_to_its_lanes_response():
    wire = Wire(path="/backend-api/codex/responses")
    wire.client({"type": "response.create", "model": "m", "stream_id": "a"})
    wire.client({"type": "response.create", "model": "m", "stream_id": "b"})
    a, b = [], []
    for rid, lane, call_id, name, log in (("ra", "a", "ca", "alpha", a), ("rb", "b", "cb", "beta", b)):
        log.append({"type": "response.created", "response": {"id": rid}, "stream_id": lane})
        item = {"type": "function_call", "id": f"fc_{call_id}", "call_id": call_id, "name": name}
        log.append({"type": "response.output_item.added", "output_index": 0, "item": item, "stream_id": lane})
        for fragment in ('{"x": ', f'"{name}"}}'):
            log.append(
                {
                    "type": "response.function_call_arguments.delta",
                    "output_index": 0,
                    "delta": fragment,
                    "stream_id": lane,
                }
            )
        log.append(
            {"type": "response.completed", "response": {"id": rid, "status": "completed"}, "stream_id": lane}
        )
    for x, y in zip(a, b, strict=True):  # the two lanes' events alternate on the wire
        wire.server(x)
        wire.server(y)
    results = wire.finish()
    assert [(r["websocket"]["lane"], calls(r)) for r in results] == [
        ("a", [("ca", "alpha", '{"x": "alpha"}')]),
        ("b", [("cb", "beta", '{"x": "beta"}')]),
    ]
    assert not any(r["warnings"] for r in results)


def test_without_lanes_a_second_create_waits_for_the_first_response():
    wire = Wire(path="/v1/responses")
    wire.client({"type": "response.create", "model": "m"})
    wire.client({"type": "response.create", "model": "m"})  # queued: answered after the first
    responses_turn(wire, "r1", [("c1", "one", ["{}"])])
    responses_turn(wire, "r2", [("c2", "two", ["{}"])])
    results = wire.finish()
    assert [(r["response_id"], calls(r)) for r in results] == [
        ("r1", [("c1", "one", "{}")]),
        ("r2", [("c2", "two", "{}")]),
    ]


def test_a_call_the_client_never_answered_while_it_answered_its_sibling_is_flagged():
    wire = Wire(path="/v1/responses")
    wire.client({"type": "response.create", "model": "m"})
    responses_turn(wire, "r1", TWO)
    settled = wire.client(
        {
            "type": "response.create",
            "previous_response_id": "r1",
            "input": [{"type": "function_call_output", "call_id": "c1", "output": "ok"}],
        }
    )
    assert [r["response_id"] for r in settled] == ["r1"]  # its evidence is in: settled at once
    flagged = [w for w in settled[0]["warnings"] if w["code"] == "unanswered-call"]
    assert [(w["id"], w["name"], w["severity"]) for w in flagged] == [("c2", "get_user", "warning")]
    assert settled[0]["websocket"]["evidence"]["unanswered"] == ["c2"]


def test_a_result_for_a_call_id_no_response_carried_is_flagged_on_the_response_it_follows():
    wire = Wire(path="/v1/responses")
    wire.client({"type": "response.create", "model": "m"})
    responses_turn(wire, "r1", TWO)
    outputs = [{"type": "function_call_output", "call_id": c, "output": "ok"} for c in ("c1", "c2", "c1c2")]
    settled = wire.client({"type": "response.create", "previous_response_id": "r1", "input": outputs})
    unknown = [w for w in settled[0]["warnings"] if w["code"] == "unknown-tool-call-id"]
    assert [w["id"] for w in unknown] == ["c1c2"]


def test_results_for_calls_of_a_conversation_begun_elsewhere_say_nothing():
    # A connection that continues a conversation from before it (an earlier socket, HTTP): no calls seen.
    wire = Wire(path="/v1/responses")
    wire.client(
        {
            "type": "response.create",
            "input": [{"type": "function_call_output", "call_id": "old", "output": "x"}],
        }
    )
    responses_turn(wire, "r1", [])
    results = wire.finish()
    assert codes(results[0]) == [] and results[0]["websocket"]["evidence"] is None


def test_a_connection_closed_mid_call_leaves_a_truncated_response():
    wire = Wire(path="/v1/responses")
    wire.client({"type": "response.create", "model": "m"})
    wire.server({"type": "response.created", "response": {"id": "r1"}})
    item = {"type": "function_call", "id": "fc1", "call_id": "c1", "name": "write_file"}
    wire.server({"type": "response.output_item.added", "output_index": 0, "item": item})
    wire.server(
        {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": '{"path": "/tm'}
    )
    (result,) = wire.finish()
    assert not result["complete"] and "truncated-stream" in codes(result)
    assert calls(result) == [("c1", "write_file", '{"path": "/tm')]


def test_an_error_event_ends_its_response_with_the_providers_error():
    wire = Wire(path="/v1/responses")
    wire.client({"type": "response.create", "model": "m", "previous_response_id": "gone"})
    wire.server({"type": "error", "error": {"code": "previous_response_not_found", "message": "no such"}})
    (result,) = wire.finish()
    assert not result["complete"] and result["error"]["code"] == "previous_response_not_found"
    assert "provider-error" in codes(result)


# -- OpenAI Realtime ---------------------------------------------------------------------------------------


def rt(kind, **fields):
    return {"type": kind, "event_id": f"ev_{kind}", **fields}


def realtime_call_added(rid, index, call_id, name):
    item = {
        "id": f"item_{call_id}",
        "type": "function_call",
        "call_id": call_id,
        "name": name,
        "arguments": "",
    }
    return rt("response.output_item.added", response_id=rid, output_index=index, item=item)


def realtime_delta(rid, index, call_id, delta):
    return rt(
        "response.function_call_arguments.delta",
        response_id=rid, item_id=f"item_{call_id}", output_index=index, call_id=call_id, delta=delta,
    )  # fmt: skip


def test_realtime_routes_by_response_id_across_two_responses_at_once():
    wire = Wire(path="/v1/realtime?model=gpt-realtime")
    wire.server(rt("session.created", session={"model": "gpt-realtime"}))
    wire.client(
        {
            "type": "session.update",
            "session": {"tools": [{"type": "function", "name": "a"}, {"type": "function", "name": "b"}]},
        }
    )
    wire.server(rt("response.created", response={"id": "R1", "status": "in_progress"}))
    wire.server(
        rt("response.created", response={"id": "R2", "status": "in_progress", "conversation_id": None})
    )
    wire.server(realtime_call_added("R1", 0, "k1", "a"))
    wire.server(realtime_call_added("R2", 0, "k2", "b"))
    wire.server(realtime_delta("R1", 0, "k1", '{"n": '))
    wire.server(realtime_delta("R2", 0, "k2", '{"m": '))
    wire.server(realtime_delta("R1", 0, "k1", "1}"))
    wire.server(realtime_delta("R2", 0, "k2", "2}"))
    wire.server(rt("response.output_audio_transcript.delta", response_id="R1", delta="Looking "))
    wire.server(rt("response.audio_transcript.delta", response_id="R1", delta="it up"))  # the beta name
    wire.server(
        rt("response.output_audio.delta", response_id="R1", delta="AAAAAAAA")
    )  # 8 base64 chars: 6 bytes
    wire.server(rt("response.audio.delta", response_id="R1", delta="AAAA"))  # the beta name: 3 bytes more
    for rid in ("R2", "R1"):
        wire.server(rt("response.done", response={"id": rid, "status": "completed", "output": []}))
    results = wire.finish()
    assert [(r["response_id"], calls(r)) for r in results] == [
        ("R1", [("k1", "a", '{"n": 1}')]),
        ("R2", [("k2", "b", '{"m": 2}')]),
    ]
    assert results[0]["model"] == "gpt-realtime"
    assert results[0]["choices"][0]["text"] == "Looking it up"
    assert results[0]["websocket"]["audio_bytes"] == 9
    assert all(r["complete"] and not codes(r) for r in results)


def test_a_realtime_response_done_as_cancelled_is_not_complete():
    wire = Wire(path="/v1/realtime?model=m")
    wire.server(rt("response.created", response={"id": "R1"}))
    wire.server(realtime_call_added("R1", 0, "k1", "a"))
    wire.server(realtime_delta("R1", 0, "k1", '{"par'))
    # .done restates the arguments however the response ended: it is not proof of a complete call
    wire.server(
        rt(
            "response.function_call_arguments.done",
            response_id="R1",
            item_id="item_k1",
            output_index=0,
            call_id="k1",
            arguments='{"par',
        )
    )
    done = {
        "id": "R1",
        "status": "cancelled",
        "status_details": {"type": "cancelled", "reason": "client_cancelled"},
    }
    wire.server(rt("response.done", response=done))
    (result,) = wire.finish()
    assert not result["complete"] and result["websocket"]["status"] == "cancelled"
    (note,) = [w for w in result["warnings"] if w["code"] == "response-incomplete"]
    assert (note["status"], note["reason"]) == ("cancelled", "client_cancelled")


def test_a_realtime_response_done_gives_the_id_usage_and_a_failure_with_its_error():
    wire = Wire(path="/v1/realtime?model=m")
    wire.server(rt("response.created", response={"id": "R1"}))
    wire.server(realtime_call_added("R1", 0, "k1", "a"))
    wire.server(realtime_delta("R1", 0, "k1", "{}"))
    usage = {"total_tokens": 12, "input_tokens": 10, "output_tokens": 2}
    wire.server(rt("response.done", response={"id": "R1", "status": "completed", "usage": usage}))
    wire.server(rt("response.created", response={"id": "R2"}))
    error = {"type": "server_error", "code": "overloaded", "message": "try later"}
    failed = {"id": "R2", "status": "failed", "status_details": {"type": "failed", "error": error}}
    wire.server(rt("response.done", response=failed))
    wire.server(rt("response.created", response={"id": "R3"}))
    wire.server(rt("response.done", response={"id": "R3", "status": "failed"}))
    by_id = {r["response_id"]: r for r in wire.finish()}  # settled in their own order: R1 awaited evidence
    first, second, third = by_id["R1"], by_id["R2"], by_id["R3"]
    assert first["usage"]["provider"] == usage and first["complete"]
    assert first["choices"][0]["finish_reason"] == "completed"
    (problem,) = [w for w in second["warnings"] if w["code"] == "provider-error"]
    assert problem["error"] == error and "try later" in problem["message"]
    assert second["choices"][0]["finish_reason"] == "failed" and not second["complete"]
    assert second["websocket"]["status"] == "failed"
    (bare,) = [w for w in third["warnings"] if w["code"] == "provider-error"]
    assert bare["error"] == {"status": "failed"}
    # Joined mid-response (no response.created seen): the end names the response.
    late = Wire(path="/v1/realtime?model=m")
    late.server(rt("response.output_text.delta", response_id="R7", item_id="i", output_index=0, delta="hi"))
    late.server(rt("response.done", response={"id": "R7", "status": "completed"}))
    (joined,) = late.finish()
    assert joined["response_id"] == "R7" and joined["choices"][0]["text"] == "hi"


def test_realtime_checks_calls_against_the_session_tools_and_reads_errors_ends_and_audio_exactly():
    wire = Wire(path="/v1/realtime?model=m")
    tools = [{"type": "function", "name": "a", "parameters": {"type": "object"}}]
    wire.client({"type": "session.update", "session": {"tools": tools}})
    wire.client({"type": "session.update", "session": {"instructions": "brief"}})  # merged, tools kept
    wire.server(rt("response.created", response={"id": "R1"}))
    wire.server(realtime_call_added("R1", 0, "k1", "a"))
    wire.server(realtime_call_added("R1", 1, "k2", "b"))
    wire.server(realtime_delta("R1", 0, "k1", "{}"))
    wire.server(realtime_delta("R1", 1, "k2", "{}"))
    wire.server(
        rt("response.output_audio.delta", response_id="R1", item_id="au", delta="AAAAAA")
    )  # 4.5 bytes
    # Events naming no response go to the latest one; a text delta that is no string adds nothing.
    wire.server(rt("response.output_text.delta", item_id="t", output_index=2, delta="ok"))
    wire.server(rt("response.output_text.delta", response_id="R1", item_id="t", output_index=2, delta=7))
    wire.server(rt("error", error={"type": "invalid_request_error", "message": "bad"}))
    wire.server(rt("response.done", response={"id": "R1", "status": "completed"}))
    wire.server(rt("response.done", response={"id": "R1", "status": "completed"}))  # said twice: one end
    wire.client(
        {"type": "conversation.item.create", "item": {"type": "function_call_output", "call_id": "k1"}}
    )
    wire.client(
        {"type": "conversation.item.create", "item": {"type": "function_call_output", "call_id": "k2"}}
    )
    wire.client({"type": "response.create"})
    results = wire.finish()
    assert [r["response_id"] for r in results] == ["R1"]
    [result] = results
    assert [w["name"] for w in result["warnings"] if w["code"] == "undeclared-tool"] == ["b"]
    (error,) = [w for w in result["warnings"] if w["code"] == "provider-error"]
    assert error["error"] == {"type": "invalid_request_error", "message": "bad"} and error["ws_message"] == 11
    assert result["choices"][0]["text"] == "ok"
    assert result["websocket"]["audio_bytes"] == 4 and type(result["websocket"]["audio_bytes"]) is int
    # A failed end without a reason gives its type as the reason.
    failed = Wire(path="/v1/realtime?model=m")
    failed.server(rt("response.created", response={"id": "R2"}))
    failed.server(
        rt(
            "response.done",
            response={"id": "R2", "status": "incomplete", "status_details": {"type": "max_output_tokens"}},
        )
    )
    (cut,) = failed.finish()
    (note,) = [w for w in cut["warnings"] if w["code"] == "response-incomplete"]
    assert (note["status"], note["reason"]) == ("incomplete", "max_output_tokens")


def test_realtime_function_call_outputs_are_the_clients_evidence():
    wire = Wire(path="/v1/realtime?model=m")
    wire.server(rt("response.created", response={"id": "R1"}))
    wire.server(realtime_call_added("R1", 0, "k1", "a"))
    wire.server(realtime_call_added("R1", 1, "k2", "b"))
    wire.server(realtime_delta("R1", 0, "k1", "{}"))
    wire.server(realtime_delta("R1", 1, "k2", "{}"))
    wire.server(rt("response.done", response={"id": "R1", "status": "completed"}))
    wire.client(
        {
            "type": "conversation.item.create",
            "item": {"type": "function_call_output", "call_id": "k2", "output": "x"},
        }
    )
    wire.client(
        {
            "type": "conversation.item.create",
            "item": {"type": "function_call_output", "call_id": "zz", "output": "x"},
        }
    )
    settled = wire.client({"type": "response.create"})
    assert [r["response_id"] for r in settled] == ["R1"]
    assert [(w["code"], w["id"]) for w in settled[0]["warnings"] if w["code"] != "recency-misroute"] == [
        ("unknown-tool-call-id", "zz"),
        ("unanswered-call", "k1"),
    ]


# -- Gemini Live -------------------------------------------------------------------------------------------


def test_gemini_live_reads_binary_frames_a_batch_of_calls_and_a_cancellation():
    wire = Wire(path=GEMINI_LIVE_PATH)
    tools = [{"functionDeclarations": [{"name": "lights"}, {"name": "music"}]}]
    wire.client({"setup": {"model": "models/gemini-live-x", "tools": tools}})
    wire.server({"setupComplete": {}}, binary=True)
    wire.client(
        {"clientContent": {"turns": [{"role": "user", "parts": [{"text": "go"}]}], "turnComplete": True}}
    )
    batch = [{"id": "f1", "name": "lights", "args": {"on": True}}, {"id": "f2", "name": "music", "args": {}}]
    wire.server({"toolCall": {"functionCalls": batch}}, binary=True)
    wire.server({"toolCallCancellation": {"ids": ["f2"]}}, binary=True)
    # The Python SDK sends snake_case; it answers the cancelled call too.
    wire.client(
        {
            "tool_response": {
                "function_responses": [{"id": "f1", "response": {}}, {"id": "f2", "response": {}}]
            }
        }
    )
    wire.server({"serverContent": {"modelTurn": {"parts": [{"text": "Done."}]}}}, binary=True)
    wire.server(
        {"serverContent": {"turnComplete": True}, "usageMetadata": {"totalTokenCount": 9}}, binary=True
    )
    first, second = wire.finish()
    assert calls(first) == [("f1", "lights", '{"on":true}'), ("f2", "music", "{}")]
    assert first["model"] == "gemini-live-x" and first["complete"]
    assert first["websocket"]["evidence"] == {"answered": ["f1", "f2"], "unanswered": [], "cancelled": ["f2"]}
    assert [(w["code"], w["id"]) for w in first["warnings"]] == [("cancelled-call-answered", "f2")]
    assert first["compatibility"] and all(v["verdict"] == "n/a" for v in first["compatibility"].values())
    assert second["choices"][0]["text"] == "Done." and second["usage"]["provider"] == {"totalTokenCount": 9}


def _live_keys(obj, snake: bool):
    """The message in the spelling of the Python SDK (snake_case) or of the wire (camelCase)."""
    if not snake:
        return obj
    if isinstance(obj, dict):
        return {
            re.sub(r"([A-Z])", lambda m: "_" + m[1].lower(), k): _live_keys(v, snake) for k, v in obj.items()
        }
    if isinstance(obj, list):
        return [_live_keys(v, snake) for v in obj]
    return obj


@pytest.mark.parametrize("snake", [False, True], ids=["camelCase", "snake_case"])
def test_gemini_live_keeps_thoughts_text_transcripts_usage_and_each_batch_in_order(snake):
    wire = Wire(path=GEMINI_LIVE_PATH)
    send = lambda obj: wire.server(_live_keys(obj, snake), binary=True)
    wire.client(_live_keys({"setup": {"model": "models/live-y"}}, snake))
    send({"setupComplete": {}})
    wire.client(_live_keys({"clientContent": {"turns": [], "turnComplete": True}}, snake))
    turn = {"parts": [{"text": "Plan: ", "thought": True}, {"text": ""}, "odd", {"text": "Sure."}]}
    send({"serverContent": {"modelTurn": turn}})
    send({"serverContent": {"outputTranscription": {"text": " Said aloud."}}})
    send({"serverContent": {"turnComplete": True}, "usageMetadata": {"totalTokenCount": 5}})
    wire.client(_live_keys({"clientContent": {"turns": [], "turnComplete": True}}, snake))
    batch = [
        {"id": "a", "name": "one", "args": {"n": 1}},
        "odd",
        {"id": "b", "name": "two"},
        {"id": "d", "name": "four"},
    ]
    send({"toolCall": {"functionCalls": batch}})
    answers = {"toolResponse": {"functionResponses": [{"id": "a"}, {"id": "b"}, {"id": "d"}]}}
    wire.client(_live_keys(answers, snake))
    send({"toolCall": {"functionCalls": [{"id": "c", "name": "three", "args": {}}]}})
    first, second, third = wire.finish()
    [choice] = first["choices"]
    assert (choice["reasoning"], choice["text"], choice["finish_reason"]) == (
        "Plan: ",
        "Sure. Said aloud.",
        "turn_complete",
    )
    assert first["usage"]["provider"] == {"total_token_count" if snake else "totalTokenCount": 5} and first["complete"]
    assert calls(second) == [("a", "one", '{"n":1}'), ("b", "two", "{}"), ("d", "four", "{}")]
    assert [c["index"] for c in second["choices"][0]["tool_calls"]] == [0, 1, 2]
    assert second["choices"][0]["finish_reason"] == "tool_call" and second["complete"]
    assert calls(third) == [("c", "three", "{}")] and third["choices"][0]["tool_calls"][0]["index"] == 0


@pytest.mark.parametrize("snake", [False, True], ids=["camelCase", "snake_case"])
def test_gemini_live_checks_calls_against_the_setup_tools_and_ends_an_interrupted_turn(snake):
    wire = Wire(path=GEMINI_LIVE_PATH)
    send = lambda obj: wire.server(_live_keys(obj, snake), binary=True)
    tools = [{"functionDeclarations": [{"name": "lights", "parameters": {"type": "object"}}]}]
    wire.client(_live_keys({"setup": {"model": "models/live-z", "tools": tools}}, snake))
    wire.client(_live_keys({"setup": {"tools": tools}}, snake))  # a second setup naming no model keeps it
    send({"setupComplete": {}})
    wire.client(_live_keys({"clientContent": {"turns": [], "turnComplete": True}}, snake))
    send({"toolCall": {"functionCalls": [{"id": "x", "name": "lights"}, {"id": "y", "name": "oven"}]}})
    send({"toolCallCancellation": {"ids": ["y"]}})
    send({"usageMetadata": {"totalTokenCount": 3}})  # usage of the response already ended: no new one
    wire.client(_live_keys({"toolResponse": {"functionResponses": [{"id": "x"}]}}, snake))
    send({"serverContent": {"modelTurn": {"parts": [{"text": "Turning"}]}}})
    send({"serverContent": {"interrupted": True}})
    first, second = wire.finish()
    assert [w["name"] for w in first["warnings"] if w["code"] == "undeclared-tool"] == ["oven"]
    assert first["model"] == "live-z" and first["websocket"]["evidence"]["cancelled"] == ["y"]
    assert second["model"] == "live-z" and second["choices"][0]["text"] == "Turning"
    assert second["websocket"]["status"] == "interrupted" and not second["complete"]
    (note,) = [w for w in second["warnings"] if w["code"] == "response-incomplete"]
    assert note["reason"] == "the user spoke over the model"


@pytest.mark.parametrize("snake", [False, True], ids=["camelCase", "snake_case"])
def test_gemini_live_settles_calls_at_the_users_next_turn_and_reads_usage_sent_alone(snake):
    wire = Wire(path=GEMINI_LIVE_PATH)
    send = lambda obj: wire.server(_live_keys(obj, snake), binary=True)
    wire.client(_live_keys({"setup": {"model": "models/live-z"}}, snake))
    wire.client(_live_keys({"clientContent": {"turns": [], "turnComplete": True}}, snake))
    send({"toolCall": {"functionCalls": [{"id": "x", "name": "lights"}]}})
    assert wire.settled == []  # its evidence is awaited
    wire.client(_live_keys({"clientContent": {"turns": [], "turnComplete": True}}, snake))
    assert [r["websocket"]["position"] for r in wire.settled] == [1]  # the user went on: settled now
    send({"serverContent": {"modelTurn": {"parts": [{"text": "Hi"}]}}})
    send({"usageMetadata": {"totalTokenCount": 4}})  # while the response runs: its usage
    send({"serverContent": {"turnComplete": True}})
    _, second = wire.finish()
    assert second["usage"]["provider"] == {"total_token_count" if snake else "totalTokenCount": 4}


def test_gemini_live_flags_a_dropped_call_and_an_unknown_answer():
    wire = Wire(path=GEMINI_LIVE_PATH)
    wire.client({"setup": {"model": "models/g"}})
    batch = [{"id": "f1", "name": "a", "args": {}}, {"id": "f2", "name": "b", "args": {}}]
    wire.server({"toolCall": {"functionCalls": batch}}, binary=True)
    wire.client(
        {"toolResponse": {"functionResponses": [{"id": "f1", "response": {}}, {"id": "f9", "response": {}}]}}
    )
    wire.server(
        {"serverContent": {"modelTurn": {"parts": [{"text": "ok"}]}, "turnComplete": True}}, binary=True
    )
    first, _ = wire.finish()
    assert [(w["code"], w["id"]) for w in first["warnings"]] == [
        ("unknown-tool-call-id", "f9"),
        ("unanswered-call", "f2"),
    ]


# -- recognising a connection --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/v1/responses", "openai-responses"),
        ("/backend-api/codex/responses", "openai-responses"),
        ("/openai/v1/responses?api-version=preview", "openai-responses"),
        ("/v1/realtime?model=gpt-realtime", "openai-realtime"),
        (GEMINI_LIVE_PATH, "gemini-live"),
        (
            "/ws/google.ai.generativelanguage.v1alpha.GenerativeService.BidiGenerateContentConstrained",
            "gemini-live",
        ),
        ("/socket.io/?EIO=4", None),
    ],
)
def test_the_upgrade_path_names_the_format(path, expected):
    assert websocket_format(path) == expected


@pytest.mark.parametrize(
    ("first", "from_client", "expected"),
    [
        ({"type": "response.create", "model": "m", "input": []}, True, "openai-responses"),
        ({"type": "session.created", "event_id": "e", "session": {}}, False, "openai-realtime"),
        ({"type": "response.create", "response": {"modalities": ["text"]}}, True, "openai-realtime"),
        ({"setup": {"model": "models/x"}}, True, "gemini-live"),
        ({"setupComplete": {}}, False, "gemini-live"),
        ({"hello": "world"}, True, None),
        # Joined mid-session: a server's response event with an event_id is Realtime's; Responses' has none.
        ({"type": "response.created", "event_id": "e", "response": {}}, False, "openai-realtime"),
        ({"type": "response.created", "event_id": "e", "response": {}}, True, None),
        ({"type": "session.ready", "event_id": "e"}, False, None),
        ({"type": 7, "event_id": "e"}, False, None),
    ],
)
def test_an_unknown_path_is_recognised_from_the_first_messages(first, from_client, expected):
    assert sniff_websocket(from_client, first) == expected
    wire = Wire(path="/ws")
    wire.send(from_client, first)
    assert wire.connection.format == expected


def test_a_connection_that_is_no_llm_traffic_is_given_up_and_left_alone():
    wire = Wire(path="/chat")
    for n in range(20):
        wire.client({"msg": n})
    assert wire.connection.format is None and wire.finish() == []


def test_every_websocket_format_names_its_session_and_paths():
    assert set(WEBSOCKET_FORMATS) == {"openai-responses", "openai-realtime", "gemini-live"}
    for wire in WEBSOCKET_FORMATS.values():
        assert wire.websocket.paths and wire.websocket.session


# -- bad input ---------------------------------------------------------------------------------------------


def test_bad_messages_are_warnings_on_the_response_running():
    wire = Wire(path="/v1/responses")
    wire.client({"type": "response.create", "model": "m"})
    wire.server({"type": "response.created", "response": {"id": "r1"}})
    wire.server(None, raw=b"not json at all")
    wire.server(None, raw=b"\xff\xfe{\x00", binary=True)
    wire.server({"type": "response.function_call_arguments.delta", "output_index": 5, "delta": "{}"})
    wire.server({"type": "response.completed", "response": {"id": "r1", "status": "completed"}})
    (result,) = wire.finish()
    assert {"malformed-event", "invalid-utf8", "orphan-delta"} <= set(codes(result))
    malformed = next(w for w in result["warnings"] if w["code"] == "malformed-event")
    assert malformed["ws_message"] == 3 and malformed["from_client"] is False


def test_a_bad_server_message_goes_on_the_response_whose_events_are_arriving_not_the_last_queued():
    # A burst: three response.create sent at once, each queued; the server answers them in turn.
    wire = Wire(path="/v1/responses")
    for _ in range(3):
        wire.client({"type": "response.create", "model": "m"})
    wire.server({"type": "response.created", "response": {"id": "r1"}})
    wire.server(None, raw=b"not json at all")
    wire.server({"type": "response.completed", "response": {"id": "r1", "status": "completed"}})
    responses_turn(wire, "r2", [("c2", "two", ["{}"])])
    wire.client(None, raw=b"<client garbage>")  # the client's own: on the response it asked for last
    responses_turn(wire, "r3", [("c3", "three", ["{}"])])
    first, second, third = wire.finish()
    assert "malformed-event" in codes(first)
    assert "malformed-event" not in codes(second)
    assert [w["from_client"] for w in third["warnings"] if w["code"] == "malformed-event"] == [True]


def test_a_bad_message_with_no_response_running_is_the_connections_warning():
    wire = Wire(path="/v1/responses")
    wire.server(None, raw=b"<html>")
    wire.finish()
    assert [w["code"] for w in wire.connection.summary()["warnings"]] == ["malformed-event"]


MESSAGES = st.lists(
    st.tuples(
        st.booleans(),
        st.one_of(
            st.binary(max_size=40),
            st.sampled_from(
                [
                    b'{"type":"response.create","model":"m","stream_id":"a"}',
                    b'{"type":"response.created","response":{"id":"r"}}',
                    b'{"type":"response.output_item.added","output_index":0,"item":{"type":"function_call","call_id":"c","name":"n"}}',
                    b'{"type":"response.function_call_arguments.delta","output_index":0,"delta":"{"}',
                    b'{"type":"response.completed","response":{"id":"r"}}',
                    b'{"type":"response.done","response":{"id":"r","status":"failed"}}',
                    b'{"type":"response.create","previous_response_id":"r","input":[{"type":"function_call_output","call_id":"c"}]}',
                    b'{"toolCall":{"functionCalls":[{"id":"f","name":"x","args":[]}]}}',
                    b'{"toolCallCancellation":{"ids":["f", 3]}}',
                    b'{"tool_response":{"function_responses":[{"id":"f"}, 7]}}',
                    b'{"type":"error","error":null}',
                    b'{"type":3}',
                    b"[1,2]",
                ]
            ),
        ),
    ),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(format=st.sampled_from([None, *WEBSOCKET_FORMATS]), messages=MESSAGES)
def test_no_message_sequence_makes_the_connection_raise(format, messages):
    connection = Connection(format)
    for from_client, content in messages:
        connection.message(from_client, content, True)
    connection.finish()
    check_connection(connection_result(connection))


def test_a_long_connection_keeps_a_bounded_number_of_results():
    from accumulator import websocket

    wire = Wire(path="/v1/responses")
    for n in range(websocket.MAX_RESULTS + 50):
        wire.client({"type": "response.create", "model": "m"})
        wire.server({"type": "response.created", "response": {"id": f"r{n}"}})
        wire.server({"type": "response.completed", "response": {"id": f"r{n}", "status": "completed"}})
    wire.finish()
    summary = wire.connection.summary()
    assert len(wire.connection.results) == websocket.MAX_RESULTS and summary["results_dropped"] == 50
    assert len(wire.settled) == websocket.MAX_RESULTS + 50  # every one was handed out once


def test_the_connections_results_are_in_order_of_position_when_lanes_end_out_of_order():
    wire = Wire(path="/v1/responses")
    wire.client({"type": "response.create", "model": "m", "stream_id": "slow"})
    wire.client({"type": "response.create", "model": "m", "stream_id": "fast"})
    wire.server({"type": "response.created", "response": {"id": "r-slow"}, "stream_id": "slow"})
    wire.server({"type": "response.created", "response": {"id": "r-fast"}, "stream_id": "fast"})
    wire.server({"type": "response.completed", "response": {"id": "r-fast"}, "stream_id": "fast"})
    wire.server({"type": "response.completed", "response": {"id": "r-slow"}, "stream_id": "slow"})
    wire.finish()
    assert [r["response_id"] for r in wire.connection.results] == ["r-slow", "r-fast"]


# -- what a mutation run found untested ----------------------------------------------------------------------


def test_an_answer_that_is_not_a_string_does_not_hide_the_ones_after_it():
    wire = Wire(path="/v1/realtime?model=m")
    wire.server(rt("response.created", response={"id": "R1"}))
    wire.server(realtime_call_added("R1", 0, "k1", "a"))
    wire.server(realtime_delta("R1", 0, "k1", "{}"))
    wire.server(rt("response.done", response={"id": "R1", "status": "completed"}))
    wire.connection.answer([7, None, "k1"])
    wire.client({"type": "response.create"})
    (result,) = wire.finish()
    assert result["websocket"]["evidence"]["answered"] == ["k1"]


def test_finishing_twice_hands_nothing_out_the_second_time():
    wire = Wire(path="/v1/responses")
    wire.client({"type": "response.create", "model": "m"})
    assert len(wire.connection.finish()) == 1
    assert wire.connection.finish() == []
    assert wire.connection.message(False, b'{"type": "response.created"}') == []  # nothing after the end
    assert wire.connection.responses == 1 and wire.connection.open == []


def test_an_unknown_answer_with_nothing_awaiting_evidence_goes_on_the_response_running():
    wire = Wire(path="/v1/realtime?model=m")
    wire.server(rt("response.created", response={"id": "R1"}))
    wire.server(realtime_call_added("R1", 0, "k1", "a"))
    wire.server(realtime_delta("R1", 0, "k1", "{}"))
    wire.server(rt("response.done", response={"id": "R1", "status": "completed"}))
    wire.client(
        {"type": "conversation.item.create", "item": {"type": "function_call_output", "call_id": "k1"}}
    )
    wire.client({"type": "response.create"})  # R1 settled: nothing awaits evidence now
    wire.server(rt("response.created", response={"id": "R2"}))
    wire.client(
        {"type": "conversation.item.create", "item": {"type": "function_call_output", "call_id": "zz"}}
    )
    wire.server(rt("response.done", response={"id": "R2", "status": "completed"}))
    _, second = wire.finish()
    assert [(w["code"], w["id"]) for w in second["warnings"]] == [("unknown-tool-call-id", "zz")]


def test_replay_reads_each_messages_direction_and_clock():
    from accumulator.websocket import replay

    def message(from_client, obj, at):
        return (from_client, json.dumps(obj).encode(), True, at)

    item = {"type": "function_call", "id": "fc", "call_id": "c1", "name": "a"}
    connection = replay(
        [
            message(True, {"type": "response.create", "model": "m"}, 100.0),
            message(False, {"type": "response.created", "response": {"id": "r1"}}, 100.5),
            message(False, {"type": "response.output_item.added", "output_index": 0, "item": item}, 101.0),
            message(
                False,
                {
                    "type": "response.output_item.added",
                    "output_index": 1,
                    "item": {**item, "call_id": "c2", "id": "fc2"},
                },
                101.0,
            ),
            message(
                False, {"type": "response.completed", "response": {"id": "r1", "status": "completed"}}, 102.0
            ),
            message(
                True,
                {
                    "type": "response.create",
                    "previous_response_id": "r1",
                    "input": [{"type": "function_call_output", "call_id": "c1"}],
                },
                110.0,
            ),
        ],
        "openai-responses",
        end=111.0,
    )
    first, second = connection.results
    assert [w["code"] for w in first["warnings"]] == ["unanswered-call"]  # the client's create was read
    assert first["timing"]["clock"] and first["timing"]["duration"] == 2.0  # from its create to its end
    assert not second["complete"]  # the connection ended before it did
