"""OpenAI Chat Completions, Responses and Realtime: what a mutation run found untested (the logic survivors of
``accumulator/formats/openai_chat.py``, ``openai_responses.py`` and ``openai_realtime.py``; see
docs/mutation.md). Each test was checked by applying the mutation it guards against to the source by hand and
seeing it fail."""

from __future__ import annotations

import json

import pytest
from streams import call, choice, chunk, named_sse, sse, tool_chunk, warning

from accumulator import Connection, analyze, analyze_message, websocket_format
from accumulator.echo import ObservedCalls
from accumulator.rewrite import StreamRewriter

CHAT = "openai-chat"
RESPONSES = "openai-responses"


def calls(result: dict, choice_index: int | None = None) -> list[tuple]:
    return [
        (c["id"], c["name"], c["arguments"])
        for ch in result["choices"]
        if choice_index is None or ch["index"] == choice_index
        for c in ch["tool_calls"]
    ]


def codes(result: dict) -> list[str]:
    return [w["code"] for w in result["warnings"]]


class Wire:
    """A WebSocket connection fed JSON messages; what each message settled, and everything at the end."""

    def __init__(self, path: str) -> None:
        self.connection = Connection(websocket_format(path), path=path)
        self.settled: list[dict] = []

    def send(self, from_client: bool, obj: dict) -> list[dict]:
        out = self.connection.message(from_client, json.dumps(obj).encode(), True)
        self.settled += out
        return out

    def client(self, obj: dict) -> list[dict]:
        return self.send(True, obj)

    def server(self, obj: dict) -> list[dict]:
        return self.send(False, obj)

    def finish(self) -> list[dict]:
        self.settled += self.connection.finish()
        return self.settled


# === Chat Completions =========================================================================================

# --- message_ops: a whole chat.completion ----------------------------------------------------------------------


def completion(*choices: dict) -> bytes:
    return json.dumps(
        {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-test", "choices": list(choices)}
    ).encode()


def test_a_whole_chat_message_that_is_not_json_is_reported_as_event_1():
    # message_ops 3
    assert warning(analyze_message(b"{not json", CHAT), "malformed-event")["event"] == 1


def test_a_whole_chat_messages_calls_are_at_event_1_and_a_bad_choice_does_not_hide_the_next():
    # message_ops 17 (continue -> break), 56 (the chunk's event number)
    entry = {"id": "call_a", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    message = {"role": "assistant", "tool_calls": [entry]}
    result = analyze_message(
        completion("not a choice", {"index": 0, "message": message, "finish_reason": "tool_calls"}), CHAT
    )
    (found,) = result["choices"][0]["tool_calls"]
    assert (found["id"], found["first_event"], found["last_event"]) == ("call_a", 1, 1)


def test_a_whole_chat_messages_calls_without_index_are_indexed_by_position():
    # message_ops 23, 25, 26, 35, 40, 44: calls without an index get their position; one with an index keeps it
    entries = [
        {"id": "call_a", "type": "function", "function": {"name": "one", "arguments": "{}"}},
        {"id": "call_b", "type": "function", "function": {"name": "two", "arguments": "{}"}},
        {"index": 7, "id": "call_c", "type": "function", "function": {"name": "three", "arguments": "{}"}},
    ]
    message = {"role": "assistant", "tool_calls": entries}
    result = analyze_message(
        completion({"index": 0, "message": message, "finish_reason": "tool_calls"}), CHAT
    )
    assert [(c["id"], c["index"]) for c in result["choices"][0]["tool_calls"]] == [
        ("call_a", 0),
        ("call_b", 1),
        ("call_c", 7),
    ]


def test_a_whole_chat_message_with_a_null_message_or_a_tool_call_that_is_no_object_does_not_raise():
    # message_ops 24 (a null message read as a dict), 36, 39, 41 (a string entry spread as a mapping)
    entry = {"id": "call_a", "type": "function", "function": {"name": "one", "arguments": "{}"}}
    message = {"role": "assistant", "tool_calls": ["not an entry", entry]}
    result = analyze_message(
        completion(
            {"index": 0, "message": None, "finish_reason": "stop"},
            {"index": 1, "message": message, "finish_reason": "tool_calls"},
        ),
        CHAT,
    )
    assert calls(result) == [("call_a", "one", "{}")]
    assert codes(result) == ["malformed-event"]


# --- _content_parts: Magistral's typed content -----------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        [{"type": "text", "text": "Hi"}],
        [{"type": "thinking", "thinking": [{"type": "text", "text": "Hm"}]}],
    ],
    ids=["text", "thinking"],
)
def test_a_content_part_is_the_first_token_at_its_event(content):
    # _content_parts 21 (text), 52 (thinking)
    body = sse(chunk(choice(role="assistant")), chunk(choice(content=content)), chunk(choice(0, "stop")))
    assert analyze(body, CHAT)["timing"]["first_token_event"] == 2


# --- request_echoes: the turn an echoed call was in ------------------------------------------------------------


def _chat_result(*ids: str) -> dict:
    tool_calls = [{"id": i, "name": "lookup", "arguments": "{}"} for i in ids]
    return {"format": CHAT, "choices": [{"index": 0, "tool_calls": tool_calls}]}


def test_an_unknown_id_in_an_older_chat_turn_is_not_flagged_but_one_beside_a_known_call_is():
    # request_echoes 26: each assistant message is a turn; only an unknown id in a turn with a known call is news
    index = ObservedCalls()
    index.record(_chat_result("call_seen"), "flow-1")

    def assistant(*ids):
        entries = [
            {"id": i, "type": "function", "function": {"name": "lookup", "arguments": "{}"}} for i in ids
        ]
        return {"role": "assistant", "tool_calls": entries}

    messages = [
        {"role": "user", "content": "go"},
        assistant("call_elsewhere"),
        {"role": "tool", "tool_call_id": "call_elsewhere", "content": "ok"},
        assistant("call_seen", "call_made_up"),
    ]
    warnings = index.check(json.dumps({"model": "m", "messages": messages}).encode(), CHAT)
    assert [(w["code"], w["id"]) for w in warnings if w["code"] == "unknown-tool-call-id"] == [
        ("unknown-tool-call-id", "call_made_up")
    ]


# --- split_final: a finish that rides with a call's fragment while other calls are held -----------------------


def chat_rewrite(body: bytes, inject=(), repair=()) -> tuple[bytes, dict]:
    rewriter = StreamRewriter(CHAT, inject=list(inject), repair=list(repair))
    return b"".join(rewriter.feed(body)) + b"".join(rewriter.finish()), rewriter.report()


def data_lines(body: bytes) -> list[dict]:
    return [json.loads(line[6:]) for line in body.splitlines() if line.startswith(b"data: {")]


def finishes_last(body: bytes) -> bool:
    """The finish goes out in a chunk of its own, after every tool-call fragment."""
    chunks = data_lines(body)
    reasons = [
        n for n, c in enumerate(chunks) for ch in c["choices"] if type(ch) is dict and ch.get("finish_reason")
    ]
    entries = [
        n
        for n, c in enumerate(chunks)
        for ch in c["choices"]
        if type(ch) is dict and ch["delta"].get("tool_calls")
    ]
    return reasons == [len(chunks) - 1] and max(entries) < reasons[0]


def test_a_finish_beside_a_name_split_in_two_goes_out_after_the_held_calls_and_the_names_pieces_in_order():
    # split_final 10, 12, 13, 14 (the first piece of the name put after the second, or as null), 15 (the
    # unit of two chunks left whole: its finish before the held call). Call a is named only in the last
    # chunk, which split-names cuts in two; serialize holds call b meanwhile.
    body = sse(
        tool_chunk(call(0, "call_a", arguments="", type="function")),
        tool_chunk(call(0, arguments='{"x": ')),
        tool_chunk(call(1, "call_b", "beta", "{", type="function")),
        tool_chunk(call(1, arguments="}")),
        tool_chunk(call(0, name="alpha", arguments="1}"), finish_reason="tool_calls"),
    )
    out, report = chat_rewrite(body, inject=["split-names"], repair=["serialize"])
    result = analyze(out, CHAT)
    assert calls(result) == [("call_a", "alpha", '{"x": 1}'), ("call_b", "beta", "{}")]
    assert result["choices"][0]["finish_reason"] == "tool_calls" and "malformed-event" not in codes(result)
    assert report["edits"]["split-names"] == 2 and finishes_last(out)


def _final(kind: str, entry: dict) -> dict:
    if kind == "second-choice":
        return chunk(choice(1, "tool_calls", tool_calls=[entry]))
    if kind == "choice-without-index":
        return chunk({"delta": {"tool_calls": [entry]}, "finish_reason": "tool_calls"})
    return chunk(choice(0, "tool_calls", tool_calls=[entry]), "not a choice")


@pytest.mark.parametrize("kind", ["second-choice", "choice-without-index", "a-choice-that-is-no-object"])
def test_a_finish_chunk_is_split_keeping_its_choice_and_whatever_else_it_holds(kind):
    # split_final 43, 51 (the carried fragment loses its choice's index), 44, 51 (a choice without index
    # read as having one), 25 (a choice that is no object read as one)
    n = 1 if kind == "second-choice" else 0
    body = sse(
        tool_chunk(call(0, "call_a", "alpha", '{"x": ', type="function"), choice_index=n),
        tool_chunk(call(1, "call_b", "beta", "{", type="function"), choice_index=n),
        tool_chunk(call(1, arguments="}"), choice_index=n),
        _final(kind, call(0, arguments="1}")),
    )
    out, report = chat_rewrite(body, repair=["serialize"])
    assert report["stopped"] is None and report["calls_reordered"] > 0
    result = analyze(out, CHAT)
    assert (
        calls(result, n)
        == [("call_a", "alpha", '{"x": 1}'), ("call_b", "beta", "{}")]
        == calls(analyze(body, CHAT), n)
    )
    assert finishes_last(out)


# === Responses ==============================================================================================

# --- the stream: event numbers -----------------------------------------------------------------------------------

ADDED = (
    "response.output_item.added",
    {
        "output_index": 0,
        "item": {
            "id": "fc_1",
            "type": "function_call",
            "call_id": "call_1",
            "name": "weather",
            "arguments": "",
        },
    },
)
COMPLETED = ("response.completed", {"response": {"id": "resp_1", "status": "completed"}})


def args_delta(delta, **where) -> tuple[str, dict]:
    return ("response.function_call_arguments.delta", {"output_index": 0, **where, "delta": delta})


def args_done(arguments: str, **where) -> tuple[str, dict]:
    return ("response.function_call_arguments.done", {"output_index": 0, **where, "arguments": arguments})


def test_a_malformed_responses_event_is_reported_with_its_event_number():
    # ops 6
    body = named_sse(ADDED) + b"event: ping\ndata: {not json\n\n" + named_sse(COMPLETED)
    assert warning(analyze(body, RESPONSES), "malformed-event")["event"] == 2


def test_a_responses_calls_events_are_its_added_and_its_last_delta():
    # ops 14
    body = named_sse(ADDED, args_delta('{"city": '), args_delta('"Oslo"}'), COMPLETED)
    (found,) = analyze(body, RESPONSES)["choices"][0]["tool_calls"]
    assert (found["first_event"], found["last_event"], found["arguments"]) == (1, 3, '{"city": "Oslo"}')


def test_arguments_only_in_function_call_arguments_done_are_the_calls_at_that_event():
    # obj_ops 122, 123, 131 (the done event's index and arguments), _final 11 (its event number); no
    # output_item.done restates them here.
    body = named_sse(ADDED, args_done('{"city": "Oslo"}'), COMPLETED)
    result = analyze(body, RESPONSES)
    (found,) = result["choices"][0]["tool_calls"]
    assert (found["arguments"], found["last_event"]) == ('{"city": "Oslo"}', 2)
    assert result["warnings"] == []


def test_an_arguments_mismatch_names_the_event_the_output_item_and_the_calls_name():
    # obj_ops 92, 93 (the name kept), 124; _final 25-28, 32-34, 38, 41 (the warning's details and message)
    body = named_sse(
        ADDED, args_delta('{"city": "LA"}'), args_done('{"city": "Oslo"}', item_id="fc_1"), COMPLETED
    )
    found = warning(analyze(body, RESPONSES), "arguments-mismatch")
    assert (found["event"], found["output_index"], found["name"]) == (3, 0, "weather")
    assert found["message"].startswith("event 3: the final arguments of output item 0 (weather) differ")


def test_a_responses_text_delta_is_the_first_token_and_empty_or_non_text_deltas_are_nothing():
    # obj_ops 52 (an empty or a numeric delta taken as text), 56 (its event number)
    text = "response.output_text.delta"
    body = named_sse((text, {"delta": ""}), (text, {"delta": 7}), (text, {"delta": "Hi"}), COMPLETED)
    result = analyze(body, RESPONSES)
    assert result["choices"][0]["text"] == "Hi" and result["timing"]["first_token_event"] == 3


def test_a_failed_responses_stream_names_the_event_of_its_error():
    # _terminal 39
    failed = (
        "response.failed",
        {"response": {"id": "r", "status": "failed", "error": {"code": "server_error"}}},
    )
    found = warning(analyze(named_sse(ADDED, failed), RESPONSES), "provider-error")
    assert (found["event"], found["error"]) == (2, {"code": "server_error"})


def test_the_responses_own_status_is_the_finish_reason_over_the_events_name():
    # _terminal 53, 54
    incomplete = ("response.completed", {"response": {"id": "r", "status": "incomplete"}})
    assert analyze(named_sse(ADDED, incomplete), RESPONSES)["choices"][0]["finish_reason"] == "incomplete"


# --- message_ops: a whole response -------------------------------------------------------------------------------


def whole(**response) -> bytes:
    return json.dumps(response).encode()


def test_a_whole_responses_message_that_is_not_json_is_reported_as_event_1():
    # message_ops 3
    assert warning(analyze_message(b"{not json", RESPONSES), "malformed-event")["event"] == 1


def test_a_whole_responses_error_names_event_1():
    # message_ops 21
    result = analyze_message(whole(error={"code": "invalid_api_key", "message": "bad key"}), RESPONSES)
    found = warning(result, "provider-error")
    assert (found["event"], found["error"]["code"]) == (1, "invalid_api_key")


def test_a_whole_failed_response_keeps_its_id_model_status_and_error_at_event_1():
    # message_ops 15 (a response object with an error is a response, not a bare error), 174
    error = {"code": "server_error", "message": "oops"}
    body = whole(id="resp_1", object="response", model="gpt-test", status="failed", error=error, output=[])
    result = analyze_message(body, RESPONSES)
    assert (result["response_id"], result["model"]) == ("resp_1", "gpt-test")
    assert result["choices"][0]["finish_reason"] == "failed"
    found = warning(result, "provider-error")
    assert (found["event"], found["error"]) == (1, error)


def test_a_whole_response_without_its_object_field_still_gives_its_call_at_event_1():
    # message_ops 9 (no "object": read as an error), 48 (the call's event number)
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather", "arguments": "{}"}
    result = analyze_message(whole(id="resp_1", status="completed", output=[item]), RESPONSES)
    (found,) = result["choices"][0]["tool_calls"]
    assert (found["id"], found["first_event"], result["error"]) == ("call_1", 1, None)


@pytest.mark.parametrize(
    "response, expected",
    [({"id": "resp_1"}, (None, "resp_1")), ({"model": "gpt-test"}, ("gpt-test", None))],
    ids=["id-alone", "model-alone"],
)
def test_a_response_that_names_only_its_id_or_only_its_model_keeps_it(response, expected):
    # _terminal 1, 2, 5
    result = analyze_message(whole(object="response", status="completed", output=[], **response), RESPONSES)
    assert (result["model"], result["response_id"]) == expected


# --- _echoes: a request's input items ----------------------------------------------------------------------------


def _responses_result(*ids: str) -> dict:
    tool_calls = [{"id": i, "name": "lookup", "arguments": "{}"} for i in ids]
    return {"format": RESPONSES, "choices": [{"index": 0, "tool_calls": tool_calls}]}


def _input(*items) -> bytes:
    return json.dumps({"model": "m", "input": items}).encode()


def _echo(call_id: str, arguments: str = "{}") -> dict:
    return {"type": "function_call", "call_id": call_id, "name": "lookup", "arguments": arguments}


def test_an_echo_after_an_input_item_that_is_no_object_is_still_compared():
    # _echoes 14 (continue -> break)
    index = ObservedCalls()
    index.record(_responses_result("call_1"), "flow-1")
    warnings = index.check(_input("not an item", _echo("call_1", '{"changed": true}')), RESPONSES)
    assert [w["code"] for w in warnings] == ["client-misassembled"]


def test_each_responses_input_item_is_a_turn_and_only_function_call_outputs_answer():
    # _echoes 25 (every echo in one turn: an unknown id beside a known one would be news), 39 (any item with
    # a call_id read as an answer)
    index = ObservedCalls()
    index.record(_responses_result("call_1"), "flow-1")
    computer = {"type": "computer_call", "call_id": "call_computer", "action": {"type": "click"}}
    warnings, evidence = index.examine(_input(_echo("call_1"), _echo("call_elsewhere"), computer), RESPONSES)
    assert warnings == [] and evidence["unknown"] == [] and evidence["matched"] == 1


# --- rewriting: ItemKeys and SequenceNumbers -----------------------------------------------------------------


def rewrite(body: bytes, names) -> tuple[bytes, dict]:
    rewriter = StreamRewriter(RESPONSES, inject=[n for n in names if n == "interleave"],
                              repair=[n for n in names if n != "interleave"])  # fmt: skip
    out = b"".join(rewriter.feed(body)) + b"".join(rewriter.finish())
    return out, rewriter.report()


def test_every_renumbered_sequence_number_is_counted():
    # SequenceNumbers.push 31
    events = [ADDED, args_delta('{"a": '), args_delta("1}"), COMPLETED]
    body = b"".join(
        f"event: {name}\ndata: {json.dumps({'type': name, **payload, 'sequence_number': 10 * n})}\n\n".encode()
        for n, (name, payload) in enumerate(events, 1)
    )
    out, report = rewrite(body, ["serialize"])
    assert report["edits"]["sequence_number"] == 3
    numbers = [
        json.loads(line[6:])["sequence_number"] for line in out.splitlines() if line.startswith(b"data: ")
    ]
    assert numbers == [10, 11, 12, 13]


def _events(*events: tuple[str, dict]) -> list[bytes]:
    return [f"event: {n}\ndata: {json.dumps({'type': n, **p})}\n\n".encode() for n, p in events]


def _item(kind: str, n: int, item: dict) -> tuple[str, dict]:
    return (f"response.output_item.{kind}", {"output_index": n, "item": item})


def _call_item(n: int) -> dict:
    return {
        "id": f"fc_{n}",
        "type": "function_call",
        "call_id": f"call_{n}",
        "name": f"f{n}",
        "arguments": "",
    }


MESSAGE_ITEM = {"id": "msg_1", "type": "message", "role": "assistant", "content": []}


@pytest.mark.parametrize(
    "middle",
    [
        ("response.function_call_arguments.delta", {"item_id": "fc_unknown", "delta": "x"}),
        _item("added", 5, MESSAGE_ITEM),
    ],
    ids=["delta-of-no-known-item", "message-item"],
)
def test_an_event_of_no_call_is_a_boundary_the_interleaver_does_not_move(middle):
    # ItemKeys.__call__ 15 (a delta no item names held as a fragment), 30, 31 (an item that is no call, or
    # whatever an item is, taken as a call's start)
    before = _events(
        _item("added", 0, _call_item(0)),
        _item("added", 1, _call_item(1)),
        ("response.function_call_arguments.delta", {"output_index": 0, "delta": "{"}),
        ("response.function_call_arguments.delta", {"output_index": 0, "delta": "}"}),
        ("response.function_call_arguments.delta", {"output_index": 1, "delta": "{"}),
    )
    after = _events(
        ("response.function_call_arguments.delta", {"output_index": 1, "delta": "}"}),
        COMPLETED,
    )
    (event,) = _events(middle)
    out, _ = rewrite(b"".join([*before, event, *after]), ["interleave"])
    position = out.index(event)
    assert sorted(out[:position].split(b"\n\n")) == sorted(b"".join(before).split(b"\n\n"))


def test_a_delta_whose_item_id_is_no_string_is_a_boundary_not_a_failure():
    # ItemKeys._key 12 (an item_id that is a list looked up in a dict)
    odd = ("response.function_call_arguments.delta", {"item_id": ["fc_0"], "delta": "x"})
    body = b"".join(
        _events(
            _item("added", 0, _call_item(0)),
            ("response.function_call_arguments.delta", {"output_index": 0, "delta": "{}"}),
            odd,
            COMPLETED,
        )
    )
    out, report = rewrite(body, ["interleave"])
    assert out == body and report["stopped"] is None


# === Responses over a WebSocket =============================================================================

RESPONSES_WS = "/v1/responses"


def ws_turn(wire: Wire, rid: str, call_ids, **extra) -> None:
    """The server's events of one response with a call per id, each with arguments {}."""
    wire.server({"type": "response.created", "response": {"id": rid}, **extra})
    for n, call_id in enumerate(call_ids):
        item = {"type": "function_call", "id": f"fc_{call_id}", "call_id": call_id, "name": "lookup"}
        wire.server({"type": "response.output_item.added", "output_index": n, "item": item, **extra})
        wire.server(
            {"type": "response.function_call_arguments.delta", "output_index": n, "delta": "{}", **extra}
        )
    wire.server({"type": "response.completed", "response": {"id": rid, "status": "completed"}, **extra})


def output(call_id: str) -> dict:
    return {"type": "function_call_output", "call_id": call_id, "output": "ok"}


@pytest.mark.parametrize("lane", [7, None], ids=["numeric-stream-id", "no-stream-id"])
def test_a_stream_id_that_is_no_string_is_no_lane_on_either_side(lane):
    # ResponsesSession.client 10, server 4
    wire = Wire(RESPONSES_WS)
    wire.client({"type": "response.create", "model": "m", "stream_id": lane})
    ws_turn(wire, "r1", ["c1"], stream_id=lane)
    (result,) = wire.finish()
    assert calls(result) == [("c1", "lookup", "{}")]


def test_server_events_of_a_lane_whose_create_was_not_seen_are_one_response():
    # ResponsesSession.server 53
    wire = Wire(RESPONSES_WS)
    ws_turn(wire, "r1", ["c1", "c2"], stream_id="lane-a")
    (result,) = wire.finish()
    assert result["response_id"] == "r1" and [c[0] for c in calls(result)] == ["c1", "c2"]


def test_a_create_checks_its_responses_calls_against_its_own_tools():
    # ResponsesSession.client 54, 57 (the create's body is the request)
    wire = Wire(RESPONSES_WS)
    tools = [{"type": "function", "name": "search", "parameters": {"type": "object"}}]
    wire.client({"type": "response.create", "model": "m", "tools": tools})
    ws_turn(wire, "r1", ["c1"])
    (result,) = wire.finish()
    assert [w["name"] for w in result["warnings"] if w["code"] == "undeclared-tool"] == ["lookup"]


def test_an_echoed_call_in_a_creates_input_answers_nothing():
    # ResponsesSession.client 27 (every input item's call_id read as an answer). (The settling by
    # previous_response_id, client 36-53, is tests/core/test_websocket_survivors.py's.)
    wire = Wire(RESPONSES_WS)
    wire.client({"type": "response.create", "model": "m"})
    ws_turn(wire, "r1", ["c1", "c2"])
    echo = {"type": "function_call", "call_id": "c2", "name": "lookup", "arguments": "{}"}
    create = {"type": "response.create", "previous_response_id": "r1", "input": [echo, output("c1")]}
    (settled,) = wire.client(create)
    assert settled["websocket"]["evidence"]["answered"] == ["c1"]
    assert [w["id"] for w in settled["warnings"] if w["code"] == "unanswered-call"] == ["c2"]


@pytest.mark.parametrize(
    "error, inner",
    [
        (
            {"error": {"code": "rate_limited", "message": "slow down"}},
            {"code": "rate_limited", "message": "slow down"},
        ),
        ({"code": "rate_limited", "message": "slow down"}, None),
    ],
    ids=["nested", "top-level"],
)
def test_an_error_with_no_response_running_is_the_connections_and_other_events_are_not(error, inner):
    # ResponsesSession.server 31 (which kind warns), 36, 37, 40, 41 (ws_message and error), 44, 45 (the
    # message shows the error), 48, 49
    wire = Wire(RESPONSES_WS)
    wire.server({"type": "codex.rate_limits", "rate_limits": {"primary": {"used_percent": 1}}})
    obj = {"type": "error", **error}
    wire.server(obj)
    assert wire.finish() == []
    (found,) = wire.connection.summary()["warnings"]
    shown = inner if inner is not None else obj
    assert (found["code"], found["ws_message"], found["error"]) == ("provider-error", 2, shown)
    assert found["message"] == f"message 2: provider error with no response running: {shown}"


# === Realtime ===============================================================================================

REALTIME = "/v1/realtime?model=gpt-realtime"


def rt(kind: str, **fields) -> dict:
    return {"type": kind, "event_id": f"ev_{kind}", **fields}


def test_a_realtime_text_delta_is_the_first_token_and_a_failed_end_names_its_event():
    # RealtimeDialect.obj_ops 14 (the text's event), 32 and _done 42 (the failure's event)
    wire = Wire(REALTIME)
    wire.server(rt("response.created", response={"id": "R1"}))
    wire.server(rt("response.output_text.delta", response_id="R1", delta="hi"))
    wire.server(rt("response.done", response={"id": "R1", "status": "failed"}))
    (result,) = wire.finish()
    assert result["timing"]["first_token_event"] == 2
    assert warning(result, "provider-error")["event"] == 3


def test_a_realtime_response_cut_short_is_named_by_its_created_event():
    # RealtimeDialect.obj_ops 43, 44, 47, 50, 54, 55, 58: no response.done came to name it
    wire = Wire(REALTIME)
    wire.server(rt("response.created", response={"id": "R1", "status": "in_progress"}))
    wire.server(rt("response.output_text.delta", response_id="R1", delta="hi"))
    (result,) = wire.finish()
    assert result["response_id"] == "R1" and not result["complete"]


def test_only_a_session_update_configures_the_realtime_tools():
    # RealtimeSession.client 6: another client message with a session object is not the session's config
    wire = Wire(REALTIME)
    tools = [{"type": "function", "name": "search"}]
    wire.client({"type": "transcription_session.update", "session": {"tools": tools}})
    wire.server(rt("response.created", response={"id": "R1"}))
    item = {"id": "item_1", "type": "function_call", "call_id": "k1", "name": "lookup", "arguments": ""}
    wire.server(rt("response.output_item.added", response_id="R1", output_index=0, item=item))
    wire.server(
        rt(
            "response.function_call_arguments.delta",
            response_id="R1",
            item_id="item_1",
            output_index=0,
            delta="{}",
        )
    )
    wire.server(rt("response.done", response={"id": "R1", "status": "completed"}))
    (result,) = wire.finish()
    assert calls(result) == [("k1", "lookup", "{}")] and "undeclared-tool" not in codes(result)


def test_a_late_event_of_a_realtime_response_already_ended_is_kept_as_a_response_of_its_own():
    # RealtimeSession.server 71, 72: only a second response.done of an ended response is dropped
    wire = Wire(REALTIME)
    wire.server(rt("response.created", response={"id": "R1"}))
    item = {"id": "item_1", "type": "function_call", "call_id": "k1", "name": "lookup", "arguments": ""}
    wire.server(rt("response.output_item.added", response_id="R1", output_index=0, item=item))
    wire.server(
        rt(
            "response.function_call_arguments.delta",
            response_id="R1",
            item_id="item_1",
            output_index=0,
            delta="{}",
        )
    )
    wire.server(rt("response.done", response={"id": "R1", "status": "completed"}))  # awaits the answer
    wire.server(rt("response.done", response={"id": "R1", "status": "completed"}))  # said twice: dropped
    wire.server(rt("response.output_text.delta", response_id="R1", delta="late"))  # a response again
    wire.server(rt("response.done", response={"status": "completed"}))  # names none: ends the running one
    results = wire.finish()
    assert [(r["response_id"], r["choices"][0]["text"] if r["choices"] else None) for r in results] == [
        (None, "late"),
        ("R1", None),
    ]
