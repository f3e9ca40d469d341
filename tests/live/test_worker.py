"""``toolcall_lens_worker``: the analysis in a worker process. Through a real mitmdump, every format's
streams get the same results as analysed in the proxy, and the client the same bytes; a worker that dies
mid-stream costs that flow its analysis (said on the flow), never a byte, and the next flow gets a new
worker. Around the worker itself (``AnalysisWorker``, on an event loop of the test's own): live snapshots,
a worker that stops answering, and one flow's fault, which stays that flow's."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import http.client
import json
import marshal
import os
import signal
import time
from pathlib import Path

import fake_provider as fp
import pytest
from lab import children, memory, start_mitmdump
from mitmproxy.test import taddons
from streams import call, chat_message, choice, chunk, sse, tool_chunk

import addon as addon_module
from accumulator import StreamAccumulator, analyze
from accumulator.decoding import ContentEncoder
from accumulator.limits import DEFAULT_LIMITS, Limits
from toolcall_lens import worker as worker_module
from toolcall_lens.watch import StreamWatch
from toolcall_lens.worker import AnalysisWorker, WorkerGone, remote_settings


async def until(holds, limit: float = 30.0) -> None:
    """This loop's turns until ``holds()``: the worker answers when it can (a slower machine starts it
    and answers later), and no test may depend on how soon; fails after ``limit`` seconds."""
    deadline = time.monotonic() + limit
    while not holds():
        assert time.monotonic() < deadline, "the worker did not answer in time"
        await asyncio.sleep(0.01)


def responses_on(flow) -> int:
    """How many responses the flow's record shows."""
    return len(flow.metadata.get("toolcall_lens", {}).get("responses", ()))


SCENARIOS = ("interleaved", "sequential", "truncated", "error-midstream")


def hold(watch: StreamWatch, chunk: bytes, at: float) -> None:
    """A chunk held by ``watch`` as its callable holds one, with the time it came."""
    watch.held.append(chunk)
    watch.times.append(at)


def send(port: int, format: str, scenario: str, case: str, **headers: str) -> tuple[bytes, str | None]:
    """One streamed request: (the body the client got, the provider's hash of the body it sent)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    path = fp.path(format, scenario)
    path += ("&" if "?" in path else "?") + f"case={case}"
    sent = {"Content-Type": "application/json", **{k.replace("_", "-"): v for k, v in headers.items()}}
    conn.request("POST", path, fp.request_body(format, scenario), sent)
    response = conn.getresponse()
    try:
        body = response.read()
    except http.client.IncompleteRead as cut:
        body = cut.partial
    conn.close()
    return body, response.getheader("X-Body-SHA256")


def records(path: Path) -> dict[str, dict]:
    """The JSONL records by the case their URL names."""
    out = {}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        out[record["url"].rsplit("case=", 1)[1]] = record
    return out


def comparable(result: dict) -> dict:
    """A result (or a connection's record) without what differs from run to run: times, durations and the
    session's random id."""

    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if not k.endswith("_at") and k != "timing"}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    result = strip(result)
    for one in result.get("responses", [result]) if isinstance(result, dict) else ():
        one.get("session", {}).pop("id", None)
    return result


def test_every_format_gets_the_same_results_and_bytes_with_the_worker_as_without(provider, tmp_path):
    cases = [(f, s, f"{f}/{s}", None) for f in fp.FORMATS for s in SCENARIOS]
    cases += [
        (f, "interleaved", f"{f}/{e}", e)
        for f in ("openai-chat", "anthropic-messages")
        for e in ("gzip", "br")
    ]
    seen = {}
    bodies: dict[str, set[bytes]] = {}  # the client got the same bytes either way
    for worker in (False, True):
        export = tmp_path / f"worker-{worker}.jsonl"
        process, port = start_mitmdump(
            provider, None, f"toolcall_lens_jsonl={export}", f"toolcall_lens_worker={str(worker).lower()}"
        )
        try:
            for format, scenario, case, encoding in cases:
                body, digest = send(
                    port, format, scenario, case, **({"X_Fake_Encoding": encoding} if encoding else {})
                )
                bodies.setdefault(case, set()).add(body)
                if scenario in ("interleaved", "sequential"):  # the whole body as the provider sent it
                    assert hashlib.sha256(body).hexdigest() == digest, case
            assert len(children(process.popen.pid)) == worker
        finally:
            process.stop()
        started = [line for line in process.lines if "analysis worker started" in line]
        assert len(started) == worker, started  # one worker, started at the first flow, only when asked
        seen[worker] = records(export)
    assert all(len(got) == 1 for got in bodies.values())
    assert len(seen[False]) == len(cases)
    assert set(seen[True]) == set(seen[False])
    for case, record in seen[False].items():
        assert comparable(seen[True][case]["result"]) == comparable(record["result"]), case
    # The cases tell something: calls rebuilt, an interleaving flagged, streams cut short.
    assert seen[True]["openai-chat/interleaved"]["result"]["choices"][0]["tool_calls"]
    assert not seen[True]["openai-chat/truncated"]["result"]["complete"]


def test_a_worker_that_dies_mid_stream_costs_that_flow_its_analysis_not_a_byte(provider, tmp_path):
    export = tmp_path / "flows.jsonl"
    process, port = start_mitmdump(
        provider, None, f"toolcall_lens_jsonl={export}", "toolcall_lens_worker=true"
    )
    try:
        send(port, "openai-chat", "sequential", "first")  # starts the worker
        (worker,) = children(process.popen.pid)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request(
            "POST",
            fp.path("openai-chat", "interleaved") + "?case=killed",
            fp.request_body("openai-chat", "interleaved"),
            {"Content-Type": "application/json", "X-Fake-Delay": "0.1"},
        )
        response = conn.getresponse()
        head = response.read1(64)  # the stream is under way, its flow open in the worker
        os.kill(worker, signal.SIGKILL)
        body = head + response.read()
        conn.close()
        assert hashlib.sha256(body).hexdigest() == response.getheader("X-Body-SHA256")
        killed_bytes = len(body)
        process.wait_for(r"toolcall-lens POST .*case=killed")
        body, digest = send(port, "openai-chat", "interleaved", "after")
        assert hashlib.sha256(body).hexdigest() == digest
        process.wait_for(r"toolcall-lens POST .*case=after")
        assert children(process.popen.pid) not in ([], [worker])  # a new worker
    finally:
        process.stop()
    found = records(export)
    killed = found["killed"]["result"]
    (warning,) = killed["warnings"]
    assert warning["code"] == "internal-error" and "the analysis worker exited" in warning["message"]
    assert killed["complete"] is False and killed["stats"]["bytes"] == killed_bytes
    after = found["after"]["result"]
    calls = [
        {"id": c["id"], "name": c["name"], "arguments": c["arguments"]}
        for c in after["choices"][0]["tool_calls"]
    ]
    assert calls == fp.expected_calls("interleaved")
    assert len([line for line in process.lines if "analysis worker started" in line]) == 2
    assert any("the analysis worker exited" in line for line in process.lines)


# -- the worker on an event loop of the test's own -----------------------------------------------------------

CHAT = sse(
    tool_chunk(call(0, "call_a", "first", '{"a"'), call(1, "call_b", "second", '{"b"')),
    tool_chunk(call(0, None, None, ": 1}"), call(1, None, None, ": 2}")),
    chunk(choice(0, "tool_calls")),
)


def events(body: bytes) -> list[bytes]:
    return [event + b"\n\n" for event in body.split(b"\n\n") if event]


def open_chat(worker: AnalysisWorker):
    """A Chat Completions flow opened in the worker, with the default limits."""
    return worker.open(remote_settings("openai-chat", None, None, None, DEFAULT_LIMITS))


def open_stopped(worker: AnalysisWorker):
    """A flow opened in the worker, then the worker stopped (SIGSTOP): it reads and answers nothing."""
    remote = open_chat(worker)
    os.kill(worker.process.pid, signal.SIGSTOP)
    return remote, worker.process


async def chat_result(remote) -> dict:
    """The result of CHAT fed as one held chunk to a watch of ``remote``, once the worker answers."""
    watch = StreamWatch(remote, "openai-chat", 0)
    hold(watch, CHAT, 1.0)
    result, _ = await watch.finish_remote()
    return result


def with_worker(test) -> None:
    """Run ``async test(worker)`` on an event loop of its own, with a worker stopped at the end."""

    async def go():
        worker = AnalysisWorker()
        try:
            await test(worker)
        finally:
            worker.stop()

    asyncio.run(asyncio.wait_for(go(), 60))


def test_a_stream_fed_through_the_worker_ends_as_it_does_in_the_proxy_and_shows_its_calls_while_it_runs():
    async def go(worker):
        remote = worker.open(remote_settings("openai-chat", None, None, 100.0, DEFAULT_LIMITS))
        local = StreamAccumulator("openai-chat", started_at=100.0)
        pieces = events(CHAT)
        watch = StreamWatch(remote, "openai-chat", 1 << 20)
        for n, piece in enumerate(pieces[:2]):
            hold(watch, piece, 100.5 + n)
            local.feed(piece, 100.5 + n)
        watch.feed_held()
        snapshot = await remote.snapshot()
        assert snapshot == local.snapshot()
        assert [c["name"] for c in snapshot["choices"][0]["tool_calls"]] == ["first", "second"]
        for n, piece in enumerate(pieces[2:], 2):
            hold(watch, piece, 100.5 + n)
            local.feed(piece, 100.5 + n)
        result, _ = await watch.finish_remote()
        expected = local.finish(time.time())
        assert comparable(result) == comparable(expected)
        assert [c["arguments"] for c in result["choices"][0]["tool_calls"]] == ['{"a": 1}', '{"b": 2}']

    with_worker(go)


def test_the_worker_outlives_a_ctrl_c_to_the_proxys_process_group_and_ends_with_its_input():
    # Ctrl-C in a terminal reaches every process of the group: the proxy finishes the flows the worker
    # holds before it stops, so the worker must still answer them; it ends when its input does.
    async def go(worker):
        await chat_result(open_chat(worker))  # the worker is up (a signal while Python starts kills it)
        remote = open_chat(worker)
        process = worker.process
        assert os.getsid(process.pid) != os.getsid(0)  # the terminal's Ctrl-C goes to the proxy's alone
        for sig in (signal.SIGINT, signal.SIGTERM):
            os.kill(process.pid, sig)
        result = await chat_result(remote)
        assert [c["name"] for c in result["choices"][0]["tool_calls"]] == ["first", "second"]
        worker.stop()
        assert process.returncode == 0

    with_worker(go)


def test_a_short_flows_open_last_batch_and_end_reach_the_worker_in_one_write(monkeypatch):
    # Each write wakes the worker and costs the proxy's thread a system call: a flow shorter than a
    # batch is sent whole at its end.
    writes = []
    real = os.write

    async def go(worker):
        first = open_chat(worker)
        stdin = worker.process.stdin.fileno()
        monkeypatch.setattr(
            worker_module.os, "write", lambda fd, data: (fd == stdin and writes.append(fd)) or real(fd, data)
        )
        result = await chat_result(first)
        assert [c["name"] for c in result["choices"][0]["tool_calls"]] == ["first", "second"]
        assert len(writes) == 1

    with_worker(go)


def test_answers_longer_than_a_read_come_whole_and_each_read_asks_for_a_heap_sized_piece(monkeypatch):
    # A read of a MiB costs the proxy's thread an mmap and a munmap however little it brings: the answers
    # are read 64 KiB at a time, and one longer than that is put together over the loop's turns.
    asked = []
    real = os.read
    arguments = json.dumps({"text": "x" * 300_000})
    body = sse(
        tool_chunk(call(0, "call_a", "write", arguments[:1000]), call(1, "call_b", "read", "{}")),
        tool_chunk(call(0, None, None, arguments[1000:])),
        chunk(choice(0, "tool_calls")),
    )

    async def go(worker):
        remotes = [open_chat(worker) for _ in range(3)]
        answers = worker.process.stdout.fileno()
        monkeypatch.setattr(
            worker_module.os, "read", lambda fd, n: (fd == answers and asked.append(n)) or real(fd, n)
        )
        results = []
        for remote in remotes:
            watch = StreamWatch(remote, "openai-chat", 0)
            hold(watch, body, 1.0)
            results.append(watch.finish_remote())
        for result, _ in await asyncio.gather(*results):
            assert [(c["name"], c["arguments"]) for c in result["choices"][0]["tool_calls"]] == [
                ("write", arguments),
                ("read", "{}"),
            ]

    with_worker(go)
    assert len(asked) >= 3 * 300_000 // (1 << 16)
    assert set(asked) == {1 << 16}


def test_results_come_back_from_the_worker_as_their_json_and_equal_the_proxys_own(monkeypatch):
    # The worker sends each result as its JSON, which the proxy's thread reads back in ~60% of the time
    # marshal's dicts took (docs/performance.md). What comes back is the result the core gives in the
    # proxy, each value of the same type (a tuple read back as a list would differ here).
    answered = []
    real_loads = marshal.loads

    def heard(data):
        message = real_loads(data)
        if isinstance(message, tuple) and len(message) == 3 and message[1] == worker_module.FINISH:
            answered.append(message[2])
        return message

    monkeypatch.setattr(worker_module.marshal, "loads", heard)

    async def go(worker):
        for format in fp.FORMATS:
            for scenario in ("interleaved", "error-midstream"):
                body = fp.body(format, scenario)
                remote = worker.open(remote_settings(format, None, None, 100.0, DEFAULT_LIMITS))
                local = StreamAccumulator(format, started_at=100.0)
                watch = StreamWatch(remote, format, 0)
                hold(watch, body, 100.5)
                local.feed(body, 100.5)
                result, _ = await watch.finish_remote()
                assert comparable(result) == comparable(local.finish(time.time())), (format, scenario)

    with_worker(go)
    assert len(answered) == 2 * len(fp.FORMATS)
    assert all(type(result) is bytes for result, *_ in answered)  # JSON on the pipe, not marshal's dicts


def test_a_result_json_cannot_hold_comes_back_as_itself():
    result = analyze(CHAT, "openai-chat")
    assert worker_module.unpacked(worker_module.packed(result)) == result
    result["usage"]["input"] = 2**70  # beyond JSON's 64-bit integers (orjson's): marshal carries it
    assert worker_module.packed(result) is result and worker_module.unpacked(result) is result
    assert worker_module.packed(None) is None


def test_the_proxy_reads_the_workers_answers_while_it_waits_for_room_to_write(caplog):
    # With no turn of the event loop the proxy takes no answers; a worker whose answer pipe is full waits
    # and reads nothing, so the proxy's next writes fill the other pipe. Waiting for room there, the proxy
    # reads the answers meanwhile: the worker goes on (both pipes full stopped it as stuck after 2 s).
    arguments = json.dumps({"text": "x" * 400_000})
    body = sse(tool_chunk(call(0, "call_a", "write", arguments)), chunk(choice(0, "tool_calls")))

    def fed(remote) -> StreamWatch:
        watch = StreamWatch(remote, "openai-chat", 0)
        hold(watch, body, 1.0)
        watch.feed_held()
        return watch

    async def go(worker):
        first = fed(open_chat(worker))
        process = worker.process
        snapshots = [first.accumulator.snapshot() for _ in range(8)]  # 3.2 MB of answers, the pipe holds 1
        others = [fed(open_chat(worker)) for _ in range(8)]  # 3.2 MB more to write, the loop never turning
        for snapshot in snapshots:
            assert (await snapshot)["choices"][0]["tool_calls"][0]["arguments"] == arguments
        for watch in [first, *others]:
            result, _ = await watch.finish_remote()
            assert result["choices"][0]["tool_calls"][0]["arguments"] == arguments
        assert worker.process is process and process.poll() is None

    with_worker(go)
    assert "fell behind" not in caplog.text


def test_a_worker_that_stops_answering_is_stopped_and_the_next_flow_gets_a_new_one(monkeypatch):
    default = worker_module.ANSWER_TIMEOUT
    monkeypatch.setattr(worker_module, "ANSWER_TIMEOUT", 0.5)

    async def go(worker):
        remote, stuck = open_stopped(worker)
        result = await chat_result(remote)
        (warning,) = result["warnings"]
        assert warning["code"] == "internal-error"
        assert "gave no answer in 0.5 s and was stopped" in warning["message"]
        assert stuck.poll() is not None  # killed, not left behind
        # The new worker's first answer (its start, its imports) gets the usual time: on a busy VM it once
        # took more than 0.5 s, and the new worker was stopped as stuck too.
        monkeypatch.setattr(worker_module, "ANSWER_TIMEOUT", default)
        again = open_chat(worker)
        assert worker.process is not stuck and worker.started == 2
        result = await chat_result(again)
        assert [c["name"] for c in result["choices"][0]["tool_calls"]] == ["first", "second"]

    with_worker(go)


def test_opening_a_flow_asks_the_system_nothing_and_a_worker_that_exited_is_still_replaced():
    # A flow's open costs the proxy's thread no waitpid (~14 us under load): a worker that exits closes its
    # pipe, which the proxy sees on the event loop, and the next flow starts a new one.
    async def go(worker):
        result = await chat_result(open_chat(worker))
        process = worker.process
        asked = []
        poll = process.poll
        process.poll = lambda: asked.append(1) or poll()
        for _ in range(5):
            result = await chat_result(open_chat(worker))
            assert [c["name"] for c in result["choices"][0]["tool_calls"]] == ["first", "second"]
        assert asked == [] and worker.process is process
        process.kill()
        while worker.alive:  # its end, seen on its pipe
            await asyncio.sleep(0.01)
        result = await chat_result(open_chat(worker))
        assert [c["name"] for c in result["choices"][0]["tool_calls"]] == ["first", "second"]
        assert worker.started == 2 and worker.process is not process and process.poll() is not None

    with_worker(go)


def test_each_answer_awaited_is_given_its_whole_time_by_one_watchdog_and_leaves_it_once_answered(monkeypatch):
    # One timer watches the oldest answer awaited, not one timeout per flow: a flow asked late is given its
    # whole ANSWER_TIMEOUT even when the timer first fires for an earlier flow; answered flows are not held.
    monkeypatch.setattr(worker_module, "ANSWER_TIMEOUT", 0.6)

    async def go(worker):
        loop = asyncio.get_running_loop()
        for _ in range(20):
            result = await chat_result(open_chat(worker))
            assert [c["name"] for c in result["choices"][0]["tool_calls"]] == ["first", "second"]
        assert len(worker._deadlines) == 0  # answered: none of their futures (and results) kept
        assert worker._watchdog is not None  # due at the first one's deadline, which it finds answered
        await asyncio.sleep(0.3)
        remote, stuck = open_stopped(worker)
        asked = loop.time()
        result = await chat_result(remote)
        waited = loop.time() - asked
        assert 0.6 <= waited < 0.6 + 0.5, waited  # its own deadline, not the first flow's
        (warning,) = result["warnings"]
        assert "gave no answer in 0.6 s and was stopped" in warning["message"]
        assert stuck.poll() is not None and worker._watchdog is None and len(worker._deadlines) == 0

    with_worker(go)


def test_a_worker_that_stops_reading_costs_the_proxy_a_bounded_wait_not_a_hang(monkeypatch):
    # A full pipe: the write waits WRITE_TIMEOUT at most, then the worker is stopped and its flows fail.
    monkeypatch.setattr(worker_module, "WRITE_TIMEOUT", 0.3)

    async def go(worker):
        remote, stuck = open_stopped(worker)
        batch = ([b"data: " + b"x" * 65_000 + b"\n\n"], [1.0])
        started = time.monotonic()
        with pytest.raises(WorkerGone, match="fell behind by a full pipe for 0.3 s"):
            for _ in range(100):  # 6.5 MB: more than any pipe holds
                remote.feed_batch(batch)
        assert time.monotonic() - started < 5
        assert stuck.poll() is not None and not worker.alive
        watch = StreamWatch(remote, "openai-chat", 0)
        result, _ = await watch.finish_remote()
        assert "fell behind by a full pipe" in result["warnings"][0]["message"]

    with_worker(go)


def test_a_worker_that_cannot_run_is_given_up_after_three_starts_and_the_proxy_analyses_itself(
    monkeypatch, caplog
):
    # A Python that cannot run the worker (here: one that exits at once): three starts, then no more.
    monkeypatch.setattr(worker_module.sys, "executable", "/bin/false")

    async def go(worker):
        opened = []
        for _ in range(5):
            remote = open_chat(worker)
            opened.append(remote is not None)
            if remote is not None:
                with pytest.raises(WorkerGone, match="exited"):
                    await remote.finish(1.0)
        # Whether a start gets its flow in before the process is seen gone is a race; the count is not.
        assert opened[3:] == [False, False]
        assert worker.started == 3 and worker.dead_starts == 3

    with caplog.at_level("WARNING", logger="toolcall_lens"):
        with_worker(go)
    given_up = [r.message for r in caplog.records if "workers in a row" in r.message]
    assert len(given_up) == 1 and "3 workers in a row ended before answering anything" in given_up[0]


def test_an_event_loop_that_cannot_watch_the_workers_pipe_leaves_no_worker_behind(caplog):
    # As on Windows, whose event loop has no add_reader: the worker started is stopped again at once, and
    # the flow is analysed in the proxy (said in the log).
    async def go(worker):
        def refuse(*args):
            raise NotImplementedError

        asyncio.get_running_loop().add_reader = refuse
        before = set(children(os.getpid()))
        assert open_chat(worker) is None
        assert worker.started == 1 and worker.process is None and set(children(os.getpid())) == before

    with caplog.at_level("WARNING", logger="toolcall_lens"):
        with_worker(go)
    assert any("no analysis worker (NotImplementedError" in r.message for r in caplog.records)


def test_on_windows_no_worker_is_started(monkeypatch, caplog):
    monkeypatch.setattr(worker_module.sys, "platform", "win32")

    async def go(worker):
        assert open_chat(worker) is None and open_chat(worker) is None
        assert worker.started == 0

    with caplog.at_level("WARNING", logger="toolcall_lens"):
        with_worker(go)
    (said,) = [r.message for r in caplog.records if "no analysis worker" in r.message]  # once
    assert "not on Windows" in said


def test_one_flows_fault_in_the_worker_is_that_flows_failure_and_the_others_go_on():
    async def go(worker):
        good = open_chat(worker)
        bad_limits = remote_settings("openai-chat", None, None, None, DEFAULT_LIMITS)
        bad_limits["limits"]["strategies"] = ("no-such-strategy",)  # the worker's Limits refuses it
        bad = worker.open(bad_limits)
        for remote in (good, bad):
            remote.feed_batch(([CHAT], [1.0]))
        failed, told, _ = await bad.finish(2.0)
        assert failed == worker_module.FAILED and "no-such-strategy" in told
        result, format, _ = await good.finish(2.0)
        assert format == "openai-chat" and len(result["choices"][0]["tool_calls"]) == 2
        with pytest.raises(WorkerGone):
            worker.stop()
            worker.send(good.key, worker_module.FEED, [])

    with_worker(go)


def test_the_worker_rebuilds_limits_and_the_request_as_given():
    # The worker's accumulator is the one the proxy would have built: its caps, strategies and request.
    async def go(worker):
        limits = Limits(max_argument_chars=3, strategies=("recency",))
        request = json.dumps({"model": "m", "stream": True, "parallel_tool_calls": False}).encode()
        remote = worker.open(remote_settings("openai-chat", request, None, None, limits))
        remote.feed_batch(([CHAT], [1.0]))
        result, _, _ = await remote.finish(2.0)
        assert [c["arguments"] for c in result["choices"][0]["tool_calls"]] == ['{"a', '{"b']
        assert "arguments-cap" in [w["code"] for w in result["warnings"]]
        assert set(result["compatibility"]) == {"recency"}
        assert "parallel-disabled" in [w["code"] for w in result["warnings"]]  # the request was read

    with_worker(go)


@pytest.fixture(autouse=True)
def _frontdoor_helpers(monkeypatch):
    # The addon's tests' flows and streams (tests/frontdoors/test_addon.py), for the tests of its hooks here.
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent.parent / "frontdoors"))


# -- the addon's hooks with the worker, on an event loop (mitmproxy's test harness, a loop of the test's own) --


def test_the_addons_hooks_with_the_worker_show_progress_and_annotate_the_flow_when_the_result_comes(
    monkeypatch,
):
    from test_addon import PRODUCTION, REQUEST, llm_flow, pieces

    clock = iter(1000.0 + 0.01 * n for n in range(100_000))
    monkeypatch.setattr(addon_module.time, "time", lambda: next(clock))
    lens = addon_module.ToolcallLens()

    async def go():
        with taddons.context(lens) as tctx:
            tctx.configure(lens, toolcall_lens_live_updates=4, toolcall_lens_worker=True)
            # A flow first, whole: the worker up and warm, however long a slower machine takes to start it
            # (the progress below comes while the stream runs, 2 ms a piece).
            warm = llm_flow()
            lens.responseheaders(warm)
            warm.response.stream(PRODUCTION)
            warm.response.stream(b"")
            await lens.response(warm)
            flow = llm_flow()
            lens.responseheaders(flow)
            assert flow.response.stream.remote and lens.worker.alive
            shown = []
            for piece in pieces(PRODUCTION, 7):
                assert flow.response.stream(piece) is piece
                await asyncio.sleep(0.002)  # the loop's turns: a batch shipped, answers read
                live = flow.metadata.get("toolcall_lens_live")
                if live is not None and (not shown or shown[-1] is not live):
                    shown.append(live)
            assert flow.response.stream(b"") == b""
            pending = lens.response(flow)
            assert asyncio.iscoroutine(pending)  # mitmproxy awaits it, serving other flows meanwhile
            assert "toolcall_lens" not in flow.metadata  # nothing before the worker answers
            await pending
            lens.done()
            assert not lens.worker.alive
        return flow, shown

    flow, shown = asyncio.run(asyncio.wait_for(go(), 60))
    # Progress came from the worker while the stream ran: the bytes read so far, then the calls.
    assert len(shown) > 3 and [s["bytes"] for s in shown] == sorted(s["bytes"] for s in shown)
    assert [c["name"] for c in shown[-1]["choices"][0]["tool_calls"]] == [
        "search_circulars",
        "get_user_profile",
    ]
    assert "toolcall_lens_live" not in flow.metadata
    result, expected = flow.metadata["toolcall_lens"], analyze(PRODUCTION, request=REQUEST)
    for key in ("choices", "compatibility", "complete", "format", "model"):
        assert comparable(result[key]) == comparable(expected[key]), key
    assert [w["code"] for w in result["warnings"]] == [w["code"] for w in expected["warnings"]]
    assert flow.response.raw_content == PRODUCTION
    assert flow.comment.startswith("openai-chat gpt-test") and flow.marked


def test_a_streams_request_is_read_in_the_worker_and_goes_there_as_it_is(monkeypatch):
    # A real agent's request carries the whole conversation (a MiB is common). With the worker the proxy's
    # thread reads none of it (~0.9 ms a flow at 845 KB, docs/performance.md): the body goes to the
    # worker after the message, the very bytes object (no copy), and the worker reads it there: what it
    # declares of tools, its echo check (the result's evidence), what the session needs.
    from test_addon import PRODUCTION, llm_flow, pieces

    request = {
        "model": "gpt-test",
        "stream": True,
        "parallel_tool_calls": False,
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "search_circulars",
                    "parameters": {"type": "object", "required": ["query"], "properties": {"query": {}}},
                },
            }
        ],
        "messages": [{"role": "user", "content": "x" * 1_000_000}],
    }
    opened: list[tuple[int, bool]] = []
    parsed: list[int] = []
    real_decoded = worker_module.decoded  # the proxy's reading of a request (``read_request``)

    def decoded(body):
        parsed.append(len(body))
        return real_decoded(body)

    monkeypatch.setattr(worker_module, "decoded", decoded)

    async def through(worker: bool) -> tuple[dict, int]:
        lens = addon_module.ToolcallLens()
        parsed.clear()
        with taddons.context(lens) as tctx:
            tctx.configure(lens, toolcall_lens_worker=worker)
            real = lens.worker.send

            def send(key, op, payload, flush=True, raw=None):
                if op == worker_module.OPEN:
                    opened.append((len(marshal.dumps(payload)), raw is flow.request.raw_content))
                return real(key, op, payload, flush, raw)

            lens.worker.send = send
            flow = llm_flow(request=request)
            assert lens.request(flow) is None
            lens.responseheaders(flow)
            for piece in pieces(PRODUCTION, 7):
                flow.response.stream(piece)
            flow.response.stream(b"")
            pending = lens.response(flow)
            if pending is not None:
                await pending
            lens.done()
        return flow.metadata["toolcall_lens"], len(parsed)

    async def both():  # on one loop: mitmproxy's log handler outlives a test master
        return [await through(worker) for worker in (True, False)]

    (remote, parsed_with_worker), (local, parsed_in_proxy) = asyncio.run(asyncio.wait_for(both(), 60))
    assert parsed_with_worker == 0 and parsed_in_proxy == 1
    assert len(opened) == 1 and opened[0][0] < 4096 and opened[0][1], opened  # the body as it is
    codes = [w["code"] for w in analyze(PRODUCTION, request=request)["warnings"]]
    assert {"undeclared-tool", "parallel-disabled"} <= set(codes)
    assert [w["code"] for w in remote["warnings"]] == [w["code"] for w in local["warnings"]] == codes
    assert remote["evidence"] == local["evidence"]  # the echo check, made in the worker
    assert remote["evidence"]["reason"] == "the request echoes no tool call and answers none"


def compressed(data: bytes, coding: str) -> bytes:
    encoder = ContentEncoder(coding)
    return encoder.encode(data) + encoder.finish()


def compressed_flow(request: dict | None, coding: str, body: bytes | None = None):
    """A Chat Completions stream's flow whose request went compressed, as Codex sends its own."""
    from test_addon import llm_flow

    flow = llm_flow(request=request)
    flow.request.headers["content-encoding"] = coding
    flow.request.raw_content = body if body is not None else compressed(flow.request.raw_content, coding)
    return flow


async def compressed_through(flow, worker: bool, opened: list | None = None, **options) -> dict:
    """``flow`` through the addon, with the worker or in the proxy; ``opened`` gets what each flow's
    opening message carried: (the body's Content-Encoding, whether its body was the request's bytes as
    they came)."""
    from test_addon import PRODUCTION, pieces

    lens = addon_module.ToolcallLens()
    with taddons.context(lens) as tctx:
        tctx.configure(lens, toolcall_lens_worker=worker, **options)
        real = lens.worker.send

        def send(key, op, payload, flush=True, raw=None):
            if op == worker_module.OPEN and opened is not None:
                opened.append((payload.get("request_encoding"), raw is flow.request.raw_content))
            return real(key, op, payload, flush, raw)

        lens.worker.send = send
        assert lens.request(flow) is None
        lens.responseheaders(flow)
        out = [flow.response.stream(piece) for piece in pieces(PRODUCTION, 7)]
        out.append(flow.response.stream(b""))
        pending = lens.response(flow)
        if pending is not None:
            await pending
        lens.done()
    assert b"".join(out) == PRODUCTION  # the client's bytes, untouched
    return flow.metadata["toolcall_lens"]


def decodes_here(monkeypatch) -> list[str]:
    """Each request body decoded in this process from now on: "mitmproxy" for its decoder, "addon" for the
    addon's reading of a request as it came (``request_body``); the worker's are in its own process."""
    from mitmproxy.net import encoding

    decodes: list[str] = []
    real_mitmproxy, real_addon = encoding.decode, worker_module.request_body
    monkeypatch.setattr(
        encoding, "decode", lambda *a, **k: decodes.append("mitmproxy") or real_mitmproxy(*a, **k)
    )
    monkeypatch.setattr(worker_module, "request_body", lambda *a: decodes.append("addon") or real_addon(*a))
    return decodes


@pytest.mark.parametrize("coding", ["zstd", "gzip", "br"])
def test_a_compressed_request_is_decoded_in_the_worker_not_on_the_proxys_thread(monkeypatch, coding):
    # Codex sends its requests zstd-compressed (a whole conversation: 560 KB at the median, MiBs at the
    # tail), and decoding 818 KiB of one costs ~0.8 ms. With the worker, the proxy's thread decodes none
    # of it: the body goes there as it came, with its coding, and the worker decodes and reads it (what it
    # declares of tools, its echo check). In the proxy it is decoded once, by the addon's capped decoder.
    from test_addon import PRODUCTION

    request = {
        "model": "gpt-test",
        "stream": True,
        "parallel_tool_calls": False,
        "tools": [{"type": "function", "function": {"name": "search_circulars", "parameters": {}}}],
        "messages": [{"role": "user", "content": "find them " * 50_000}],
    }
    decodes = decodes_here(monkeypatch)
    opened: list[tuple] = []

    async def both():  # on one loop: mitmproxy's log handler outlives a test master
        found = []
        for worker in (True, False):
            decodes.clear()
            found.append(
                (await compressed_through(compressed_flow(request, coding), worker, opened), list(decodes))
            )
        return found

    (remote, with_worker), (local, in_proxy) = asyncio.run(asyncio.wait_for(both(), 60))
    assert with_worker == [] and in_proxy == ["addon"]
    assert opened == [(coding, True)]  # the body as it came, and its coding: the worker decodes it
    codes = [w["code"] for w in analyze(PRODUCTION, request=request)["warnings"]]
    assert {"undeclared-tool", "parallel-disabled"} <= set(codes)  # read from the decoded request
    assert [w["code"] for w in remote["warnings"]] == [w["code"] for w in local["warnings"]] == codes
    assert remote["evidence"] == local["evidence"]
    assert remote["evidence"]["reason"] == "the request echoes no tool call and answers none"


def test_a_buffered_responses_compressed_request_is_decoded_and_read_once(monkeypatch):
    # A non-streamed response is analysed in the proxy, with or without the worker: its request, decoded
    # and read as the request (or response) hook checks it, is not decoded and read again for the
    # response's analysis (what it declares of tools).
    decodes = decodes_here(monkeypatch)
    request = {"model": "m", "stream": False, "tools": [{"type": "function", "function": {"name": "a"}}]}

    async def go(worker: bool) -> tuple[dict, list[str]]:
        lens = addon_module.ToolcallLens()
        decodes.clear()
        with taddons.context(lens) as tctx:
            tctx.configure(lens, toolcall_lens_worker=worker)
            flow = compressed_flow(request, "zstd")
            flow.response.headers["content-type"] = "application/json"
            flow.response.content = chat_message([("c1", "a", "{}"), ("c2", "b", "{}")])
            pending = lens.request(flow)
            if pending is not None:
                await pending
            lens.responseheaders(flow)
            pending = lens.response(flow)
            if pending is not None:
                await pending
            lens.done()
        return flow.metadata["toolcall_lens"], list(decodes)

    async def both():
        return [await go(worker) for worker in (True, False)]

    for result, decoded in asyncio.run(asyncio.wait_for(both(), 60)):
        assert decoded == ["addon"]
        assert [w["code"] for w in result["warnings"]] == ["undeclared-tool"]  # b: a is declared
        assert result["streamed"] is False


@pytest.mark.parametrize(
    "body,options,why",
    [
        (b"\x28\xb5\x2f\xfd" + b"\xff" * 50, {}, "its content-encoding 'zstd' does not decode (zstd: "),
        (
            compressed(b"{}" + b" " * 5000, "zstd"),
            {"toolcall_lens_decoded_cap": 4096},
            "it decodes to more than 4096 ",
        ),
    ],
)
def test_a_compressed_request_that_cannot_be_read_is_said_on_the_result_and_costs_the_flow_nothing_else(
    body, options, why, caplog
):
    # A body that does not decode, or decodes past the cap (toolcall_lens_decoded_cap, as for responses):
    # the result's evidence and the log say so, with the worker and in the proxy alike; the stream is
    # analysed as ever and the client's bytes are untouched.
    async def both():
        return [
            await compressed_through(compressed_flow(None, "zstd", body), w, **options) for w in (True, False)
        ]

    with caplog.at_level("WARNING", logger="toolcall_lens"):
        results = asyncio.run(asyncio.wait_for(both(), 60))
    said = f"the request's body cannot be read: {why}"
    for result in results:
        assert [c["name"] for c in result["choices"][0]["tool_calls"]] == [
            "search_circulars",
            "get_user_profile",
        ]
        assert result["evidence"]["reason"].startswith(said), result["evidence"]
    logged = [r.getMessage() for r in caplog.records if "echo check failed" in r.getMessage()]
    assert len(logged) == 2 and all(
        line.startswith(f"toolcall-lens: echo check failed: {said}") for line in logged
    )


def test_a_request_whose_content_encoding_lies_is_read_as_it_came_in_the_worker_too(caplog):
    # Content-Encoding says zstd, the body is plain JSON: read as it came (mitmproxy's lenient reading,
    # which the proxy's reading kept), with the worker as in the proxy.
    request = {
        "model": "gpt-test",
        "stream": True,
        "parallel_tool_calls": False,
        "tools": [{"type": "function", "function": {"name": "search_circulars", "parameters": {}}}],
        "messages": [{"role": "user", "content": "hi"}],
    }

    async def both():
        plain = json.dumps(request).encode()
        return [await compressed_through(compressed_flow(None, "zstd", plain), w) for w in (True, False)]

    with caplog.at_level("WARNING", logger="toolcall_lens"):
        results = asyncio.run(asyncio.wait_for(both(), 60))
    for result in results:
        assert {"undeclared-tool", "parallel-disabled"} <= {w["code"] for w in result["warnings"]}
        assert result["evidence"]["reason"] == "the request echoes no tool call and answers none"
    assert not [r for r in caplog.records if "echo check failed" in r.getMessage()]


def test_a_request_the_worker_fails_to_read_is_said_on_the_result_and_in_the_proxys_log(
    monkeypatch, tmp_path, caplog
):
    # A fault in the check itself (no known input makes one: it is there for a bug). Read in the proxy, the
    # flow's evidence says why and the log says "echo check failed"; read in the worker, the same: the
    # worker sends why with the result, and the proxy logs it (it kept only the evidence's reason before).
    from test_addon import PRODUCTION, llm_flow, pieces

    faulty = tmp_path / "python"
    code = (
        "import toolcall_lens.worker as w\n"
        "def decoded(body):\n"
        "    raise ValueError('a bug in the check')\n"
        "w.decoded = decoded\n"
        "w.main()\n"
    )
    faulty.write_text(f'#!/bin/sh\nexec "{worker_module.sys.executable}" -c "{code}"\n')
    faulty.chmod(0o755)
    monkeypatch.setattr(worker_module.sys, "executable", str(faulty))  # the worker it starts: this one

    async def go():
        lens = addon_module.ToolcallLens()
        with taddons.context(lens) as tctx:
            tctx.configure(lens, toolcall_lens_worker=True)
            flow = llm_flow()
            assert lens.request(flow) is None  # read in the worker
            lens.responseheaders(flow)
            assert flow.response.stream.remote
            for piece in pieces(PRODUCTION, 7):
                flow.response.stream(piece)
            flow.response.stream(b"")
            await lens.response(flow)
            lens.done()
        return flow.metadata["toolcall_lens"]

    with caplog.at_level("WARNING", logger="toolcall_lens"):
        result = asyncio.run(asyncio.wait_for(go(), 60))
    assert [c["name"] for c in result["choices"][0]["tool_calls"]] == ["search_circulars", "get_user_profile"]
    assert result["evidence"]["reason"] == "the check failed: ValueError: a bug in the check"
    said = [r.getMessage() for r in caplog.records if "echo check" in r.getMessage()]
    assert said == ["toolcall-lens: echo check failed: ValueError: a bug in the check"]


def test_a_body_larger_than_the_pipe_reaches_the_worker_whole_between_other_flows_messages():
    # A request of 3 MiB fills the pipe (1 MiB) three times over: it goes in pieces as the worker reads,
    # the message before it and those after it intact. Each flow's request is read there (its parallel
    # flag, its echo check) and each result is its own.
    async def go(worker):
        body = json.dumps(
            {
                "model": "m",
                "stream": True,
                "parallel_tool_calls": False,
                "messages": [{"role": "user", "content": "y" * (3 << 20)}],
            }
        ).encode()
        small = open_chat(worker)
        settings = remote_settings("openai-chat", body, None, 100.0, DEFAULT_LIMITS)
        big = worker.open({**settings, "flow_id": "big", "read_request": True})
        small.feed_batch(([CHAT], [1.0]), flush=False)
        big.feed_batch(([CHAT], [1.0]))  # the small flow's batch, the big flow's open and body, its batch
        other = open_chat(worker)
        other.feed_batch(([CHAT], [1.0]))
        results = [await remote.finish(2.0) for remote in (small, big, other)]
        for result, format, _ in results:
            assert format == "openai-chat" and len(result["choices"][0]["tool_calls"]) == 2
        codes = [[w["code"] for w in result["warnings"]] for result, _, _ in results]
        assert "parallel-disabled" in codes[1] and "parallel-disabled" not in codes[0] + codes[2]
        read = results[1][2]
        assert read is not None and read[0] == [] and read[3] == "m"  # no echoes; the model it asked for
        assert results[1][0]["evidence"]["reason"] == "the request echoes no tool call and answers none"

    with_worker(go)


def test_a_live_update_pending_when_the_worker_dies_is_dropped_without_an_error(monkeypatch):
    # The snapshot asked for never comes: the flow goes on, and no callback fails on the loop.
    from test_addon import PRODUCTION, llm_flow, pieces

    clock = iter(1000.0 + 0.01 * n for n in range(100_000))
    monkeypatch.setattr(addon_module.time, "time", lambda: next(clock))
    lens = addon_module.ToolcallLens()
    errors = []

    async def go():
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: errors.append(context))
        with taddons.context(lens) as tctx:
            tctx.configure(lens, toolcall_lens_live_updates=4, toolcall_lens_worker=True)
            flow = llm_flow()
            lens.responseheaders(flow)
            worker = lens.worker.process
            os.kill(worker.pid, signal.SIGSTOP)  # it takes the messages in and answers none
            for piece in pieces(PRODUCTION, 7)[:60]:  # live updates asked for, none answered
                flow.response.stream(piece)
                await asyncio.sleep(0)
            assert any(lens.worker._waiting.values())
            os.kill(worker.pid, signal.SIGKILL)
            while lens.worker.alive:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)  # the loop runs the callbacks of the answers that never came
            assert "toolcall_lens_live" not in flow.metadata
            await lens.error(flow)
            lens.done()
        return flow

    flow = asyncio.run(asyncio.wait_for(go(), 60))
    assert errors == []
    (warning,) = flow.metadata["toolcall_lens"]["warnings"]
    assert warning["code"] == "internal-error" and "the analysis worker exited" in warning["message"]


# -- WebSocket connections in the worker -----------------------------------------------------------------------


def conversation(lens, flow, turns: int) -> None:
    """``turns`` Responses turns on one connection, each answering the calls of the one before (every
    third leaves one unanswered), the odd ones' calls interleaved; the last left unanswered."""
    from websocket_turns import answer, response_events, send

    for n in range(turns):
        create = answer(f"r{n - 1}", 2) if n else {"type": "response.create", "model": "m"}
        if n % 3 == 2:
            create["input"] = create["input"][:1]
        send(lens, flow, True, create)
        for event in response_events(f"r{n}", 2, interleaved=n % 2 == 1):
            send(lens, flow, False, event)


@contextlib.asynccontextmanager
async def socket_in_the_worker(**options):
    """The addon with the worker (and ``options``) on this loop, and a WebSocket flow it has started."""
    from websocket_turns import ws_flow

    lens = addon_module.ToolcallLens()
    with taddons.context(lens) as tctx:
        tctx.configure(lens, toolcall_lens_worker=True, **options)
        flow = ws_flow()
        lens.websocket_start(flow)
        yield lens, flow


async def killed(worker: AnalysisWorker) -> None:
    """The worker killed, and its end seen by the proxy."""
    worker.process.kill()
    while worker.alive:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)


async def a_connection(worker: bool, turns: int, keep: int, settled: int = 0):
    """One connection through the addon's hooks on this event loop: (the flow, the watch, the records it
    had on the flow before its end, what websocket_end returned). ``settled``: the responses to await on
    the flow before its end."""
    from websocket_turns import ws_flow

    lens = addon_module.ToolcallLens()
    with taddons.context(lens) as tctx:
        tctx.configure(lens, toolcall_lens_worker=worker, toolcall_lens_websocket_keep=keep)
        flow = ws_flow()
        lens.websocket_start(flow)
        watch = lens.sockets[flow.id]
        conversation(lens, flow, turns)
        await until(lambda: responses_on(flow) >= settled)  # batches shipped by their timer, answers read
        before = responses_on(flow)
        ended = lens.websocket_end(flow)
        if ended is not None:
            await ended
        lens.done()
    return flow, watch, before, ended


def test_a_connection_analysed_in_the_worker_gets_the_record_it_gets_in_the_proxy(monkeypatch):
    # 40 turns (520 messages): batches shipped as they fill and by the timer, settled results coming
    # back mid-connection (as their JSON), the stored messages trimmed (the note goes to the worker), the
    # end awaited.
    settled = []
    real_loads = marshal.loads

    def heard(data):
        message = real_loads(data)
        if (
            isinstance(message, tuple)
            and len(message) == 3
            and message[1]
            in (
                worker_module.SETTLED,
                worker_module.FINISH,
            )
        ):
            settled.append(message[2][0])
        return message

    monkeypatch.setattr(worker_module.marshal, "loads", heard)

    async def both():  # on one loop: mitmproxy's log handler outlives a test master
        return [await a_connection(worker, 40, keep=50, settled=38) for worker in (True, False)]

    (flow, watch, before, ended), (local, local_watch, _, local_ended) = asyncio.run(
        asyncio.wait_for(both(), 60)
    )
    assert watch.remote and not local_watch.remote
    assert ended is not None and local_ended is None  # the worker's end is awaited, mitmproxy's way
    assert before >= 38  # settled in the worker and shown while the connection ran
    record, expected = flow.metadata["toolcall_lens"], local.metadata["toolcall_lens"]
    assert comparable(record) == comparable(expected)
    assert len(record["responses"]) == 40 and record["connection"]["messages"]["server"] == 40 * 10
    codes = [w["code"] for w in record["connection"]["warnings"]]
    assert codes == ["websocket-messages-trimmed"] and record["connection"]["trimmed"] == 440 - len(
        flow.websocket.messages
    )
    unanswered = [r["websocket"]["position"] for r in record["responses"] if "unanswered-call" in
                  [w["code"] for w in r["warnings"]]]  # fmt: skip
    assert unanswered == [2, 5, 8, 11, 14, 17, 20, 23, 26, 29, 32, 35, 38]
    assert flow.comment == local.comment and flow.marked == local.marked
    assert len(flow.websocket.messages) == len(local.websocket.messages) < 100
    assert len(settled) >= 2 and all(type(results) is bytes for results in settled)


def test_a_connection_whose_worker_dies_keeps_what_settled_and_says_the_rest_was_lost():
    from websocket_turns import send, ws_flow

    async def go():
        async with socket_in_the_worker() as (lens, flow):
            conversation(lens, flow, 3)
            await until(
                lambda: responses_on(flow) >= 2
            )  # shipped by the timer; the two answered turns settled
            assert responses_on(flow) == 2
            await killed(lens.worker)
            message = send(lens, flow, False, {"type": "response.created", "response": {"id": "r9"}})
            assert not message.dropped and lens.sockets[flow.id].held == []  # no longer held: nothing to do
            ended = lens.websocket_end(flow)
            await ended
            # The next connection starts a new worker, and is analysed there.
            again = ws_flow()
            lens.websocket_start(again)
            conversation(lens, again, 2)
            await lens.websocket_end(again)
            assert lens.worker.started == 2
            lens.done()
        return flow, again

    flow, again = asyncio.run(asyncio.wait_for(go(), 60))
    record = flow.metadata["toolcall_lens"]
    assert [r["websocket"]["position"] for r in record["responses"]] == [1, 2]
    (warning,) = record["connection"]["warnings"]
    assert warning["code"] == "internal-error" and "the analysis worker exited" in warning["message"]
    assert flow.marked and "internal-error" in flow.comment
    assert len(again.metadata["toolcall_lens"]["responses"]) == 2
    assert again.metadata["toolcall_lens"]["connection"]["warnings"] == []


def test_a_connection_the_worker_cannot_analyse_fails_alone():
    # A connection whose limits the worker refuses (as one flow's fault): an internal-error on it, no
    # result; the connection beside it is analysed as ever.
    from websocket_turns import response_events

    from toolcall_lens.websocket import RemoteSocketWatch

    turn = [json.dumps({"type": "response.create", "model": "m"}).encode()]
    turn += [json.dumps(event).encode() for event in response_events("r1", 2, interleaved=True)]

    async def go(worker):
        limits = dataclasses.asdict(DEFAULT_LIMITS)
        limits["strategies"] = ("no-such-strategy",)
        key = worker._open(worker_module.CONNECT, ("openai-responses", "/v1/responses", limits, None), None)
        broken = worker_module.RemoteConnection(worker, key, "openai-responses", "/v1/responses")
        good = worker.connect("openai-responses", "/v1/responses", DEFAULT_LIMITS)
        said = []
        later = asyncio.get_running_loop().call_later
        watches = [RemoteSocketWatch(c, 0, later, said.append) for c in (broken, good)]
        for watch in watches:
            watch.held = [(i == 0, content, True, 1.0 + i) for i, content in enumerate(turn)]
            watch.feed_held()
        ended = [await watch.finish_remote(9.0, None) for watch in watches]
        for watch in watches:
            watch.refresh([])
        return watches, ended, said

    out = []
    with_worker(lambda worker: _keep(out, go(worker)))
    (broken, good), (broken_ended, good_ended), said = out[0]
    assert said == []  # nothing settled before the end
    assert broken_ended == [] and broken.failure and "no-such-strategy" in broken.failure
    (warning,) = broken.record["connection"]["warnings"]
    assert warning["code"] == "internal-error" and "no-such-strategy" in warning["message"]
    (result,) = good_ended
    assert good.failure is None and good.record["responses"] == [result]
    assert [c["arguments"] for c in result["choices"][0]["tool_calls"]] == ['{"n": 0}', '{"n": 1}']


async def _keep(out: list, coroutine) -> None:
    out.append(await coroutine)


def test_results_analysed_in_the_worker_come_back_priced_with_the_proxys_prices(monkeypatch, tmp_path):
    # The worker prices what it analyses (genai-prices costs 50-80 us a response): with the price file the
    # proxy was given, as of the request's time. The proxy's own pricing is not called at all.
    from test_addon import llm_flow
    from websocket_turns import send, ws_flow

    from accumulator.cost import Prices

    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"gpt-test": {"input_mtok": 2, "output_mtok": 8}}))
    in_proxy = []
    original = Prices.cost
    monkeypatch.setattr(Prices, "cost", lambda self, *a, **k: in_proxy.append(1) or original(self, *a, **k))
    usage = chunk(usage={"prompt_tokens": 1000, "completion_tokens": 500})
    usage["choices"] = []
    stream = CHAT[: -len(b"data: [DONE]\n\n")] + sse(usage)
    lens = addon_module.ToolcallLens()

    async def go():
        with taddons.context(lens) as tctx:
            tctx.configure(lens, toolcall_lens_worker=True, toolcall_lens_prices=str(prices))
            flow = llm_flow()
            lens.request(flow)
            lens.responseheaders(flow)
            flow.response.stream(stream)
            flow.response.stream(b"")
            await lens.response(flow)
            socket = ws_flow()
            lens.websocket_start(socket)
            send(lens, socket, True, {"type": "response.create", "model": "gpt-test"})
            send(
                lens,
                socket,
                False,
                {"type": "response.created", "response": {"id": "r1", "model": "gpt-test"}},
            )
            done = {"id": "r1", "status": "completed", "usage": {"input_tokens": 1000, "output_tokens": 500}}
            send(lens, socket, False, {"type": "response.completed", "response": done})
            await lens.websocket_end(socket)
            lens.done()
        return flow, socket

    flow, socket = asyncio.run(asyncio.wait_for(go(), 60))
    (response,) = socket.metadata["toolcall_lens"]["responses"]
    for result in (flow.metadata["toolcall_lens"], response):
        assert result["cost"]["total"] == pytest.approx(1000 * 2e-6 + 500 * 8e-6)
        assert result["cost"]["price"]["source"] == f"price file {prices}"
    assert in_proxy == []


async def through_hooks(lens, flow, body: bytes) -> None:
    """One flow through the addon's hooks as mitmproxy runs them, awaiting what they return."""
    for hook in ("request", "responseheaders"):
        pending = getattr(lens, hook)(flow)
        if pending is not None:
            await pending
    if callable(flow.response.stream):
        for piece in (body[i : i + 97] for i in range(0, len(body), 97)):
            flow.response.stream(piece)
        flow.response.stream(b"")
    else:
        flow.response.content = body
    pending = lens.response(flow)
    if pending is not None:
        await pending


def test_the_echo_check_made_in_the_worker_says_what_the_proxys_says():
    # Three turns: a stream; a buffered response (analysed in the proxy) whose request echoes the
    # stream's calls wrong; a stream whose request echoes the buffered response's call wrong and answers
    # it. With the worker, the third is checked there, which knows the buffered response's call because
    # the proxy told it (RECORD). Warnings, evidence, the back-links on the earlier flows and the
    # sessions are the same with the worker as without.
    from mitmproxy.addons.view import View
    from test_addon import CLEAN, PRODUCTION, llm_flow

    def assistant(*calls: tuple[str, str, str]) -> dict:
        return {
            "role": "assistant",
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in calls
            ],
        }

    buffered = {
        "id": "chatcmpl-b",
        "object": "chat.completion",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": assistant(("call_json", "lookup", "{}")),
                "finish_reason": "tool_calls",
            }
        ],
    }
    wrong_echo = [
        {"role": "user", "content": "go"},
        assistant(("call_abc", "search_circulars", ""), ("call_xyz", "get_user_profile", "{}")),
    ]
    turns = [
        ({"model": "m", "stream": True, "messages": [{"role": "user", "content": "go"}]}, True, PRODUCTION),
        ({"model": "m", "messages": wrong_echo}, False, json.dumps(buffered).encode()),
        (
            {
                "model": "m",
                "stream": True,
                "messages": [
                    *wrong_echo,
                    assistant(("call_json", "lookup", '{"x": 1}')),
                    {"role": "tool", "tool_call_id": "call_json", "content": "ok"},
                ],
            },
            True,
            CLEAN,
        ),
    ]

    async def conversation(worker: bool) -> list:
        lens = addon_module.ToolcallLens()
        view = View()
        with taddons.context(lens, view) as tctx:
            tctx.configure(lens, toolcall_lens_worker=worker)
            flows = []
            for request, streamed, body in turns:
                flow = llm_flow(request=request, content_type=None if streamed else "application/json")
                if streamed:
                    flow.response.headers["content-type"] = "text/event-stream"
                view.add([flow])
                await through_hooks(lens, flow, body)
                assert callable(flow.response.stream) is streamed
                assert (isinstance(flow.response.stream, StreamWatch) and flow.response.stream.remote) is (
                    worker and streamed
                )
                flows.append(flow)
            lens.done()
        names = {flow.id: f"flow {n}" for n, flow in enumerate(flows)}

        def told(value):  # flow ids as the turn they are, the same in both runs
            text = json.dumps(value, sort_keys=True)
            for flow_id, name in names.items():
                text = text.replace(flow_id, name)
            return json.loads(text)

        return [
            told(
                {
                    "warnings": [
                        (w["code"], w.get("id")) for w in flow.metadata["toolcall_lens"]["warnings"]
                    ],
                    "evidence": flow.metadata["toolcall_lens"].get("evidence"),
                    "session": flow.metadata["toolcall_lens"]["session"],
                    "links": flow.metadata.get("toolcall_lens_echoes"),
                    "comment": flow.comment,
                }
            )
            for flow in flows
        ]

    async def both():  # on one loop: mitmproxy's log handler outlives a test master
        return [await conversation(worker) for worker in (True, False)]

    with_worker_turns, in_proxy_turns = asyncio.run(asyncio.wait_for(both(), 60))
    assert with_worker_turns == in_proxy_turns
    first, second, third = in_proxy_turns
    assert ("client-misassembled", "call_abc") in [tuple(w) for w in second["warnings"]]
    assert second["evidence"]["earlier_flows"] == ["flow 0"]
    assert [w[1] for w in third["warnings"] if w[0] == "client-misassembled"] == [
        "call_abc",
        "call_xyz",
        "call_json",
    ]
    assert third["evidence"]["earlier_flows"] == ["flow 0", "flow 1"]
    assert [link["flow_id"] for link in first["links"]] == ["flow 1", "flow 2"]
    assert [link["flow_id"] for link in second["links"]] == ["flow 2"]
    assert first["session"]["id"] == second["session"]["id"] == third["session"]["id"] == "flow 0"
    assert [r["id"] for r in third["session"]["tool_results"]] == ["call_json"]


def test_a_follow_up_sent_before_the_earlier_result_is_back_is_checked_against_it_and_the_proxys_end_waits():
    # A client reads a stream to its last event and sends its follow-up while the worker still analyses
    # that stream: the follow-up goes on at once (its request hook reads nothing), and the worker, which
    # reads it, has the earlier result first (one pipe, in order): its echoes are checked against it. A
    # proxy stopped meanwhile (Ctrl-C) annotates the flows on their way before it ends.
    from test_addon import CLEAN, PRODUCTION, PRODUCTION_CALLS, chat_turn, llm_flow

    lens = addon_module.ToolcallLens()

    async def go():
        with taddons.context(lens) as tctx:
            tctx.configure(lens, toolcall_lens_worker=True)
            earlier = llm_flow()
            assert lens.request(earlier) is None
            lens.responseheaders(earlier)
            earlier.response.stream(PRODUCTION)
            earlier.response.stream(b"")
            ending = asyncio.ensure_future(lens.response(earlier))  # as mitmproxy runs the hook
            await asyncio.sleep(0)
            assert earlier.id in lens.ending and "toolcall_lens" not in earlier.metadata
            follow_up = llm_flow(request=chat_turn(PRODUCTION_CALLS, ["call_abc", "call_xyz"]))
            assert lens.request(follow_up) is None  # no wait: nothing is read here
            assert not ending.done()
            lens.responseheaders(follow_up)
            follow_up.response.stream(CLEAN)
            follow_up.response.stream(b"")
            last = asyncio.ensure_future(lens.response(follow_up))
            await asyncio.sleep(0)
            stopping = lens.done()  # the proxy stops while both results are on their way
            assert stopping is not None and lens.worker.alive
            await stopping
            assert ending.done() and last.done() and not lens.worker.alive
        return earlier, follow_up

    earlier, follow_up = asyncio.run(asyncio.wait_for(go(), 60))
    assert "toolcall_lens" in earlier.metadata
    assert follow_up.metadata["toolcall_lens"]["evidence"]["earlier_flows"] == [earlier.id]
    assert follow_up.metadata["toolcall_lens"]["evidence"]["matched"] == 2
    assert (
        follow_up.metadata["toolcall_lens"]["session"]["id"]
        == earlier.metadata["toolcall_lens"]["session"]["id"]
    )


def test_a_connection_in_the_worker_shows_its_running_calls_live(monkeypatch):
    # The live update ships what is held and asks the worker for a snapshot, shown when it comes (and
    # mitmweb told); the record takes over once the response settles.
    from mitmproxy import hooks
    from websocket_turns import answer, response_events, send, ws_flow

    now = [1000.0]
    monkeypatch.setattr(addon_module.time, "time", lambda: now[0])
    lens = addon_module.ToolcallLens()
    updated = []

    async def go():
        with taddons.context(lens) as tctx:
            tctx.configure(lens, toolcall_lens_worker=True, toolcall_lens_live_updates=2)
            monkeypatch.setattr(
                tctx.master.addons,
                "trigger",
                lambda event: updated.append(event.flows) if isinstance(event, hooks.UpdateHook) else None,
            )
            flow = ws_flow()
            lens.websocket_start(flow)
            send(lens, flow, True, {"type": "response.create", "model": "m"})
            for event in response_events("r1", 2)[:5]:  # created, two calls added, a first fragment
                now[0] += 0.6  # each one due for an update
                send(lens, flow, False, event)
                await asyncio.sleep(0.05)  # the snapshot's answer
            waited = 0.0  # a worker slow to start answers later
            while not flow.comment.endswith("so far: tool_0, tool_1") and waited < 10:
                await asyncio.sleep(0.05)
                waited += 0.05
            live = flow.metadata["toolcall_lens_live"]
            assert [c["name"] for c in live["running"][0]["choices"][0]["tool_calls"]] == ["tool_0", "tool_1"]
            assert flow.comment.endswith("2 call(s) so far: tool_0, tool_1") and updated[-1] == [flow]
            for event in response_events("r1", 2)[5:]:
                send(lens, flow, False, event)
            send(lens, flow, True, answer("r1", 2))
            now[0] += 0.6
            send(lens, flow, False, {"type": "response.created", "response": {"id": "r2"}})
            await asyncio.sleep(0.1)
            assert (
                "toolcall_lens_live" not in flow.metadata
                or flow.metadata["toolcall_lens_live"]["finished"] == 1
            )
            assert [r["websocket"]["position"] for r in flow.metadata["toolcall_lens"]["responses"]] == [1]
            await lens.websocket_end(flow)
            lens.done()
        return flow

    flow = asyncio.run(asyncio.wait_for(go(), 60))
    assert "toolcall_lens_live" not in flow.metadata
    assert flow.comment.startswith(
        "openai-responses websocket: 2 responses (1 incomplete), calls: tool_0, tool_1"
    )


@pytest.mark.heavy
def test_a_connection_of_100000_messages_in_the_worker_holds_bounded_memory_on_both_sides():
    """As tests/frontdoors/test_addon_websocket.py shows for the analysis in the proxy: after 100,000
    messages the proxy holds what it held after 20,000 (the flow's messages trimmed, the results on the
    record capped, a batch held at most), and so does the worker (its connection's results capped, each
    response's analysis freed once settled)."""
    import gc

    from websocket_turns import send

    text = "x" * 200

    async def go():
        async with socket_in_the_worker() as (lens, flow):

            async def traffic(start, stop):
                for n in range(start, stop, 5):
                    send(lens, flow, True, {"type": "response.create", "model": "m"})
                    send(lens, flow, False, {"type": "response.created", "response": {"id": f"r{n}"}})
                    send(lens, flow, False, {"type": "response.output_text.delta", "delta": text})
                    send(lens, flow, False, {"type": "response.output_text.delta", "delta": text})
                    done = {"id": f"r{n}", "status": "completed"}
                    send(lens, flow, False, {"type": "response.completed", "response": done})
                    if n % 500 == 0:
                        await asyncio.sleep(0)  # the loop reads the worker's answers, as mitmproxy's would
                lens.sockets[flow.id].feed_held()
                await asyncio.sleep(0.3)  # every answer in
                gc.collect()
                return len(gc.get_objects()), memory(lens.worker.process.pid)

            after_20k = await traffic(0, 20_000)  # past every cap: the flow's messages, the results
            after_100k = await traffic(20_000, 100_000)
            record = flow.metadata["toolcall_lens"]
            await lens.websocket_end(flow)
            lens.done()
            return after_20k, after_100k, record, len(flow.websocket.messages)

    (objects_20k, worker_20k), (objects_100k, worker_100k), record, kept = asyncio.run(
        asyncio.wait_for(go(), 240)
    )
    assert record["connection"]["messages"] == {"client": 20_000, "server": 80_000}
    assert len(record["responses"]) == 1000 and record["connection"]["results_dropped"] == 19_000
    # 80,000 more messages (about 23 MB of content) leave next to no more objects alive in the proxy, and
    # the worker's memory where it was (what its allocator keeps aside).
    assert objects_100k - objects_20k < 500, (objects_20k, objects_100k)
    assert worker_100k - worker_20k < 4 << 20, (worker_20k, worker_100k)
    assert kept < 2 * 1000


def test_a_connection_whose_worker_died_before_its_first_trim_goes_on_without_an_error():
    # The trim's note goes to the worker with the next batch: with the worker gone, the hook still
    # returns (the connection already says why its analysis stopped) and the messages are trimmed.
    from websocket_turns import send

    async def go():
        async with socket_in_the_worker(toolcall_lens_websocket_keep=10) as (lens, flow):
            await killed(lens.worker)
            for n in range(30):
                send(lens, flow, False, {"type": "response.created", "response": {"id": f"r{n}"}})
            assert len(flow.websocket.messages) < 20
            await lens.websocket_end(flow)
            lens.done()
        return flow

    flow = asyncio.run(asyncio.wait_for(go(), 60))
    record = flow.metadata["toolcall_lens"]
    assert [w["code"] for w in record["connection"]["warnings"]] == ["internal-error"]
    assert record["connection"]["trimmed"] > 0


def test_a_connection_open_when_the_proxy_stops_is_not_marked_failed():
    # The proxy's end stops the worker: a connection still open then is no failed analysis.
    from websocket_turns import a_turn

    async def go():
        async with socket_in_the_worker() as (lens, flow):
            a_turn(lens, flow, "r1", calls=0)
            await until(lambda: responses_on(flow) == 1)  # shipped by the timer, settled, annotated
            assert lens.done() is None
            await asyncio.sleep(0.05)
        return flow

    flow = asyncio.run(asyncio.wait_for(go(), 60))
    record = flow.metadata["toolcall_lens"]
    assert len(record["responses"]) == 1 and record["connection"]["warnings"] == []
    assert not flow.marked


def test_an_answer_a_connection_cannot_take_is_that_connections_failure_not_the_readers():
    # The worker's reader serves every flow: what one connection's watch cannot take ends that
    # connection's analysis, and the reader goes on.
    from toolcall_lens.websocket import RemoteSocketWatch

    async def go(worker):
        said = []
        connection = worker.connect("openai-responses", "/v1/responses", DEFAULT_LIMITS)
        watch = RemoteSocketWatch(connection, 0, asyncio.get_running_loop().call_later, said.append)
        watch.settled(([{"no": "websocket section"}], {}, None))
        assert said == [[]] and "KeyError" in watch.failure
        watch.refresh([])
        (warning,) = watch.record["connection"]["warnings"]
        assert warning["code"] == "internal-error"
        assert await chat_result(open_chat(worker))  # the reader, and the worker, go on

    with_worker(go)
