"""The WebSocket watch's batches (toolcall_lens/websocket.py): with the event loop's call_soon and
call_later given, a known connection's messages are held and fed 32 at a time, or a moment after the
first of a batch that does not fill; the results are those of feeding message by message. The loop's
callbacks are captured here and run by hand, so what runs when is explicit."""

from __future__ import annotations

import json

from faults import Failing
from mitmproxy import websocket
from wsproto.frame_protocol import Opcode

from accumulator import Connection
from toolcall_lens.watch import HELD_CHUNKS
from toolcall_lens.websocket import FEED_AFTER, WebSocketWatch


def turn(n: int, calls: int = 2) -> list[tuple[bool, dict]]:
    create = {"type": "response.create", "model": "m"}
    if n > 1:  # it answers the previous turn's calls: that response settles
        outputs = [
            {"type": "function_call_output", "call_id": f"c{n - 1}_{i}", "output": "ok"} for i in range(calls)
        ]
        create |= {"previous_response_id": f"r{n - 1}", "input": outputs}
    out = [(True, create)]
    out.append((False, {"type": "response.created", "response": {"id": f"r{n}", "model": "m"}}))
    for i in range(calls):
        item = {"type": "function_call", "id": f"fc{n}_{i}", "call_id": f"c{n}_{i}", "name": f"tool_{i}"}
        out.append((False, {"type": "response.output_item.added", "output_index": i, "item": item}))
    for i in range(calls):
        delta = {"type": "response.function_call_arguments.delta", "output_index": i, "delta": "{}"}
        out.append((False, delta))
    out.append((False, {"type": "response.completed", "response": {"id": f"r{n}", "status": "completed"}}))
    return out


def messages(turns: int) -> list[websocket.WebSocketMessage]:
    out = []
    for n in range(1, turns + 1):
        for k, (from_client, obj) in enumerate(turn(n)):
            message = websocket.WebSocketMessage(Opcode.TEXT, from_client, json.dumps(obj).encode())
            message.timestamp = 1000.0 + n + k / 100
            out.append(message)
    return out


class Loop:
    """call_soon and call_later, captured."""

    def __init__(self) -> None:
        self.soon: list = []
        self.later: list[tuple[float, object]] = []
        self.settled: list[list[dict]] = []

    def watch(self) -> WebSocketWatch:
        return WebSocketWatch(
            Connection("openai-responses"),
            0,
            self.soon.append,
            lambda delay, callback: self.later.append((delay, callback)),
            self.settled.append,
        )

    def run_soon(self) -> None:
        while self.soon:
            self.soon.pop(0)()

    def run_later(self) -> None:
        while self.later:
            self.later.pop(0)[1]()


def test_held_messages_wait_for_a_full_batch_or_the_timer_and_give_the_same_results():
    sent = messages(12)  # 96 messages: three full batches
    loop = Loop()
    batched = loop.watch()
    plain = WebSocketWatch(Connection("openai-responses"), 0)
    settled_plain: list[dict] = []
    for n, message in enumerate(sent, 1):
        assert batched.message(message) == []  # nothing settles in the hook: it is held
        settled_plain += plain.message(message)
        if n % HELD_CHUNKS:
            assert loop.soon == []
        else:
            assert len(loop.soon) == 1  # the message that filled the batch scheduled it, once
            assert batched.connection.number == n - HELD_CHUNKS  # not fed yet: it runs after the hook
            loop.run_soon()
            assert batched.connection.number == n
    # One timer per batch, set by its first message, each after FEED_AFTER; the batches already ran.
    assert [delay for delay, _ in loop.later] == [FEED_AFTER] * 3
    loop.run_later()
    settled_batched = [r for batch in loop.settled for r in batch]
    assert settled_batched == settled_plain and settled_plain
    assert batched.finish(2000.0, None) == plain.finish(2000.0, None)
    assert batched.connection.results == plain.connection.results


def test_a_quiet_connections_last_messages_are_fed_by_the_timer():
    loop = Loop()
    watch = loop.watch()
    for message in messages(1):  # 7 messages: no batch fills
        watch.message(message)
    assert watch.connection.number == 0 and loop.soon == [] and len(loop.later) == 1
    loop.run_later()
    assert watch.connection.number == 7 and watch.held == []
    assert loop.settled == []  # a response with calls awaits the client's next message: nothing settled
    follow_up = websocket.WebSocketMessage(
        Opcode.TEXT,
        True,
        json.dumps(
            {
                "type": "response.create",
                "previous_response_id": "r1",
                "input": [
                    {"type": "function_call_output", "call_id": f"c1_{i}", "output": "ok"} for i in (0, 1)
                ],
            }
        ).encode(),
    )
    watch.message(follow_up)
    loop.run_later()
    [[settled]] = loop.settled
    assert settled["response_id"] == "r1" and settled["websocket"]["evidence"]["answered"] == ["c1_0", "c1_1"]


def test_the_end_feeds_what_is_held():
    loop = Loop()
    watch = loop.watch()
    for message in messages(1):
        watch.message(message)
    results = watch.finish(2000.0, {"code": 1000})
    assert [r["response_id"] for r in results] == ["r1"] and watch.held == []
    loop.run_later()  # the timer finds nothing left
    assert loop.settled == []


def test_a_connection_of_unknown_format_is_fed_as_it_comes_until_it_is_known():
    loop = Loop()
    watch = WebSocketWatch(Connection(None, path="/socket"), 0, loop.soon.append, None, loop.settled.append)
    create = websocket.WebSocketMessage(Opcode.TEXT, True, b'{"type": "response.create", "model": "m"}')
    watch.message(create)
    assert watch.connection.number == 1 and watch.connection.format == "openai-responses"


def test_a_failure_in_a_batch_is_recorded_and_reported_and_the_rest_is_not_fed():
    loop = Loop()
    watch = loop.watch()
    # Fault injection: nothing known makes the core raise.
    watch.connection = Failing(watch.connection, "message", MemoryError("no room"))
    for message in messages(1):
        watch.message(message)
    loop.run_later()
    assert loop.settled == [[]]  # told, so that the record shows the failure
    assert watch.failure == "MemoryError: no room"
    assert [w["code"] for w in watch.connection.warnings.to_list()] == ["internal-error"]
    assert watch.message(messages(1)[0]) == [] and watch.held == []
