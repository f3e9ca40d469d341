"""The addon with mitmproxy's own test harness (taddons, tflow): detection, passthrough, annotations."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import re

import pytest
from chat_flows import at_headers
from faults import Failing
from mitmproxy import exceptions, http
from mitmproxy import io as mio
from mitmproxy.addons import errorcheck
from mitmproxy.test import taddons, tflow
from streams import DATA, call, chat_message, choice, chunk, core_part, sse, tool_chunk, without_timing

import addon as addon_module
from accumulator import StreamAccumulator, analyze
from toolcall_lens.loglines import BURST
from toolcall_lens.watch import HELD_CHUNKS

PRODUCTION = (DATA / "production_interleaved.sse").read_bytes()
CLEAN = (DATA / "openai_chat_parallel.sse").read_bytes()
REQUEST = json.loads((DATA / "production_request.json").read_text())


def llm_flow(
    path: str = "/v1/chat/completions",
    content_type: str | None = "text/event-stream; charset=utf-8",
    request: dict | None = None,
    host: str = "api.openai.com",
):
    flow = at_headers()
    flow.request.method = "POST"
    flow.request.host = host
    flow.request.path = path
    flow.request.content = json.dumps(request if request is not None else REQUEST).encode()
    del flow.response.headers["content-length"]
    if content_type is None:
        flow.response.headers.pop("content-type", None)
    else:
        flow.response.headers["content-type"] = content_type
    return flow


def pieces(body: bytes, size: int = 41) -> list[bytes]:
    return [body[i : i + size] for i in range(0, len(body), size)]


def stream_through(lens, flow, body: bytes | list[bytes], end: str = "response") -> list[bytes]:
    lens.responseheaders(flow)
    out = []
    if callable(flow.response.stream):
        for piece in pieces(body) if isinstance(body, bytes) else body:
            out.append(flow.response.stream(piece))
        out.append(flow.response.stream(b""))
    getattr(lens, end)(flow)
    return out


@pytest.fixture
def lens():
    lens = addon_module.ToolcallLens()
    with taddons.context(lens):
        yield lens


def test_stream_callable_returns_every_chunk_unchanged_and_annotates(lens):
    flow = llm_flow()
    sent = pieces(PRODUCTION)
    received = stream_through(lens, flow, sent)
    assert all(a is b for a, b in zip(received, sent, strict=False)) and len(received) == len(sent) + 1
    assert received[-1] == b""
    result = flow.metadata["toolcall_lens"]
    # What the addon adds to the core's result: the cost and the session (tests/frontdoors/test_sessions_and_cost.py).
    assert without_timing(core_part(result)) == without_timing(analyze(PRODUCTION, request=REQUEST))
    assert result["session"]["turn"] == 1 and result["cost"] is None
    assert result["timing"]["clock"] is True and result["timing"]["time_to_first_byte"] is not None
    assert [c["name"] for c in result["choices"][0]["tool_calls"]] == ["search_circulars", "get_user_profile"]
    assert flow.comment == (
        "openai-chat gpt-test: 2 calls: search_circulars, get_user_profile | warning: recency-misroute"
    )
    assert flow.marked == ":warning:"
    assert flow.response.raw_content == PRODUCTION
    assert lens.watches == {}  # per-flow state released


def test_clean_stream_is_annotated_but_not_marked(lens):
    flow = llm_flow(request={"model": "gpt-4.1", "stream": True})
    stream_through(lens, flow, CLEAN)
    assert flow.metadata["toolcall_lens"]["warnings"] == []
    assert flow.comment == "openai-chat gpt-4.1-2025-04-14: 2 calls: get_weather, get_time"
    assert not flow.marked


def test_info_warnings_alone_leave_the_flow_unmarked(lens, caplog):
    caplog.set_level(logging.INFO, logger="toolcall_lens")
    with taddons.context(lens) as tctx:
        tctx.configure(lens, toolcall_lens_body_cap=100)  # a body-truncated note, of severity info
        flow = llm_flow(request={"model": "gpt-4.1", "stream": True})
        stream_through(lens, flow, CLEAN)
    assert [(w["code"], w["severity"]) for w in flow.metadata["toolcall_lens"]["warnings"]] == [
        ("body-truncated", "info")
    ]
    assert not flow.marked
    assert [r.levelno for r in caplog.records if r.name == "toolcall_lens"] == [logging.INFO]


@pytest.mark.parametrize(
    "path",
    [
        "/v1/chat/completions",
        "/openai/deployments/gpt-4o-prod/chat/completions?api-version=2024-10-21",
        "/api/v1/chat/completions",
        "/v1beta/openai/chat/completions",
        "/openai/v1/chat/completions",
        "/chat/completions",
    ],
)
def test_chat_completions_paths_are_detected(lens, path):
    flow = llm_flow(path=path)
    lens.responseheaders(flow)
    assert isinstance(flow.response.stream, addon_module.StreamWatch)


@pytest.mark.parametrize(
    "path,content_type,request_body",
    [
        ("/v1/embeddings", "application/json", {}),
        ("/health", "text/plain", {}),
        ("/v1/chat/completions", "application/json", {"stream": False}),  # read in `response`, not streamed
        ("/v1/chat/completions", None, {"stream": False}),
        ("/v1/chat/completions", "text/plain", {}),
    ],
)
def test_everything_else_gets_no_stream_callable(lens, path, content_type, request_body):
    flow = llm_flow(path=path, content_type=content_type, request=request_body)
    lens.responseheaders(flow)
    assert not flow.response.stream
    assert lens.watches == {}


def test_stream_on_an_unknown_path_is_recognised_from_its_first_events(lens):
    flow = llm_flow(path="/gateway/llm/stream", request={"model": "m"})
    stream_through(lens, flow, PRODUCTION)
    result = flow.metadata["toolcall_lens"]
    assert result["format"] == "openai-chat" and "recency-misroute" in flow.comment


def test_non_llm_stream_on_an_unknown_path_passes_unchanged_and_unannotated(lens):
    flow = llm_flow(path="/notifications", request={})
    body = b"".join(b'event: tick\ndata: {"n": %d}\n\n' % n for n in range(50))
    sent = pieces(body)
    received = stream_through(lens, flow, sent)
    assert all(a is b for a, b in zip(received, sent, strict=False))
    assert "toolcall_lens" not in flow.metadata and not flow.comment and not flow.marked
    assert flow.response.raw_content == body  # kept, as mitmproxy would have without the addon
    assert lens.watches == {}


@pytest.mark.parametrize("encoding", ["gzip", "br", "zstd", "deflate"])
def test_compressed_stream_is_decoded_for_analysis_only(lens, encoding):
    from mitmproxy.net.encoding import encode

    flow = llm_flow()
    flow.response.headers["content-encoding"] = encoding
    wire = encode(PRODUCTION, encoding)
    sent = pieces(wire, 17)
    received = stream_through(lens, flow, sent)
    assert all(a is b for a, b in zip(received, sent, strict=False))  # the client gets the compressed bytes
    assert flow.response.raw_content == wire
    result = flow.metadata["toolcall_lens"]
    assert [c["arguments"] for c in result["choices"][0]["tool_calls"]] == [
        '{"query": "RBI circulars"}',
        '{"user_id": "u123"}',
    ]
    assert [w["code"] for w in result["warnings"]] == ["recency-misroute"]


def test_unlabelled_response_is_a_stream_when_the_request_asked_for_one(lens):
    flow = llm_flow(content_type=None, request={"model": "x", "stream": True})
    stream_through(lens, flow, CLEAN)
    assert flow.metadata["toolcall_lens"]["choices"][0]["tool_calls"]


def test_non_llm_flow_is_left_alone(lens):
    flow = tflow.tflow(resp=True)
    before = flow.get_state()
    lens.responseheaders(flow)
    lens.response(flow)
    assert flow.get_state() == before
    assert "toolcall_lens" not in flow.metadata and not flow.comment and not flow.marked


def test_host_filter(lens):
    with taddons.context(lens) as tctx:
        tctx.configure(lens, toolcall_lens_hosts=["*.openai.azure.com"])
        flow = llm_flow(host="api.openai.com")
        lens.responseheaders(flow)
        assert not flow.response.stream
        flow = llm_flow(host="myres.openai.azure.com")
        lens.responseheaders(flow)
        assert callable(flow.response.stream)


def test_host_filter_matches_the_host_the_user_sees(lens):
    # Transparent mode: the connection's address is an IP; the Host header names the service.
    with taddons.context(lens) as tctx:
        tctx.configure(lens, toolcall_lens_hosts=["*.openai.azure.com"])
        flow = llm_flow(host="10.1.2.3")
        flow.request.headers["host"] = "myres.openai.azure.com"
        assert flow.request.pretty_host == "myres.openai.azure.com" != flow.request.host
        lens.responseheaders(flow)
        assert callable(flow.response.stream)


def test_non_streamed_json_response_is_summarised(lens):
    flow = llm_flow(content_type="application/json", request={"model": "m", "stream": False, "tools": []})
    flow.response.content = chat_message(
        [("c1", "a", "{}"), ("c2", "b", '{"x":1}')], model="gpt-4.1", usage={"total_tokens": 3}
    )
    lens.responseheaders(flow)
    assert not flow.response.stream
    lens.response(flow)
    result = flow.metadata["toolcall_lens"]
    assert result["streamed"] is False and result["complete"] is True
    assert [(c["id"], c["name"], c["arguments"]) for c in result["choices"][0]["tool_calls"]] == [
        ("c1", "a", "{}"),
        ("c2", "b", '{"x":1}'),
    ]
    # The request declared no tools: both calls are undeclared. No hazard strategy runs.
    assert [w["code"] for w in result["warnings"]] == ["undeclared-tool", "undeclared-tool"]
    assert flow.comment.startswith("openai-chat gpt-4.1 (not streamed): 2 calls: a, b")


def test_client_abort_after_done_is_complete(lens):
    # The sync openai SDK closes right after [DONE]: mitmproxy reports "Client disconnected."
    flow = llm_flow(request={"model": "m", "stream": True})
    stream_through(lens, flow, CLEAN, end="error")
    result = flow.metadata["toolcall_lens"]
    assert result["complete"] is True and result["warnings"] == []
    assert flow.response.raw_content == CLEAN


def test_abort_mid_stream_is_truncated(lens):
    flow = llm_flow()
    cut = PRODUCTION[: PRODUCTION.index(b"circulars")]
    stream_through(lens, flow, cut, end="error")
    result = flow.metadata["toolcall_lens"]
    assert result["complete"] is False
    assert "truncated-stream" in [w["code"] for w in result["warnings"]]
    assert "incomplete" in flow.comment and flow.marked
    assert lens.watches == {}


def test_chunks_fed_in_batches_keep_each_ones_arrival_time(lens, monkeypatch):
    # Far more chunks than the watch holds, arriving 10 ms apart with a 5 s silence before chunk 150, no
    # live updates: the flow's result is the core's fed each chunk at its own arrival time, timing and all.
    sent = pieces(PRODUCTION, 7)
    assert len(sent) > 4 * HELD_CHUNKS
    times = [1000.0 + 0.01 * n + (5.0 if n >= 150 else 0.0) for n in range(len(sent))]
    now = [999.0]
    monkeypatch.setattr(addon_module.time, "time", lambda: now[0])
    with taddons.context(lens) as tctx:
        tctx.configure(lens, toolcall_lens_live_updates=0)
        flow = llm_flow()
        lens.responseheaders(flow)
        for piece, now[0] in zip(sent, times, strict=True):
            flow.response.stream(piece)
            assert len(lens.watches[flow.id].held) < HELD_CHUNKS  # no event loop here: fed as it fills
        now[0] += 0.01
        flow.response.stream(b"")
        lens.response(flow)
    result = flow.metadata["toolcall_lens"]
    started = flow.request.timestamp_end
    expected = StreamAccumulator("openai-chat", request=REQUEST, started_at=started, stall_seconds=10)
    for piece, at in zip(sent, times, strict=True):
        expected.feed(piece, at)
    expected = expected.finish(now[0])
    assert result["timing"] == expected["timing"] and 5 < result["timing"]["longest_gap"] < 6
    assert result["choices"] == expected["choices"]
    assert [c["last_at"] for c in result["choices"][0]["tool_calls"]] != [None, None]


class Updates:
    """Records the flows mitmweb is told to show again (the update hook)."""

    def __init__(self) -> None:
        self.flows: list = []

    def update(self, flows) -> None:
        self.flows += flows


def test_a_live_update_sees_every_chunk_that_came(monkeypatch):
    clock = iter(1000.0 + 0.01 * n for n in range(10_000))
    monkeypatch.setattr(addon_module.time, "time", lambda: next(clock))
    lens, updates = addon_module.ToolcallLens(), Updates()
    with taddons.context(lens, updates) as tctx:
        tctx.configure(lens, toolcall_lens_live_updates=4)  # every 0.25 s: every 25th chunk here
        flow = llm_flow()
        lens.responseheaders(flow)
        seen, comments = [], []
        for n, piece in enumerate(pieces(PRODUCTION, 3), 1):
            before = flow.metadata.get("toolcall_lens_live")
            flow.response.stream(piece)
            live = flow.metadata.get("toolcall_lens_live")
            if live is not before:
                seen.append((n, live["bytes"]))
                comments.append(flow.comment)
        flow.response.stream(b"")
        lens.response(flow)
    assert len(seen) > 3
    assert all(nbytes == min(3 * n, len(PRODUCTION)) for n, nbytes in seen), seen
    assert updates.flows == [flow] * len(seen)  # mitmweb told to show each update
    # What the flow list shows meanwhile: the events so far, then the calls by name as they appear.
    assert comments[0] == "openai-chat ?: streaming, 0 events"  # no event read yet: no model either
    assert re.fullmatch(
        r"openai-chat gpt-test: streaming, \d+ events, 2 call\(s\) so far: search_circulars, get_user_profile",
        comments[-1],
    ), comments


def test_a_full_batch_is_fed_on_the_event_loops_next_turn(monkeypatch):
    later = []  # what the watch asked the loop to run after the current chunk is on its way
    accumulator = StreamAccumulator("openai-chat", request=REQUEST)
    watch = addon_module.StreamWatch(accumulator, "openai-chat", 1 << 20, defer=later.append)
    sent = pieces(PRODUCTION, 7)
    for n, piece in enumerate(sent, 1):
        assert watch(piece) is piece
        fed = accumulator.snapshot()["bytes"]
        if n % HELD_CHUNKS:
            assert not later
            continue
        assert len(later) == 1 and fed == 7 * (n - HELD_CHUNKS)  # the batch waits for the loop
        later.pop()()
        assert watch.held == [] and accumulator.snapshot()["bytes"] == 7 * n
    assert 0 < len(watch.held) < HELD_CHUNKS and not later  # the rest is fed at the end
    result, body = watch.finish()
    assert body == PRODUCTION and without_timing(result) == without_timing(
        analyze(PRODUCTION, request=REQUEST)
    )
    # A loop slow to come back is asked once; the batch grows until it runs.
    watch = addon_module.StreamWatch(StreamAccumulator("openai-chat"), "openai-chat", 0, defer=later.append)
    for piece in sent[: 3 * HELD_CHUNKS]:
        watch(piece)
    assert len(later) == 1 and len(watch.held) == 3 * HELD_CHUNKS
    later.pop()()
    assert watch.held == [] and watch.accumulator.snapshot()["bytes"] == 7 * 3 * HELD_CHUNKS

    def broken_feed(self, data, now=None):
        raise RuntimeError("core bug")

    monkeypatch.setattr(StreamAccumulator, "feed", broken_feed)
    watch = addon_module.StreamWatch(
        StreamAccumulator("openai-chat"), "openai-chat", 1 << 20, defer=later.append
    )
    for piece in sent[:HELD_CHUNKS]:
        watch(piece)
    later.pop()()  # raises nothing on the loop: the failure is the flow's
    assert "core bug" in watch.failure
    result, _ = watch.finish()
    assert [w["code"] for w in result["warnings"]] == ["internal-error"]


def test_internal_failure_never_reaches_the_traffic(lens, monkeypatch):
    calls = []

    def broken_feed(self, data, now=None):
        calls.append(data)
        raise RuntimeError("core bug")

    monkeypatch.setattr(StreamAccumulator, "feed", broken_feed)
    flow = llm_flow()
    sent = pieces(PRODUCTION)
    received = stream_through(lens, flow, sent)
    assert all(a is b for a, b in zip(received, sent, strict=False))  # every chunk returned, unchanged
    assert len(calls) == 1  # analysis of this flow stopped at the first failure
    result = flow.metadata["toolcall_lens"]
    assert [w["code"] for w in result["warnings"]] == ["internal-error"]
    assert "core bug" in result["warnings"][0]["message"]
    assert flow.response.raw_content == PRODUCTION  # the body is still kept
    assert flow.marked


def test_body_cap_keeps_a_prefix_and_says_so(lens):
    with taddons.context(lens) as tctx:
        tctx.configure(lens, toolcall_lens_body_cap=100)
        flow = llm_flow()
        stream_through(lens, flow, PRODUCTION)
    assert flow.response.raw_content == PRODUCTION[:100]
    result = flow.metadata["toolcall_lens"]
    truncated = [w for w in result["warnings"] if w["code"] == "body-truncated"]
    assert truncated and truncated[0]["severity"] == "info" and truncated[0]["seen"] == len(PRODUCTION)
    # The analysis saw every byte all the same.
    assert result["choices"][0]["tool_calls"][1]["arguments"] == '{"user_id": "u123"}'


def watched(lens, tctx, cap: int):
    """A new LLM flow past the responseheaders hook, its body capped at ``cap``: (the flow, its callable)."""
    tctx.configure(lens, toolcall_lens_body_cap=cap)
    flow = llm_flow()
    lens.responseheaders(flow)
    return flow, flow.response.stream


@pytest.mark.parametrize("cap", [1 << 20, 1000, 7 * HELD_CHUNKS])
def test_a_long_bodys_chunks_are_kept_a_batch_a_piece_and_come_back_whole(lens, cap):
    # Thousands of small chunk objects held to a flow's end cost the proxy ~1 us an event, and keeping each
    # as it came cost the callable a third of its time: the body keeps each batch as one piece, joined
    # as the batch is fed, and is the same body. The callable itself holds no more than a batch.
    with taddons.context(lens) as tctx:
        flow, watch = watched(lens, tctx, cap)
        sent = pieces(PRODUCTION, 7)
        for piece in sent:
            assert watch(piece) is piece
            assert len(watch.held) < HELD_CHUNKS  # no event loop here: fed as it fills
        assert len(watch.pieces) == min(len(sent) // HELD_CHUNKS, -(-cap // (7 * HELD_CHUNKS))) > 0
        watch(b"")
        lens.response(flow)
    assert flow.response.raw_content == PRODUCTION[:cap]
    assert flow.metadata["toolcall_lens"]["choices"][0]["tool_calls"][1]["arguments"] == '{"user_id": "u123"}'


def test_a_body_is_still_kept_whole_after_the_analysis_failed(lens):
    # Once the analysis fails, the chunks are no longer fed, and the body is still kept, in order, a batch
    # at a time: the chunks held when it failed first, then every later one.
    with taddons.context(lens) as tctx:
        flow, watch = watched(lens, tctx, 1 << 20)
        sent = pieces(PRODUCTION, 7)
        half = len(sent) // 2
        for piece in sent[:half]:
            watch(piece)
        assert watch.held  # some held, not fed yet
        watch.failure = "a fault of the analysis"
        for piece in sent[half:]:
            assert watch(piece) is piece
            assert len(watch.held) < HELD_CHUNKS
        lens.response(flow)
    assert flow.response.raw_content == PRODUCTION
    result = flow.metadata["toolcall_lens"]
    assert result["stats"]["bytes"] == len(PRODUCTION) and "a fault of the analysis" in str(
        result["warnings"]
    )


class FeedFails:
    """An accumulator whose feed raises at its ``after``-th chunk (what else it does is the real one's)."""

    def __init__(self, real, after: int) -> None:
        self.real, self.left = real, after

    def feed(self, chunk: bytes, now: float) -> None:
        self.left -= 1
        if not self.left:
            raise ValueError("a fault of the core")
        self.real.feed(chunk, now)

    def __getattr__(self, name: str):
        return getattr(self.real, name)


def test_a_feed_that_fails_half_way_through_a_batch_leaves_the_body_whole_and_kept_once(lens):
    # The batch is kept in the body before it is fed: a feed that raises in its middle ends the analysis,
    # and the body is still every byte, once, in order.
    with taddons.context(lens) as tctx:
        flow, watch = watched(lens, tctx, 1 << 20)
        watch.accumulator = FeedFails(watch.accumulator, HELD_CHUNKS + 5)
        for piece in pieces(PRODUCTION, 7):
            assert watch(piece) is piece
        assert watch.failure == "ValueError: a fault of the core"
        lens.response(flow)
    assert flow.response.raw_content == PRODUCTION
    assert "a fault of the core" in str(flow.metadata["toolcall_lens"]["warnings"])


def test_event_cap_option_reaches_the_core(lens):
    body = sse(
        tool_chunk(call(0, "a", "f", "{")),
        tool_chunk(call(0, arguments="x" * 3000)),
        tool_chunk(call(0, arguments="}")),
        chunk(choice(0, "tool_calls")),
    )
    with taddons.context(lens) as tctx:
        tctx.configure(lens, toolcall_lens_event_cap=1000)
        flow = llm_flow()
        stream_through(lens, flow, body)
    assert "oversized-event" in [w["code"] for w in flow.metadata["toolcall_lens"]["warnings"]]


def test_decoded_cap_option_reaches_the_core(lens):
    with taddons.context(lens) as tctx:
        tctx.configure(lens, toolcall_lens_decoded_cap=500)
        flow = llm_flow()
        stream_through(lens, flow, PRODUCTION)
    (cap,) = [w for w in flow.metadata["toolcall_lens"]["warnings"] if w["code"] == "decoded-size-cap"]
    assert cap["limit"] == 500 < len(PRODUCTION)


def test_strategies_option_runs_only_the_strategies_named(lens):
    with taddons.context(lens) as tctx:
        tctx.configure(lens, toolcall_lens_strategies=["index-only", "last-wins"])
        flow = llm_flow()
        stream_through(lens, flow, PRODUCTION)
    result = flow.metadata["toolcall_lens"]
    assert list(result["compatibility"]) == ["index-only", "last-wins"]
    # recency, the one strategy this stream breaks, did not run: nothing to warn of, nothing marked
    assert result["warnings"] == [] and not flow.marked


def test_an_unknown_strategy_is_refused_when_set(lens):
    with (
        taddons.context(lens) as tctx,
        pytest.raises(exceptions.OptionsError, match="toolcall_lens_strategies"),
    ):
        tctx.configure(lens, toolcall_lens_strategies=["recency", "no-such-strategy"])


@pytest.mark.parametrize(
    "option,value",
    [("toolcall_lens_body_cap", -1), ("toolcall_lens_event_cap", 0), ("toolcall_lens_hosts", ["bad host"])],
)
def test_bad_option_values_are_refused(lens, option, value):
    with taddons.context(lens) as tctx, pytest.raises(exceptions.OptionsError):
        tctx.configure(lens, **{option: value})


def test_an_option_name_with_the_prefix_that_is_not_ours_is_refused_with_the_closest_name():
    lens = addon_module.ToolcallLens()
    with taddons.context(lens) as tctx:
        # mitmproxy keeps an unknown --set name for an addon loaded later, and says nothing.
        tctx.options.set("toolcall_lens_injekt=interleave", defer=True)
        typo = r"^toolcall_lens_injekt: .*did you mean toolcall_lens_inject\?$"
        with pytest.raises(exceptions.OptionsError, match=typo):
            tctx.configure(lens, toolcall_lens_marker=":x:")


def test_a_bad_option_at_start_up_is_one_logged_error_and_a_refusal_once_running():
    check = errorcheck.ErrorCheck()  # mitmdump's and mitmweb's: an error logged at start-up stops them
    lens = addon_module.ToolcallLens()
    try:
        with taddons.context(check, lens) as tctx:
            # Raised here, mitmproxy would print it with a traceback.
            tctx.configure(lens, toolcall_lens_inject=["interleaved"])
            (error,) = check.logger.has_errored
            assert error.getMessage().startswith("toolcall_lens_inject: unknown ['interleaved']")
            assert error.exc_info is None
            lens.running()
            with pytest.raises(exceptions.OptionsError, match="toolcall_lens_inject"):
                tctx.configure(lens, toolcall_lens_inject=["interleaved"])
    finally:
        check.finish()


def test_marker_option(lens):
    with taddons.context(lens) as tctx:
        tctx.configure(lens, toolcall_lens_marker=":red_circle:")
        flow = llm_flow()
        stream_through(lens, flow, PRODUCTION)
        assert flow.marked == ":red_circle:"
        tctx.configure(lens, toolcall_lens_marker="")
        flow = llm_flow()
        stream_through(lens, flow, PRODUCTION)
        assert not flow.marked


def test_another_addons_stream_callable_is_kept_in_the_chain(lens):
    flow = llm_flow()
    seen = []
    flow.response.stream = lambda data: (seen.append(data), data)[1]
    stream_through(lens, flow, PRODUCTION)
    assert b"".join(seen) == PRODUCTION
    assert flow.metadata["toolcall_lens"]["choices"][0]["tool_calls"]


def test_store_streamed_bodies_keeps_the_body_once():
    # With mitmproxy's store_streamed_bodies on, mitmproxy keeps the streamed body itself: the watch keeps
    # no second copy, and what mitmproxy stored is left as it is.
    from mitmproxy.addons.proxyserver import Proxyserver

    lens = addon_module.ToolcallLens()
    with taddons.context(lens, Proxyserver()) as tctx:
        tctx.configure(lens, store_streamed_bodies=True)
        flow = llm_flow()
        lens.responseheaders(flow)
        watch = flow.response.stream
        stored = b"".join(watch(piece) for piece in [*pieces(PRODUCTION), b""])
        flow.response.raw_content = stored  # as mitmproxy does, before the response hook
        lens.response(flow)
    assert watch.pieces == [] and watch.kept == 0
    assert flow.response.raw_content is stored
    assert "body-truncated" not in [w["code"] for w in flow.metadata["toolcall_lens"]["warnings"]]


def test_a_streams_url_is_read_once_for_its_price_and_its_log_line(lens, caplog, monkeypatch):
    # mitmproxy parses and checks the Host header each time pretty_url is read (~25 us of a busy proxy's
    # thread): the addon builds the same URL once a flow, as the response headers come, for the price and
    # the log line, and keeps each host's part of it.
    caplog.set_level(logging.INFO, logger="toolcall_lens")
    priced_with = []
    real_price = addon_module.price
    monkeypatch.setattr(
        addon_module,
        "price",
        lambda prices, result, url, *rest: priced_with.append(url) or real_price(prices, result, url, *rest),
    )
    reads = []
    pretty_url = http.Request.pretty_url
    monkeypatch.setattr(http.Request, "pretty_url", property(lambda r: reads.append(1) or pretty_url.fget(r)))
    for n in range(2):
        flow = llm_flow(path=f"/v1/chat/completions?n={n}")
        flow.request.headers["host"] = (
            "api.openai.com:8443"  # what the client asked for, as mitmproxy shows it
        )
        stream_through(lens, flow, PRODUCTION)
    assert reads == []  # mitmproxy's own reading not once
    urls = [f"http://api.openai.com:8443/v1/chat/completions?n={n}" for n in range(2)]
    assert priced_with == urls and lens.url_starts == {
        ("http", "api.openai.com:8443"): "http://api.openai.com:8443"
    }
    lines = [r.message for r in caplog.records if r.name == "toolcall_lens"]
    assert [line.split(": ")[0] for line in lines] == [f"toolcall-lens POST {url}" for url in urls]


def test_one_log_line_per_llm_flow(lens, caplog):
    caplog.set_level(logging.INFO, logger="toolcall_lens")
    stream_through(lens, llm_flow(), PRODUCTION)
    stream_through(lens, llm_flow(request={"stream": True}), CLEAN)
    lines = [r for r in caplog.records if r.name == "toolcall_lens"]
    assert [r.levelno for r in lines] == [logging.WARNING, logging.INFO]
    assert "recency-misroute" in lines[0].getMessage()
    assert "/v1/chat/completions" in lines[0].getMessage()


def test_flows_ending_faster_than_a_person_reads_share_records_and_done_writes_what_waits(caplog):
    caplog.set_level(logging.INFO, logger="toolcall_lens")
    flows = [llm_flow() if k == BURST + 1 else llm_flow(request={"stream": True}) for k in range(BURST + 4)]

    def records():
        return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "toolcall_lens"]

    async def main() -> list:
        lens = addon_module.ToolcallLens()
        with taddons.context(lens) as tctx:
            tctx.configure(lens, toolcall_lens_worker=False)
            lens.lines.clock = lambda: 0.0  # one window, however slow the machine
            for k, flow in enumerate(flows):
                stream_through(lens, flow, PRODUCTION if k == BURST + 1 else CLEAN)
            assert len(records()) == BURST  # a record each, at once; the others wait
            lens.done()  # the proxy stops: what waits is written
            return records()

    written = asyncio.run(main())
    said = [f"toolcall-lens POST {flow.request.pretty_url}: {flow.comment}" for flow in flows]
    assert written == [
        *((logging.INFO, line) for line in said[:BURST]),
        (logging.INFO, "\n".join([said[BURST], *said[BURST + 2 :]])),
        (logging.WARNING, said[BURST + 1]),
    ]
    assert "recency-misroute" in said[BURST + 1]


def test_a_request_changed_by_another_addon_after_the_request_hook_is_read_as_it_went_out(lens):
    # The stream's checks take the tools the request hook read, unless the body changed since: a script
    # after this one that declares one more tool (or one fewer) must be seen as the provider saw it.
    declared = {"tools": [{"type": "function", "function": {"name": "search_circulars"}}], "stream": True}
    both = {
        **declared,
        "tools": [*declared["tools"], {"type": "function", "function": {"name": "get_user_profile"}}],
    }
    for first, sent, expected in (
        (declared, both, False),
        (both, declared, True),
        (declared, declared, True),
    ):
        flow = llm_flow(request=first)
        lens.request(flow)
        if sent is not first:
            flow.request.content = json.dumps(sent).encode()  # another addon's request hook
        stream_through(lens, flow, PRODUCTION)
        codes = [w["code"] for w in flow.metadata["toolcall_lens"]["warnings"]]
        assert ("undeclared-tool" in codes) is expected, (sent, codes)


def test_annotations_survive_a_dump_round_trip(lens):
    flow = llm_flow()
    stream_through(lens, flow, PRODUCTION)
    buffer = io.BytesIO()
    mio.FlowWriter(buffer).add(flow)
    buffer.seek(0)
    (loaded,) = list(mio.FlowReader(buffer).stream())
    assert loaded.metadata["toolcall_lens"] == flow.metadata["toolcall_lens"]
    assert loaded.comment == flow.comment and loaded.marked == flow.marked
    assert loaded.response.raw_content == PRODUCTION


def test_a_wrong_echo_is_flagged_on_the_follow_up_and_linked_from_the_earlier_flow():
    from mitmproxy.addons.view import View

    lens = addon_module.ToolcallLens()
    view = View()
    with taddons.context(lens, view):
        earlier = llm_flow()
        view.add([earlier])
        stream_through(lens, earlier, PRODUCTION)
        calls = [
            {"id": "call_abc", "type": "function", "function": {"name": "search_circulars", "arguments": ""}},
            {
                "id": "call_xyz",
                "type": "function",
                "function": {"name": "get_user_profile", "arguments": "{}"},
            },
        ]
        follow_up = llm_flow(
            request={"model": "m", "stream": True, "messages": [{"role": "assistant", "tool_calls": calls}]}
        )
        before = follow_up.request.get_state()
        lens.request(follow_up)
        assert follow_up.request.get_state() == before  # read-only
        assert [link["ids"] for link in earlier.metadata["toolcall_lens_echoes"]] == [
            ["call_abc", "call_xyz"]
        ]
        assert f"echoed wrong by flow {follow_up.id}" in earlier.comment
        stream_through(lens, follow_up, CLEAN)
    found = [w for w in follow_up.metadata["toolcall_lens"]["warnings"] if w["code"] == "client-misassembled"]
    assert [w["id"] for w in found] == ["call_abc", "call_xyz"] and follow_up.marked
    assert lens.echo_warnings == {}


WRONG_ECHO = {
    "model": "m",
    "stream": True,
    "messages": [
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "call_abc",
                    "type": "function",
                    "function": {"name": "search_circulars", "arguments": ""},
                }
            ],
        }
    ],
}


@pytest.mark.parametrize("end", ["error", "response"])
def test_echo_state_is_released_however_the_flow_ends(lens, end):
    from mitmproxy.flow import Error

    stream_through(lens, llm_flow(), PRODUCTION)
    follow_up = llm_flow(request=WRONG_ECHO)
    lens.request(follow_up)
    assert list(lens.echo_warnings) == [follow_up.id]
    if end == "error":  # the upstream never answered: no response, only the error hook
        follow_up.response = None
        follow_up.error = Error("server unreachable")
        lens.error(follow_up)
    else:  # an answer that is no LLM response (a gateway's HTML page): nothing to annotate
        follow_up.response.headers["content-type"] = "text/html"
        follow_up.response.content = b"<html>maintenance</html>"
        follow_up.request.content = b"{}"
        lens.responseheaders(follow_up)
        lens.response(follow_up)
        assert "toolcall_lens" not in follow_up.metadata
    assert lens.echo_warnings == {}
    assert lens.turn_facts == {}  # what its request said of its session, too


def test_index_size_option_bounds_the_index(lens):
    with taddons.context(lens) as tctx:
        tctx.configure(lens, toolcall_lens_index_size=1)
        stream_through(lens, llm_flow(), PRODUCTION)
        assert len(lens.observed) == 1
        with pytest.raises(exceptions.OptionsError):
            tctx.configure(lens, toolcall_lens_index_size=-1)


def test_index_bytes_option_bounds_the_arguments_the_index_holds(lens):
    # The production stream's calls: '{"query": "RBI circulars"}' (26 characters), then 19 more.
    with taddons.context(lens) as tctx:
        tctx.configure(lens, toolcall_lens_index_bytes=26)
        stream_through(lens, llm_flow(), PRODUCTION)
        assert [lens.observed.get(i) is not None for i in ("call_abc", "call_xyz")] == [False, True]
        assert lens.observed._bytes == 19
        # Room for both again: the same stream's calls, and the first flow's call_xyz as its id's earlier.
        tctx.configure(lens, toolcall_lens_index_bytes=64)
        stream_through(lens, llm_flow(), PRODUCTION)
        assert len(lens.observed) == 2 and lens.observed._versions == 1 and lens.observed._bytes == 64
        with pytest.raises(exceptions.OptionsError):
            tctx.configure(lens, toolcall_lens_index_bytes=-1)


def chat_turn(calls: list[tuple[str, str, str]], answered: list[str]) -> dict:
    """A follow-up request: the assistant's calls echoed, and tool results for ``answered``."""
    return {
        "model": "m",
        "stream": True,
        "messages": [
            {"role": "user", "content": "Find the circulars and my profile."},
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                    for i, n, a in calls
                ],
            },
            *({"role": "tool", "tool_call_id": i, "content": "ok"} for i in answered),
        ],
    }


PRODUCTION_CALLS = [
    ("call_abc", "search_circulars", '{"query": "RBI circulars"}'),
    ("call_xyz", "get_user_profile", '{"user_id": "u123"}'),
]


def test_a_follow_up_that_drops_a_call_is_flagged_and_a_correct_one_says_it_was_checked(lens):
    earlier = llm_flow()
    stream_through(lens, earlier, PRODUCTION)
    dropped = llm_flow(request=chat_turn(PRODUCTION_CALLS[:1], ["call_abc"]))
    lens.request(dropped)
    stream_through(lens, dropped, CLEAN)
    result = dropped.metadata["toolcall_lens"]
    found = [w for w in result["warnings"] if w["code"] == "unanswered-call"]
    assert [(w["id"], w["earlier_flow"]) for w in found] == [("call_xyz", earlier.id)] and dropped.marked
    assert result["evidence"]["unanswered"] == ["call_xyz"]

    right = llm_flow(request=chat_turn(PRODUCTION_CALLS, ["call_abc", "call_xyz"]))
    lens.request(right)
    stream_through(lens, right, CLEAN)
    result = right.metadata["toolcall_lens"]
    assert result["evidence"] == {
        "checked": 4,
        "matched": 2,
        "unanswered": [],
        "unknown": [],
        "earlier_flows": [earlier.id],
        "reason": None,
    }
    assert not [w for w in result["warnings"] if w["severity"] == "warning"] and not right.marked

    first = llm_flow()  # a first request: nothing to check, and the result says so
    lens.request(first)
    stream_through(lens, first, CLEAN)
    assert "echoes no tool call" in first.metadata["toolcall_lens"]["evidence"]["reason"]


def test_a_check_that_fails_still_leaves_its_trace_and_the_request_untouched(lens, monkeypatch):
    # Fault injection: no request body is known to break the check; if one did, this is what it would see.
    monkeypatch.setattr(
        lens,
        "observed",
        Failing(lens.observed, "examine", RecursionError("maximum recursion depth exceeded")),
    )
    flow = llm_flow(request=chat_turn(PRODUCTION_CALLS, ["call_abc", "call_xyz"]))
    sent = flow.request.content
    lens.request(flow)
    assert flow.request.content == sent
    stream_through(lens, flow, CLEAN)
    evidence = flow.metadata["toolcall_lens"]["evidence"]
    assert evidence["reason"] == "the check failed: RecursionError: maximum recursion depth exceeded"
    assert evidence["checked"] == 0 and evidence["matched"] == 0


def test_the_earlier_flow_of_a_dropped_call_says_so():
    from mitmproxy.addons.view import View

    lens = addon_module.ToolcallLens()
    view = View()
    with taddons.context(lens, view):
        earlier = llm_flow()
        view.add([earlier])
        stream_through(lens, earlier, PRODUCTION)
        dropped = llm_flow(request=chat_turn(PRODUCTION_CALLS[:1], ["call_abc"]))
        lens.request(dropped)
    assert earlier.comment.endswith(f"| a call dropped by flow {dropped.id}")
    assert earlier.metadata["toolcall_lens_echoes"] == [
        {"flow_id": dropped.id, "code": "unanswered-call", "ids": ["call_xyz"]}
    ]


# What a mutation run found untested in the addon's hooks: what they pass on to the core.


def test_an_error_status_is_a_result_saying_so_with_its_status_reason_and_type(lens):
    flow = llm_flow(content_type="application/json", request={**REQUEST, "stream": True})
    flow.response.status_code, flow.response.reason = 429, "Too Many Requests"
    flow.response.content = b'{"error": {"message": "Rate limit reached", "type": "requests"}}'
    lens.responseheaders(flow)
    assert not callable(flow.response.stream)  # an error body is read whole, not as a stream
    lens.response(flow)
    result = flow.metadata["toolcall_lens"]
    (warning,) = result["warnings"]
    assert (warning["code"], warning["status"], warning["reason"]) == ("http-error", 429, "Too Many Requests")
    assert warning["content_type"] == "application/json" and result["streamed"] is True
    assert "Rate limit reached" in warning["message"] and flow.marked


def test_a_whole_message_is_read_with_its_request_even_under_a_wrong_content_encoding(lens):
    flow = llm_flow(content_type="application/json", request={**REQUEST, "stream": False})
    flow.response.headers["content-encoding"] = "gzip"  # says gzip; the body is plain: read as it is
    flow.response.raw_content = chat_message([("c1", "not_declared", "{}")])
    lens.responseheaders(flow)
    lens.response(flow)
    result = flow.metadata["toolcall_lens"]
    assert result["streamed"] is False and [c["name"] for c in result["choices"][0]["tool_calls"]] == [
        "not_declared"
    ]
    assert "undeclared-tool" in [w["code"] for w in result["warnings"]]  # checked against the request


def test_each_earlier_flow_in_the_view_is_linked_and_mitmweb_told_even_when_another_is_gone():
    from mitmproxy.addons.view import View

    lens, view, updates = addon_module.ToolcallLens(), View(), Updates()
    with taddons.context(lens, view, updates):
        gone = llm_flow()  # streamed, then removed from the view
        view.add([gone])
        stream_through(lens, gone, PRODUCTION)
        view.remove([gone])
        earlier = llm_flow()
        view.add([earlier])
        stream_through(lens, earlier, CLEAN)
        earlier.comment = ""  # the user cleared it: the link is the whole comment
        # One follow-up that answers one call of each response and drops the other: the gone flow's first.
        weather = ("call_Wm3kQ1a9Tn0bXc7YpLr2Ds4E", "get_weather", '{"city": "Paris"}')
        request = chat_turn([PRODUCTION_CALLS[0], weather], ["call_abc", weather[0]])
        dropped = llm_flow(request=request)
        updates.flows.clear()
        lens.request(dropped)
    assert earlier.comment == f"a call dropped by flow {dropped.id}"
    assert earlier.metadata["toolcall_lens_echoes"] == [
        {"flow_id": dropped.id, "code": "unanswered-call", "ids": ["call_Pq8vN2s6Hb4uZe1RkTw9Lm0C"]}
    ]
    assert updates.flows == [earlier]
    assert "toolcall_lens_echoes" not in gone.metadata
