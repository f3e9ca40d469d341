"""The test bench on WebSocket messages (accumulator.rewrite.messages): the stream rewriter on one event
per message, a fresh one per response, and what cannot apply to whole messages."""

from __future__ import annotations

import json

from accumulator import Connection
from accumulator.rewrite.messages import MessageRewriter, message_skip_reason


def response(rid: str, names=("a", "b")) -> list[bytes]:
    """One Responses response, its calls one after the other (no interleaving)."""
    events = [{"type": "response.created", "response": {"id": rid}}]
    for i, name in enumerate(names):
        item = {"type": "function_call", "id": f"fc{i}", "call_id": f"{rid}-{i}", "name": name}
        events.append({"type": "response.output_item.added", "output_index": i, "item": item})
        for fragment in ('{"n": ', f"{i}", "}"):
            events.append(
                {"type": "response.function_call_arguments.delta", "output_index": i, "delta": fragment}
            )
        events.append({"type": "response.output_item.done", "output_index": i, "item": item})
    events.append({"type": "response.completed", "response": {"id": rid, "status": "completed"}})
    return [json.dumps(e).encode() for e in events]


def run(rewriter: MessageRewriter, messages: list[bytes], starts=("response.created",)) -> list[bytes]:
    out = []
    for message in messages:
        if json.loads(message).get("type") in starts:
            out += rewriter.start_response()
        out += rewriter.feed(message)
    return out + rewriter.finish()


def order(messages) -> list[int]:
    return [
        json.loads(m)["output_index"]
        for m in messages
        if json.loads(m).get("type") == "response.function_call_arguments.delta"
    ]


def test_interleave_reorders_within_each_response_and_keeps_every_message():
    rewriter = MessageRewriter("openai-responses", inject=["interleave"])
    messages = response("r1") + response("r2")
    out = run(rewriter, messages)
    assert sorted(out) == sorted(messages) and out != messages
    first, second = out[: len(out) // 2], out[len(out) // 2 :]
    assert order(first) == [0, 1, 0, 1, 0, 1] and order(second) == [0, 1, 0, 1, 0, 1]
    assert json.loads(first[-1])["type"] == "response.completed"  # nothing crosses into the next response
    assert rewriter.report()["responses"] == 2 and rewriter.report()["calls_reordered"] == 4


def test_the_client_view_of_the_rewritten_messages_breaks_recency_with_the_same_calls():
    rewriter = MessageRewriter("openai-responses", inject=["interleave"])
    upstream, client = Connection("openai-responses"), Connection("openai-responses")
    messages = response("r1")
    for message in messages:
        upstream.message(False, message)
    for message in run(rewriter, messages):
        client.message(False, message)
    (up,), (got,) = upstream.finish(), client.finish()
    calls = lambda result: [(c["id"], c["name"], c["arguments"]) for c in result["choices"][0]["tool_calls"]]
    assert calls(got) == calls(up) and len(calls(up)) == 2
    assert up["compatibility"]["recency"]["verdict"] == "ok"
    assert got["compatibility"]["recency"]["verdict"] == "breaks"


def test_a_message_with_a_carriage_return_or_before_any_response_passes_as_it_came():
    rewriter = MessageRewriter("openai-responses", inject=["interleave"])
    assert rewriter.feed(b'{"type": "codex.rate_limits"}') == [b'{"type": "codex.rate_limits"}']
    rewriter.start_response()
    odd = b'{"type":\r\n"response.in_progress"}'
    assert rewriter.feed(odd) == [odd]
    multi = b'{\n"type": "response.in_progress"\n}'
    assert rewriter.feed(multi) == [multi]  # its lines go as SSE data lines and come back joined


def test_what_applies_to_whole_messages():
    assert message_skip_reason("openai-responses", "interleave") is None
    assert message_skip_reason("openai-realtime", "serialize") is None
    assert "whole" in message_skip_reason("openai-responses", "rechunk")
    assert "output_item.added" in message_skip_reason("openai-realtime", "split-names")
    assert "whole" in message_skip_reason("gemini-live", "interleave")
    rewriter = MessageRewriter("gemini-live", inject=["interleave"])
    assert not rewriter.applies and rewriter.report()["skipped"][0]["name"] == "interleave"


def interleaved(rid: str) -> list[bytes]:
    return run(MessageRewriter("openai-responses", inject=["interleave"]), response(rid))


def test_serialize_repairs_interleaved_messages_and_the_record_counts_every_message():
    rewriter = MessageRewriter("openai-responses", repair=["serialize"])
    messages = [b'{"type": "codex.rate_limits"}', *interleaved("r1"), *interleaved("r2")]
    out = run(rewriter, messages)
    assert order(out) == [0, 0, 0, 1, 1, 1] * 2 and sorted(out) == sorted(messages)
    report = rewriter.report()
    assert report["repair"] == ["serialize"] and report["inject"] == [] and report["skipped"] == []
    assert report["responses"] == 2 and report["messages_in"] == len(messages) == report["messages_out"]
    assert report["calls_reordered"] >= 2


def test_what_does_not_apply_is_skipped_and_the_rest_still_applies():
    rewriter = MessageRewriter("openai-responses", inject=["rechunk", "interleave"], repair=["serialize"])
    report = rewriter.report()
    assert (report["inject"], report["repair"]) == (["interleave"], ["serialize"])
    assert [entry["name"] for entry in report["skipped"]] == ["rechunk"]
    assert report["format"] == "openai-responses"


def test_the_call_cap_reaches_each_responses_rewriter():
    three = response("r1", names=("a", "b", "c"))
    capped = run(MessageRewriter("openai-responses", inject=["interleave"], max_calls=2), three)
    uncapped = run(MessageRewriter("openai-responses", inject=["interleave"]), three)
    assert order(uncapped) == [0, 1, 2] * 3
    # The third call passes the cap: the two held are released as they were, and the rest as it comes.
    assert order(capped) != order(uncapped) and sorted(capped) == sorted(three)
    assert order(capped)[-3:] == [2, 2, 2]
