"""Timing facts: per call (which events, when, how many deltas, interleaved or not) and per stream (first
byte, first event, first token, duration, events per second, longest gap, stalled)."""

from __future__ import annotations

import json

from streams import DATA, call, choice, chunk, codes, sse, tool_chunk, warning

from accumulator import StreamAccumulator, analyze
from accumulator.cli import main

PRODUCTION = (DATA / "production_interleaved.sse").read_bytes()
SEQUENTIAL = (DATA / "openai_chat_parallel.sse").read_bytes()


def events_of(body: bytes) -> list[bytes]:
    return [part + b"\n\n" for part in body.split(b"\n\n") if part]


def test_calls_record_their_events_deltas_and_interleaving():
    interleaved = analyze(PRODUCTION, "openai-chat")["choices"][0]["tool_calls"]
    assert [(c["first_event"], c["last_event"], c["deltas"], c["interleaved"]) for c in interleaved] == [
        (1, 5, 3, True),
        (2, 6, 3, True),
    ]
    sequential = analyze(SEQUENTIAL, "openai-chat")["choices"][0]["tool_calls"]
    assert [(c["first_event"], c["last_event"], c["deltas"], c["interleaved"]) for c in sequential] == [
        (2, 5, 4, False),
        (6, 9, 4, False),
    ]


def test_without_a_clock_only_event_order_is_known():
    result = analyze(PRODUCTION, "openai-chat")
    timing = result["timing"]
    assert timing["clock"] is False and timing["first_token_event"] == 1
    assert all(
        timing[k] is None for k in ("time_to_first_byte", "duration", "longest_gap", "events_per_second")
    )
    assert all(c["first_at"] is None for c in result["choices"][0]["tool_calls"])


def test_with_a_clock_the_stream_is_timed():
    # Request sent at t=100; events arrive one per second from t=100.5, with one 12 s silence.
    body = sse(
        chunk(choice(0, role="assistant")),
        tool_chunk(call(0, "a", "f", "")),
        tool_chunk(call(0, arguments='{"x": ')),
        tool_chunk(call(0, arguments="1}")),
        chunk(choice(0, "tool_calls")),
    )
    times = [100.5, 101.5, 102.5, 114.5, 115.5, 116.0]
    accumulator = StreamAccumulator("openai-chat", started_at=100.0, stall_seconds=10)
    for event, at in zip(events_of(body), times, strict=True):
        accumulator.feed(event, at)
    result = accumulator.finish(116.5)
    timing = result["timing"]
    assert timing["clock"] is True
    assert timing["time_to_first_byte"] == 0.5 and timing["time_to_first_event"] == 0.5
    assert timing["time_to_first_token"] == 1.5 and timing["first_token_event"] == 2
    assert timing["duration"] == 16.5
    assert timing["longest_gap"] == 12.0 and timing["longest_gap_after_event"] == 3
    assert timing["events_per_second"] == round(6 / 15.5, 3)
    (tool_call,) = result["choices"][0]["tool_calls"]
    assert (tool_call["first_at"], tool_call["last_at"]) == (1.0, 14.0)  # from the first event
    stalled = warning(result, "stalled")
    assert stalled["severity"] == "info" and stalled["after_event"] == 3 and stalled["seconds"] == 12.0


def test_no_stall_below_the_threshold_or_without_one():
    for threshold in (20, None):
        accumulator = StreamAccumulator("openai-chat", started_at=0.0, stall_seconds=threshold)
        for n, event in enumerate(events_of(SEQUENTIAL)):
            accumulator.feed(event, 1.0 + 12 * n)
        assert "stalled" not in codes(accumulator.finish())


def test_events_in_one_chunk_have_no_gap_between_them():
    accumulator = StreamAccumulator("openai-chat", started_at=0.0, stall_seconds=1)
    accumulator.feed(PRODUCTION, 5.0)  # everything at once, however long before it the request went
    result = accumulator.finish(5.0)
    assert result["timing"]["longest_gap"] is None and "stalled" not in codes(result)
    assert result["timing"]["time_to_first_byte"] == 5.0


def test_the_cli_report_shows_per_call_event_order(capsys):
    assert main([str(DATA / "production_interleaved.sse")]) == 1
    out = capsys.readouterr().out
    assert "3 delta(s), events 1 to 5, INTERLEAVED with another call" in out
    assert main([str(DATA / "production_interleaved.sse"), "--json"]) == 1
    (result,) = json.loads(capsys.readouterr().out)["results"]
    assert result["timing"]["clock"] is False
