"""accumulator.websocket: what the logic survivors of a mutation run showed untested (docs/mutation.md).

Each test guards a behaviour of ``Connection`` a surviving mutant broke: the connection's counts, the
details of its warnings, where a warning lands, which responses a client's turn settles, the bounds on
results awaiting evidence, the clock of a response's end, and what ``replay`` passes on."""

from __future__ import annotations

import json

from test_websocket import GEMINI_LIVE_PATH, Wire, calls, codes, realtime_call_added, realtime_delta, rt

from accumulator import Connection
from accumulator.limits import Limits
from accumulator.websocket import MAX_PENDING, SNIFF_MESSAGES, replay


def lane_turn(wire, rid, lane, call_id, *, complete=True):
    """One Responses WebSocket response on a lane with one call; ``complete``: its end event too."""
    extra = {"stream_id": lane}
    wire.server({"type": "response.created", "response": {"id": rid}, **extra})
    item = {"type": "function_call", "id": f"fc_{call_id}", "call_id": call_id, "name": "tool"}
    wire.server({"type": "response.output_item.added", "output_index": 0, "item": item, **extra})
    wire.server({"type": "response.function_call_arguments.delta", "output_index": 0, "delta": "{}", **extra})
    if complete:
        wire.server({"type": "response.completed", "response": {"id": rid, "status": "completed"}, **extra})


def outputs(*call_ids):
    return [{"type": "function_call_output", "call_id": c, "output": "ok"} for c in call_ids]


def two_lanes_with_calls():
    """Lanes a and b each ran a response with one call (ra: ca, rb: cb); both await evidence."""
    wire = Wire(path="/v1/responses")
    wire.client({"type": "response.create", "model": "m", "stream_id": "a"})
    wire.client({"type": "response.create", "model": "m", "stream_id": "b"})
    lane_turn(wire, "ra", "a", "ca")
    lane_turn(wire, "rb", "b", "cb")
    return wire


def by_id(results):
    return {r["response_id"]: r for r in results}


# -- the connection's counts ---------------------------------------------------------------------------------


def test_the_summary_counts_each_directions_messages_and_bytes_apart():
    wire = Wire(path="/v1/responses")
    create = b'{"type": "response.create", "model": "m"}'
    created = b'{"type": "response.created", "response": {"id": "r1"}}'
    done = b'{"type": "response.completed", "response": {"id": "r1", "status": "completed"}}'
    wire.send(True, None, raw=create)
    wire.send(False, None, raw=created)
    wire.send(False, None, raw=done)
    wire.finish()
    summary = wire.connection.summary()
    assert summary["messages"] == {"client": 1, "server": 2}
    assert summary["bytes"] == {"client": len(create), "server": len(created) + len(done)}


# -- the details of a bad message's warning ------------------------------------------------------------------


def test_a_bad_messages_warnings_name_its_number_direction_and_content():
    wire = Wire(path="/v1/responses")
    wire.client({"type": "response.create", "model": "m"})
    wire.server({"type": "response.created", "response": {"id": "r1"}})
    wire.client(None, raw=b"\xff\xfe client garbage", binary=True)
    wire.server(None, raw=b"\xff server garbage", binary=True)
    wire.server({"type": "response.completed", "response": {"id": "r1", "status": "completed"}})
    (result,) = wire.finish()
    utf8 = [(w["ws_message"], w["from_client"]) for w in result["warnings"] if w["code"] == "invalid-utf8"]
    assert utf8 == [(3, True), (4, False)]
    malformed = [w for w in result["warnings"] if w["code"] == "malformed-event"]
    assert [(w["ws_message"], w["from_client"]) for w in malformed] == [(3, True), (4, False)]
    assert all(w["data"] and "garbage" in w["data"] for w in malformed)


def test_a_connection_not_recognised_yet_says_nothing_about_messages_that_are_not_json():
    connection = Connection()
    connection.message(False, b"<html>", True)  # before any message said what the connection speaks
    connection.message(True, b'{"type": "response.create", "model": "m"}', True)
    connection.message(False, b'{"type": "response.created", "response": {"id": "r1"}}', True)
    connection.message(False, b'{"type": "response.completed", "response": {"id": "r1"}}', True)
    connection.finish()
    (result,) = connection.results
    assert connection.format == "openai-responses"
    assert connection.summary()["warnings"] == [] and "malformed-event" not in codes(result)


def test_a_connection_is_given_up_at_its_eighth_unrecognised_message_exactly():
    connection = Connection()
    for _ in range(SNIFF_MESSAGES - 1):
        connection.message(True, b'{"hello": "world"}', True)
    assert not connection.given_up
    connection.message(True, b'{"hello": "world"}', True)
    assert connection.given_up
    connection.message(True, b'{"type": "response.create", "model": "m"}', True)  # too late: not read
    assert connection.finish() == [] and connection.format is None


# -- where a warning lands -----------------------------------------------------------------------------------


def test_a_bad_server_message_goes_on_the_lane_whose_events_are_arriving():
    wire = Wire(path="/v1/responses")
    wire.client({"type": "response.create", "model": "m", "stream_id": "a"})
    wire.client({"type": "response.create", "model": "m", "stream_id": "b"})
    wire.server({"type": "response.created", "response": {"id": "ra"}, "stream_id": "a"})
    wire.server({"type": "response.created", "response": {"id": "rb"}, "stream_id": "b"})
    wire.server(None, raw=b"not json")  # after an event of lane b: b's, not the oldest running (a)
    results = by_id(wire.finish())
    assert "malformed-event" in codes(results["rb"]) and "malformed-event" not in codes(results["ra"])


def test_a_bad_server_message_after_a_response_ended_goes_on_the_next_one_running():
    wire = Wire(path="/v1/responses")
    wire.client({"type": "response.create", "model": "m"})
    wire.client({"type": "response.create", "model": "m"})  # queued behind the first
    wire.server({"type": "response.created", "response": {"id": "r1"}})
    wire.server({"type": "response.completed", "response": {"id": "r1", "status": "completed"}})
    wire.server(None, raw=b"not json")  # the first has ended: the second, still running, is next
    first, second = wire.finish()
    assert "malformed-event" not in codes(first) and "malformed-event" in codes(second)
    assert wire.connection.summary()["warnings"] == []


def test_a_bad_client_message_goes_on_the_response_it_asked_for_last_not_the_one_streaming():
    wire = Wire(path="/v1/responses")
    wire.client({"type": "response.create", "model": "m"})
    wire.server({"type": "response.created", "response": {"id": "r1"}})
    wire.client({"type": "response.create", "model": "m"})  # queued while r1 streams
    wire.client(None, raw=b"<client garbage>")
    wire.server({"type": "response.completed", "response": {"id": "r1", "status": "completed"}})
    responses_events = [
        {"type": "response.created", "response": {"id": "r2"}},
        {"type": "response.completed", "response": {"id": "r2", "status": "completed"}},
    ]
    for event in responses_events:
        wire.server(event)
    first, second = wire.finish()
    assert "malformed-event" not in codes(first) and "malformed-event" in codes(second)


def test_an_unknown_answer_with_nothing_awaiting_evidence_goes_on_the_response_asked_for_last():
    # Realtime runs two responses at once; the last server event went to R1, but R2 is the latest.
    wire = Wire(path="/v1/realtime?model=m")
    wire.server(rt("response.created", response={"id": "R0"}))
    wire.server(realtime_call_added("R0", 0, "k0", "a"))
    wire.server(rt("response.done", response={"id": "R0", "status": "completed"}))
    wire.client(
        {"type": "conversation.item.create", "item": {"type": "function_call_output", "call_id": "k0"}}
    )
    wire.client({"type": "response.create"})  # R0 settled: nothing awaits evidence
    wire.server(rt("response.created", response={"id": "R1"}))
    wire.server(rt("response.created", response={"id": "R2"}))
    wire.server(rt("response.output_text.delta", response_id="R1", item_id="t", output_index=0, delta="hi"))
    wire.client(
        {"type": "conversation.item.create", "item": {"type": "function_call_output", "call_id": "zz"}}
    )
    wire.server(rt("response.done", response={"id": "R1", "status": "completed"}))
    wire.server(rt("response.done", response={"id": "R2", "status": "completed"}))
    results = by_id(wire.finish())
    assert "unknown-tool-call-id" not in codes(results["R1"])
    unknown = [w for w in results["R2"]["warnings"] if w["code"] == "unknown-tool-call-id"]
    assert [(w["id"], w["ws_message"]) for w in unknown] == [("zz", 9)]


# -- the client's evidence -----------------------------------------------------------------------------------


def test_results_for_calls_of_a_conversation_begun_elsewhere_leave_no_warning_anywhere():
    wire = Wire(path="/v1/responses")
    wire.client({"type": "response.create", "model": "m", "input": outputs("old")})
    wire.server({"type": "response.created", "response": {"id": "r1"}})
    wire.server({"type": "response.completed", "response": {"id": "r1", "status": "completed"}})
    (result,) = wire.finish()
    assert codes(result) == [] and wire.connection.summary()["warnings"] == []


def test_an_unknown_answer_naming_a_response_still_running_is_flagged_even_before_calls():
    # No response with calls has ended, but the client says it follows ra, running on this connection.
    wire = Wire(path="/v1/responses")
    wire.client({"type": "response.create", "model": "m", "stream_id": "a"})
    wire.server({"type": "response.created", "response": {"id": "ra"}, "stream_id": "a"})
    wire.client(
        {"type": "response.create", "stream_id": "b", "previous_response_id": "ra", "input": outputs("zz")}
    )
    wire.server(
        {"type": "response.completed", "response": {"id": "ra", "status": "completed"}, "stream_id": "a"}
    )
    results = by_id(wire.finish())
    unknown = [w for w in results["ra"]["warnings"] if w["code"] == "unknown-tool-call-id"]
    assert [(w["id"], w["ws_message"]) for w in unknown] == [("zz", 3)]
    assert wire.connection.summary()["warnings"] == []


def test_an_unknown_answer_is_flagged_on_the_response_the_client_says_it_follows():
    wire = two_lanes_with_calls()
    wire.client({"type": "response.create", "previous_response_id": "ra", "input": outputs("ca", "zz")})
    results = by_id(wire.finish())
    unknown = [w for w in results["ra"]["warnings"] if w["code"] == "unknown-tool-call-id"]
    assert [(w["id"], w["ws_message"]) for w in unknown] == [("zz", 11)]
    assert "unknown-tool-call-id" not in codes(results["rb"])


def test_a_turn_settles_the_response_it_answers_and_the_one_it_follows_only():
    wire = two_lanes_with_calls()
    settled = wire.client({"type": "response.create", "previous_response_id": "ra", "input": outputs("ca")})
    assert [r["response_id"] for r in settled] == ["ra"]
    settled = wire.client({"type": "response.create", "previous_response_id": "rb", "input": outputs("cb")})
    assert [r["response_id"] for r in settled] == ["rb"]
    assert settled[0]["websocket"]["evidence"] == {"answered": ["cb"], "unanswered": [], "cancelled": []}
    assert all("unknown-tool-call-id" not in codes(r) for r in wire.finish())


def test_a_turn_that_names_the_response_it_follows_settles_it_without_answers():
    wire = two_lanes_with_calls()
    settled = wire.client({"type": "response.create", "previous_response_id": "rb"})
    assert [r["response_id"] for r in settled] == ["rb"]
    assert settled[0]["websocket"]["evidence"] is None


def test_a_turn_that_answers_without_naming_a_response_settles_the_one_it_answers():
    wire = Wire(path="/v1/responses")
    wire.client({"type": "response.create", "model": "m"})
    lane_turn(wire, "r1", None, "c1")
    settled = wire.client({"type": "response.create", "input": outputs("c1")})
    assert [r["response_id"] for r in settled] == ["r1"]
    assert settled[0]["websocket"]["evidence"]["answered"] == ["c1"]


def test_an_answer_to_a_call_of_a_response_still_running_is_its_evidence():
    wire = Wire(path="/v1/realtime?model=m")
    wire.server(rt("response.created", response={"id": "R1"}))
    wire.server(realtime_call_added("R1", 0, "k1", "a"))
    wire.server(realtime_delta("R1", 0, "k1", "{}"))
    # The client runs the call as soon as its arguments are in, before the response's end.
    wire.client(
        {"type": "conversation.item.create", "item": {"type": "function_call_output", "call_id": "k1"}}
    )
    wire.server(rt("response.done", response={"id": "R1", "status": "completed"}))
    wire.client({"type": "response.create"})
    (result,) = wire.finish()
    assert codes(result) == [] and wire.connection.summary()["warnings"] == []
    assert result["websocket"]["evidence"] == {"answered": ["k1"], "unanswered": [], "cancelled": []}


def test_an_answer_from_elsewhere_does_not_hide_an_answer_to_a_running_call_after_it():
    wire = Wire(path="/v1/responses")
    wire.client({"type": "response.create", "model": "m", "stream_id": "a"})
    lane_turn(wire, "ra", "a", "ca", complete=False)  # running: no response with calls has ended yet
    wire.client({"type": "response.create", "model": "m", "stream_id": "b", "input": outputs("old", "ca")})
    wire.server(
        {"type": "response.completed", "response": {"id": "ra", "status": "completed"}, "stream_id": "a"}
    )
    results = by_id(wire.finish())
    assert results["ra"]["websocket"]["evidence"]["answered"] == ["ca"]


def test_a_response_with_calls_nobody_answered_has_no_evidence():
    wire = Wire(path="/v1/responses")
    wire.client({"type": "response.create", "model": "m"})
    lane_turn(wire, "r1", None, "c1")
    (result,) = wire.finish()
    assert calls(result) == [("c1", "tool", "{}")] and result["websocket"]["evidence"] is None


# -- cancellations (Gemini Live) -----------------------------------------------------------------------------


def live_calls(wire, *ids):
    wire.client({"setup": {"model": "models/g"}})
    wire.client(
        {"clientContent": {"turns": [{"role": "user", "parts": [{"text": "go"}]}], "turnComplete": True}}
    )
    batch = [{"id": i, "name": "tool", "args": {}} for i in ids]
    wire.server({"toolCall": {"functionCalls": batch}})


def test_a_cancellation_only_lists_unanswered_calls_when_some_were_answered():
    wire = Wire(path=GEMINI_LIVE_PATH)
    live_calls(wire, "f1", "f2")
    wire.server({"toolCallCancellation": {"ids": ["f1"]}})
    (result,) = wire.finish()
    assert result["websocket"]["evidence"] == {"answered": [], "unanswered": [], "cancelled": ["f1"]}
    assert "unanswered-call" not in codes(result)


def test_a_cancellation_counts_only_string_ids_of_the_response_that_carried_them():
    wire = Wire(path=GEMINI_LIVE_PATH)
    live_calls(wire, "f1")
    wire.server({"toolCallCancellation": {"ids": ["zz", 3, "f1"]}})
    (result,) = wire.finish()
    assert result["websocket"]["evidence"]["cancelled"] == ["f1"]


def test_a_cancellation_while_the_model_speaks_again_is_read():
    wire = Wire(path=GEMINI_LIVE_PATH)
    live_calls(wire, "f1", "f2")
    wire.server({"serverContent": {"modelTurn": {"parts": [{"text": "Meanwhile"}]}}})  # a response running
    wire.server({"toolCallCancellation": {"ids": ["f2"]}})
    wire.server({"serverContent": {"turnComplete": True}})
    wire.finish()
    first, second = wire.connection.results
    assert first["websocket"]["evidence"]["cancelled"] == ["f2"]
    assert second["choices"][0]["text"] == "Meanwhile" and second["websocket"]["evidence"] is None


# -- bounds --------------------------------------------------------------------------------------------------


def test_results_awaiting_evidence_are_bounded_and_the_oldest_settled_first():
    wire = Wire(path="/v1/responses")
    settled_at = []
    for n in range(MAX_PENDING + 1):
        wire.client({"type": "response.create", "model": "m"})
        before = len(wire.settled)
        lane_turn(wire, f"r{n}", None, f"c{n}")
        settled_at.append([r["response_id"] for r in wire.settled[before:]])
    assert settled_at[:MAX_PENDING] == [[]] * MAX_PENDING  # MAX_PENDING of them can wait
    assert settled_at[MAX_PENDING] == ["r0"]  # one more: the oldest is settled, unanswered
    wire.client({"type": "response.create", "previous_response_id": "r1", "input": outputs("c1")})
    results = by_id(wire.finish())
    assert results["r1"]["websocket"]["evidence"]["answered"] == ["c1"]
    assert results["r0"]["websocket"]["evidence"] is None


# -- the clock -----------------------------------------------------------------------------------------------


def test_a_response_ends_at_its_end_events_time_and_a_cut_one_at_the_connections_end():
    connection = Connection("openai-responses")

    def send(from_client, obj, at):
        connection.message(from_client, json.dumps(obj).encode(), True, now=at)

    send(True, {"type": "response.create", "model": "m"}, 100.0)
    send(False, {"type": "response.created", "response": {"id": "r1"}}, 101.0)
    send(False, {"type": "response.completed", "response": {"id": "r1", "status": "completed"}}, 104.0)
    send(True, {"type": "response.create", "model": "m"}, 105.0)
    send(False, {"type": "response.created", "response": {"id": "r2"}}, 106.0)
    (cut,) = connection.finish(now=112.0)
    first = connection.results[0]
    assert first["timing"]["duration"] == 4.0 and cut["timing"]["duration"] == 7.0


# -- replay --------------------------------------------------------------------------------------------------


def test_replay_passes_the_format_path_limits_and_end_on():
    item = {"type": "function_call", "id": "fc", "call_id": "c1", "name": "a"}
    messages = [  # no response.create or response.created: nothing to recognise the format from
        (False, json.dumps({"type": "response.output_item.added", "output_index": 0, "item": item}).encode()),
        (
            False,
            json.dumps(
                {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": '{"x": 12345}'}
            ).encode(),
        ),
    ]
    connection = replay(
        [(c, m, True, 10.0) for c, m in messages],
        "openai-responses",
        path="/v1/responses",
        limits=Limits(max_argument_chars=4),
        end=13.0,
    )
    (result,) = connection.results
    assert connection.summary()["path"] == "/v1/responses" and connection.format == "openai-responses"
    assert calls(result)[0][:2] == ("c1", "a") and len(calls(result)[0][2]) <= 4
    assert result["timing"]["duration"] == 3.0
