"""The resource caps of one stream: calls per stream, argument characters per call, bytes analysed. Each
one hit gives its warning, keeps what came before it exactly, and holds the memory of a stream that
never ends; the hazard strategies obey the same caps, so they do not report a difference the caps made."""

from __future__ import annotations

import tracemalloc

import fake_provider
import pytest
from chat_flows import at_headers
from mitmproxy.test import taddons
from streams import call, choice, chunk, sse, tool_chunk

import addon as addon_module
from accumulator import StreamAccumulator, analyze
from accumulator.decoding import ContentEncoder


def codes(result: dict) -> list[str]:
    return [w["code"] for w in result["warnings"]]


def calls_of(result: dict) -> list[tuple]:
    return [(c["id"], c["name"], c["arguments"]) for c in result["choices"][0]["tool_calls"]]


def sequential(n: int, fragments: tuple[str, ...] = ('{"n": ', "1}")) -> bytes:
    events = []
    for k in range(n):
        events.append(tool_chunk(call(k, f"call_{k}", f"tool_{k}", fragments[0], type="function")))
        events += [tool_chunk(call(k, arguments=fragment)) for fragment in fragments[1:]]
    return sse(*events, chunk(choice(0, "tool_calls")))


def test_calls_beyond_the_cap_are_counted_not_rebuilt_and_their_fragments_are_no_orphans():
    result = analyze(sequential(5), max_calls=3)
    assert calls_of(result) == [(f"call_{k}", f"tool_{k}", '{"n": 1}') for k in range(3)]
    assert codes(result) == ["calls-cap"]
    (warning,) = result["warnings"]
    assert warning["severity"] == "warning" and warning["limit"] == 3
    # Two refused calls, each with its opening delta and one more fragment.
    assert result["stats"]["calls_dropped"] == 2 and result["stats"]["deltas_dropped"] == 4
    # Every strategy routes the first three calls as identity routing does, and drops the rest too.
    assert {v["verdict"] for v in result["compatibility"].values()} == {"ok"}


def test_under_the_calls_cap_nothing_changes():
    body = sequential(5)
    assert analyze(body, max_calls=5) == analyze(body)
    assert analyze(body)["stats"]["calls_dropped"] == 0


def test_the_calls_cap_counts_every_choice():
    events = [tool_chunk(call(0, f"c{k}", "f", "{}"), choice_index=k) for k in range(4)]
    events += [chunk(*(choice(k, "tool_calls") for k in range(4)))]
    result = analyze(sse(*events), max_calls=2)
    assert [len(c["tool_calls"]) for c in result["choices"]] == [1, 1, 0, 0]
    assert result["stats"]["calls_dropped"] == 2


def test_a_misrouting_strategy_still_breaks_under_the_calls_cap():
    # Interleaved calls: recency merges them, whatever the cap.
    body = sse(
        tool_chunk(call(0, "a", "first", '{"x": ', type="function")),
        tool_chunk(call(1, "b", "second", '{"y": ', type="function")),
        tool_chunk(call(0, arguments="1}")),
        tool_chunk(call(1, arguments="2}")),
        tool_chunk(call(2, "c", "third", "{}", type="function")),
        chunk(choice(0, "tool_calls")),
    )
    result = analyze(body, max_calls=2)
    assert calls_of(result) == [("a", "first", '{"x": 1}'), ("b", "second", '{"y": 2}')]
    assert result["compatibility"]["recency"]["verdict"] == "breaks"
    assert result["compatibility"]["index-only"]["verdict"] == "ok"


def test_arguments_beyond_the_cap_are_cut_and_the_call_says_so():
    fragments = ('{"text": "', "a" * 40, "b" * 40, '"}')
    result = analyze(sequential(2, fragments), max_argument_chars=30)
    expected = "".join(fragments)[:30]
    assert calls_of(result) == [("call_0", "tool_0", expected), ("call_1", "tool_1", expected)]
    assert [c["arguments_truncated"] for c in result["choices"][0]["tool_calls"]] == [True, True]
    # Cut arguments are not JSON, and that is the cap's doing: no invalid-arguments on top of it.
    assert codes(result) == ["arguments-cap", "arguments-cap"]
    assert {w["severity"] for w in result["warnings"]} == {"info"}
    assert {v["verdict"] for v in result["compatibility"].values()} == {"ok"}


def test_arguments_at_the_cap_are_whole():
    fragments = ('{"text": "', "a" * 10, '"}')
    result = analyze(sequential(1, fragments), max_argument_chars=len("".join(fragments)))
    assert result["choices"][0]["tool_calls"][0]["arguments_truncated"] is False
    assert codes(result) == []


def test_a_strategy_that_merges_two_calls_is_capped_like_identity_and_still_breaks():
    # Recency glues b's fragments onto a: the cap cuts both sides, and they still differ.
    body = sse(
        tool_chunk(call(0, "a", "first", '{"x": "11', type="function")),
        tool_chunk(call(1, "b", "second", '{"y": "22', type="function")),
        tool_chunk(call(0, arguments='111111111"}')),
        tool_chunk(call(1, arguments='222222222"}')),
        chunk(choice(0, "tool_calls")),
    )
    result = analyze(body, max_argument_chars=16)
    assert calls_of(result) == [("a", "first", '{"x": "111111111'), ("b", "second", '{"y": "222222222')]
    verdict = result["compatibility"]["recency"]
    assert verdict["verdict"] == "breaks"
    (misroute,) = [w for w in result["warnings"] if w["code"] == "recency-misroute"]
    assert all(len(c["arguments"]) <= 16 for c in misroute["would_build"])


def test_the_analysis_cap_stops_an_uncompressed_stream_and_counts_the_rest():
    body = sequential(200)
    cap = len(body) // 4
    result = analyze(body, max_decoded_bytes=cap)
    assert "decoded-size-cap" in codes(result)
    assert result["stats"]["bytes"] == len(body)
    assert 0 < len(result["choices"][0]["tool_calls"]) < 200
    # What came before the cap is exact.
    assert calls_of(result) == calls_of(analyze(body))[: len(calls_of(result))]


@pytest.mark.parametrize("encoding", [None, "gzip", "zstd"])
def test_a_body_of_the_analysis_cap_exactly_is_read_whole_one_byte_more_is_not(encoding):
    # The same boundary compressed or not: decoded-size-cap says bytes went unread, never at the cap.
    body = sequential(20)
    sent = body
    if encoding is not None:
        encoder = ContentEncoder(encoding)
        sent = encoder.encode(body) + encoder.finish()
    whole = analyze(sent, encoding=encoding, max_decoded_bytes=len(body))
    assert "decoded-size-cap" not in codes(whole) and calls_of(whole) == calls_of(analyze(body))
    cut = analyze(sent, encoding=encoding, max_decoded_bytes=len(body) - 1)
    (warning,) = [w for w in cut["warnings"] if w["code"] == "decoded-size-cap"]
    assert warning["limit"] == len(body) - 1


def endless(kind: str, nbytes: int):
    """The first ``nbytes`` (about) of the fake provider's never-ending Chat Completions stream."""
    total = 0
    for event in fake_provider.endless(kind):
        yield event
        total += len(event)
        if total >= nbytes:
            return


@pytest.mark.heavy
@pytest.mark.parametrize(
    ("kind", "caps", "check"),
    [
        ("endless-calls", {"max_calls": 100}, lambda r: r["stats"]["calls_dropped"] > 10_000),
        (
            "endless-arguments",
            {"max_argument_chars": 64 * 1024},
            lambda r: r["choices"][0]["tool_calls"][0]["arguments_truncated"],
        ),
    ],
)
def test_a_stream_that_never_ends_is_held_by_the_caps(kind, caps, check):
    # 24 MB of a stream that never ends: the memory stays at the caps, not at the bytes.
    accumulator = StreamAccumulator("openai-chat", **caps)
    tracemalloc.start()
    try:
        for event in endless(kind, 24 * 1024 * 1024):
            accumulator.feed(event)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    result = accumulator.finish()
    assert check(result)
    assert "truncated-stream" in codes(result)
    assert peak < 4 * 1024 * 1024, peak  # the cap's worth of calls or arguments, and every strategy's copy


def test_without_the_caps_the_same_stream_holds_its_bytes():
    # The control for the test above: the memory it measures is the one the caps hold.
    accumulator = StreamAccumulator("openai-chat", max_argument_chars=10**9)
    tracemalloc.start()
    try:
        for event in endless("endless-arguments", 8 * 1024 * 1024):
            accumulator.feed(event)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak > 6 * 1024 * 1024


def test_the_addon_passes_its_cap_options_to_the_stream():
    lens = addon_module.ToolcallLens()
    body = sequential(4, ('{"text": "', "x" * 50, '"}'))
    with taddons.context(lens) as tctx:
        tctx.configure(
            lens, toolcall_lens_max_calls=2, toolcall_lens_argument_cap=20, toolcall_lens_decoded_cap=10**6
        )
        flow = at_headers()
        flow.request.path = "/v1/chat/completions"
        flow.request.content = b'{"stream": true}'
        flow.response.headers["content-type"] = "text/event-stream"
        lens.responseheaders(flow)
        pieces = [body[i : i + 7] for i in range(0, len(body), 7)]
        assert all(flow.response.stream(piece) is piece for piece in pieces)
        lens.response(flow)
    result = flow.metadata["toolcall_lens"]
    assert len(result["choices"][0]["tool_calls"]) == 2
    assert all(c["arguments_truncated"] for c in result["choices"][0]["tool_calls"])
    assert {"calls-cap", "arguments-cap"} <= set(codes(result))


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("toolcall_lens_max_calls", 0),
        ("toolcall_lens_decoded_cap", 0),
        ("toolcall_lens_event_cap", 0),
        ("toolcall_lens_argument_cap", -1),
    ],
)
def test_cap_options_refuse_values_that_make_no_sense(option, value):
    from mitmproxy import exceptions

    lens = addon_module.ToolcallLens()
    with taddons.context(lens) as tctx, pytest.raises(exceptions.OptionsError, match=option):
        tctx.configure(lens, **{option: value})


def test_defaults_of_the_caps():
    lens = addon_module.ToolcallLens()
    with taddons.context(lens) as tctx:
        options = tctx.options
        assert (
            options.toolcall_lens_event_cap,
            options.toolcall_lens_decoded_cap,
            options.toolcall_lens_body_cap,
            options.toolcall_lens_max_calls,
            options.toolcall_lens_argument_cap,
        ) == (8 * 2**20, 64 * 2**20, 16 * 2**20, 1000, 2**20)


def test_a_decompression_bomb_is_decoded_piece_by_piece_never_held_whole():
    # 256 MiB of spaces after two events, gzip-compressed to a few hundred KiB, fed in 64 KiB chunks:
    # the decoded cap stops it at 64 MiB, and no decoded buffer near that size ever exists at once.
    plain = fake_provider.events("openai-chat", "sequential")
    body = b"".join(fake_provider.bomb_pieces(plain, "gzip", 256 * 2**20))
    accumulator = StreamAccumulator("openai-chat", encoding="gzip")
    tracemalloc.start()
    try:
        for start in range(0, len(body), 65536):
            accumulator.feed(body[start : start + 65536])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    result = accumulator.finish()
    assert "decoded-size-cap" in codes(result) and "oversized-event" in codes(result)
    assert len(body) < 2**20 and peak < 12 * 2**20, (len(body), peak)


def test_the_arguments_cap_warning_names_its_call_event_and_limit():
    fragments = ('{"text": "', "a" * 40, '"}')
    result = analyze(sequential(1, fragments), max_argument_chars=30)
    (warning,) = result["warnings"]
    # The call opens in event 1; its second fragment, in event 2, crosses the cap.
    assert {k: warning[k] for k in ("code", "event", "choice", "id", "limit")} == {
        "code": "arguments-cap",
        "event": 2,
        "choice": 0,
        "id": "call_0",
        "limit": 30,
    }
    assert warning["message"] == (
        "event 2: call call_0 (tool_0): arguments beyond 30 characters were not kept"
    )


def test_a_provider_error_says_the_message_the_provider_wrapped():
    from accumulator.assembly import error_text

    body = sse(chunk(choice(0, content="hi")), {"error": {"message": "upstream overloaded", "code": 502}})
    (warning,) = [w for w in analyze(body)["warnings"] if w["code"] == "provider-error"]
    assert warning["message"] == "event 2: provider error: upstream overloaded"
    assert warning["event"] == 2 and warning["error"] == {"message": "upstream overloaded", "code": 502}
    assert error_text({"error": {"message": "wrapped"}}) == "wrapped"
    assert error_text({"message": "flat"}) == "flat"
    assert error_text({"code": 7}) == '{"code":7}'
