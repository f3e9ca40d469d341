"""The addon across a reload of its script, as mitmproxy does it (its own ScriptLoader watching a copy of
addon.py, in its test harness): the addon loaded next goes on with the state of the one removed
(toolcall_lens/handover.py). A stream in flight is annotated at its end, its body kept; an open WebSocket
connection is annotated at its close; an agent's session, its OTLP trace and the JSONL export go on. A
script that fails to load again shuts the addon down as the proxy's end would, the traffic untouched.
Before the hand-over, the flow in flight ended with no result and no body, its session began anew."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
from pathlib import Path

import orjson
from chat_flows import chat_stream, follow_up, stream_flow, through_addon
from mitmproxy import hooks
from mitmproxy.addons import script
from mitmproxy.test import taddons
from otlp_receiver import Receiver
from streams import DATA
from websocket_turns import response_events, send, ws_flow

from toolcall_lens import handover

ADDON = Path(__file__).resolve().parents[2] / "addon.py"
PRODUCTION = (DATA / "production_interleaved.sse").read_bytes()
REQUEST = json.loads((DATA / "production_request.json").read_text())
SEARCH = ("call_1", "search", '{"q": "rbi"}')
PROFILE = ("call_2", "get_user", '{"id": 7}')
CALLED = ["search_circulars", "get_user_profile"]


class Proxy:
    """A master whose ScriptLoader runs a copy of addon.py, reloaded when the copy changes."""

    def __init__(self, tctx, path: Path) -> None:
        self.tctx = tctx
        self.path = path
        self.mtime = path.stat().st_mtime

    def lens(self):
        return self.tctx.master.addons.get("toolcalllens")

    async def reload(self, text: str | None = None):
        """The script's file changed (rewritten with ``text``, or touched): the addon loaded after it."""
        before = self.lens()
        if text is not None:
            self.path.write_text(text)
        self.mtime += 10
        os.utime(self.path, (self.mtime, self.mtime))
        await until(lambda: self.lens() is not before)
        await asyncio.sleep(0)  # the step after the reload: an addon left unclaimed is shut down in it
        return self.lens()


async def until(condition, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, "mitmproxy did not (re)load the script"
        await asyncio.sleep(0.01)


def run(tmp_path, monkeypatch, test, **settings) -> None:
    """``test(proxy)`` with the copy of addon.py loaded and configured with ``settings`` (the analysis in
    the proxy: tests/live/test_reload.py has the worker's)."""
    monkeypatch.setattr(script, "ReloadInterval", 0.01)
    path = tmp_path / "addon.py"
    shutil.copy(ADDON, path)

    async def main() -> None:
        loader = script.ScriptLoader()
        with taddons.context(loader) as tctx:
            tctx.master.addons.invoke_addon_sync(loader, hooks.RunningHook())  # reloads come while it runs
            tctx.configure(loader, scripts=[str(path)])
            proxy = Proxy(tctx, path)
            await until(lambda: proxy.lens() is not None)
            tctx.configure(proxy.lens(), toolcall_lens_worker=False, toolcall_lens_live_updates=0, **settings)
            try:
                await test(proxy)
            finally:
                if proxy.lens() is not None:
                    proxy.lens().done()

    asyncio.run(main())


def a_stream_begins(lens):
    """A stream's flow past its request and its response headers: (the flow, the chunks to come)."""
    flow = stream_flow(REQUEST)
    lens.request(flow)
    lens.responseheaders(flow)
    return flow, [PRODUCTION[i : i + 41] for i in range(0, len(PRODUCTION), 41)]


def test_a_stream_in_flight_across_a_reload_is_annotated_at_its_end_and_keeps_its_body(
    tmp_path, monkeypatch, caplog
):
    caplog.set_level(logging.INFO)

    async def test(proxy):
        first = proxy.lens()
        flow, sent = a_stream_begins(first)
        half = len(sent) // 2
        passed = [flow.response.stream(piece) for piece in sent[:half]]
        second = await proxy.reload()
        assert second is not first and type(second) is not type(first)  # the file imported anew
        passed += [flow.response.stream(piece) for piece in sent[half:]]
        assert flow.response.stream(b"") == b""
        second.response(flow)  # mitmproxy runs the hook on the addon in its chain now: the new one
        assert all(a is b for a, b in zip(passed, sent, strict=True))
        result = flow.metadata["toolcall_lens"]  # before: none, the flow forgotten
        assert result["complete"] is True
        assert [c["name"] for c in result["choices"][0]["tool_calls"]] == CALLED
        assert [w["code"] for w in result["warnings"]] == ["recency-misroute"]
        assert flow.marked == ":warning:" and "recency-misroute" in flow.comment
        assert flow.response.raw_content == PRODUCTION  # before: None, "content missing" in a dump
        assert second.watches == {}
        assert "script reloaded; 1 stream(s) and 0 connection(s) in flight carry on" in caplog.text
        assert "restart the proxy" not in caplog.text  # its modules are as they were

    run(tmp_path, monkeypatch, test)


def test_a_websocket_connection_open_across_a_reload_is_annotated_at_its_close(tmp_path, monkeypatch):
    async def test(proxy):
        first = proxy.lens()
        flow = ws_flow()
        first.websocket_start(flow)
        send(first, flow, True, {"type": "response.create", "model": "m"})
        events = response_events("r1", 2, interleaved=True)
        for event in events[:3]:
            send(first, flow, False, event)
        second = await proxy.reload()
        for event in events[3:]:
            send(second, flow, False, event)
        second.websocket_end(flow)
        record = flow.metadata["toolcall_lens"]  # before: none, the connection dropped by the reload
        (response,) = record["responses"]
        assert response["complete"] is True
        assert [c["name"] for c in response["choices"][0]["tool_calls"]] == ["tool_0", "tool_1"]
        assert [c["arguments"] for c in response["choices"][0]["tool_calls"]] == ['{"n": 0}', '{"n": 1}']
        assert second.sockets == {}

    run(tmp_path, monkeypatch, test)


def test_a_session_its_otlp_trace_and_the_jsonl_export_go_on_across_a_reload(tmp_path, monkeypatch):
    jsonl = tmp_path / "llm.jsonl"
    headers = {"session-id": "codex-1"}

    with Receiver() as receiver:

        async def test(proxy):
            first = proxy.lens()
            one = through_addon(first, chat_stream([SEARCH, PROFILE]), follow_up([]), headers)
            second = await proxy.reload()
            two = through_addon(second, chat_stream([]), follow_up([[SEARCH, PROFILE]]), headers)
            assert [f.metadata["toolcall_lens"]["session"]["turn"] for f in (one, two)] == [1, 2]
            assert second.sessions.get("codex-1").count == 2
            second.done()  # the proxy's end: the session's span goes now

        run(
            tmp_path,
            monkeypatch,
            test,
            toolcall_lens_otlp_endpoint=receiver.url,
            toolcall_lens_jsonl=str(jsonl),
        )
        spans = receiver.wait_for(3)
    sessions = [s for s in spans if s["name"] == "invoke_agent codex-1"]
    turns = [s for s in spans if s["name"].startswith("chat ")]
    # One trace, once: before, the reload closed the export (the session's span with one turn) and the
    # next addon began the session again (a second span of the same name, a trace of its own).
    assert len(sessions) == 1 and len(turns) == 2
    assert {s["parentSpanId"] for s in turns} == {sessions[0]["spanId"]}
    assert sessions[0]["attributes"]["toolcall_lens.session.turns"] == 2
    records = [orjson.loads(line) for line in jsonl.read_bytes().splitlines()]
    assert [r["result"]["session"]["turn"] for r in records] == [1, 2]


def test_a_script_that_fails_to_load_again_shuts_the_addon_down_and_the_traffic_goes_on(
    tmp_path, monkeypatch, caplog
):
    caplog.set_level(logging.INFO)
    jsonl = tmp_path / "llm.jsonl"

    async def test(proxy):
        first = proxy.lens()
        flow, sent = a_stream_begins(first)
        passed = [flow.response.stream(piece) for piece in sent[:5]]
        assert await proxy.reload("this is not Python (\n") is None
        assert "error in script" in caplog.text
        assert "toolcall-lens: stopped: its script was unloaded, or did not load again" in caplog.text
        # Unclaimed: ended as at the proxy's end. Its flow in flight passes on, byte for byte, unread.
        assert first.jsonl is None and first.watches == {} and first.sockets == {}
        passed += [flow.response.stream(piece) for piece in sent[5:]]
        assert all(a is b for a, b in zip(passed, sent, strict=True))
        fixed = await proxy.reload(ADDON.read_text())
        assert fixed is not None and fixed is not first and len(fixed.sessions) == 0  # begun anew
        again = through_addon(fixed, chat_stream([SEARCH]), follow_up([]))
        assert again.metadata["toolcall_lens"]["session"]["turn"] == 1

    run(tmp_path, monkeypatch, test, toolcall_lens_jsonl=str(jsonl))


def test_the_proxys_end_after_a_reload_shuts_the_addon_down_once(tmp_path, monkeypatch):
    async def test(proxy):
        first = proxy.lens()
        through_addon(first, chat_stream([SEARCH]), follow_up([]))
        second = await proxy.reload()
        assert second.jsonl is not None
        second.done()  # still in mitmproxy's chain: the end, not a reload
        assert second.jsonl is None and first.jsonl is None  # one state, shut down

    run(tmp_path, monkeypatch, test, toolcall_lens_jsonl=str(tmp_path / "llm.jsonl"))


def test_a_reload_after_toolcall_lens_itself_changed_says_to_restart_the_proxy(tmp_path, monkeypatch, caplog):
    """A ``git pull`` changes addon.py and the modules it imports; mitmproxy reads addon.py again, and
    Python keeps the modules it imported before: the log says which changed, and to restart."""
    caplog.set_level(logging.INFO)
    (limits,) = [path for path in handover.LOADED if path.endswith(os.path.join("accumulator", "limits.py"))]

    async def test(proxy):
        monkeypatch.setitem(handover.LOADED, limits, 0.0)  # changed on disk after the proxy imported it
        await proxy.reload()
        (warning,) = [r for r in caplog.records if "restart the proxy" in r.getMessage()]
        assert warning.levelno == logging.WARNING
        assert warning.getMessage() == (
            "toolcall-lens: addon.py reloaded, but its modules changed since the proxy started "
            f"({os.path.join('accumulator', 'limits.py')}): restart the proxy to run them"
        )

    run(tmp_path, monkeypatch, test)
