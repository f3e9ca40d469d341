"""A flow replayed in mitmproxy (mitmweb's Replay, the ``replay.client`` command, ``mitmdump -C``): mitmproxy
sends the same flow's request again (``is_replay = "request"``, its response and error cleared) through the
same hooks. Before, the addon sent it with the API keys it had masked (the provider refuses a replay), left
the earlier response's comment, marker and result on a replay that failed or came back clean, and counted
each replay as the agent's next turn (three replays: ``tool-call-loop``)."""

from __future__ import annotations

import gc
import io
import json
import logging

from chat_flows import chat_stream, follow_up, stream_flow
from mitmproxy import eventsequence, flowfilter
from mitmproxy import flow as mflow
from mitmproxy import io as mio
from mitmproxy.test import tflow
from streams import DATA

from accumulator.cli import main
from toolcall_lens.redact import REDACTED, mask

LOUD = (DATA / "production_interleaved.sse").read_bytes()  # two calls interleaved: recency-misroute
CLEAN = (DATA / "openai_chat_parallel.sse").read_bytes()
KEY = "Bearer sk-proj-0123456789abcdefghijklmnop"
URL = "https://generativelanguage.googleapis.com/v1/chat/completions?key=AIzaSyREALKEY0123456789&alt=sse"
REQUEST = {"model": "gpt-4o", "stream": True, "messages": [{"role": "user", "content": "go"}]}


def _flow(**headers: str):
    flow = stream_flow(REQUEST, URL)
    flow.request.headers["authorization"] = KEY
    for name, value in headers.items():
        flow.request.headers[name.replace("_", "-")] = value
    return flow


def _answer(lens, flow, body: bytes) -> None:
    """The response's side of the hooks, as mitmproxy calls them: its headers, its chunks, its end."""
    lens.responseheaders(flow)
    sent = [body[i : i + 64] for i in range(0, len(body), 64)]
    assert all(flow.response.stream(piece) is piece for piece in sent)
    flow.response.stream(b"")
    flow.response.raw_content = body
    lens.response(flow)


def _through(lens, flow, body: bytes):
    lens.requestheaders(flow)
    lens.request(flow)
    _answer(lens, flow, body)
    return flow


def _replay(lens, flow) -> None:
    """What mitmproxy's ClientPlayback.start_replay does, then the request's hooks as the replay runs them."""
    flow.backup()
    flow.is_replay = "request"
    flow.response = None
    flow.error = None
    flow.live = True  # as mitmproxy's HTTP layer makes it, before the request's hooks
    lens.requestheaders(flow)
    lens.request(flow)


def _replayed(lens, flow, body: bytes) -> None:
    _replay(lens, flow)
    flow.response = stream_flow(REQUEST).response
    _answer(lens, flow, body)


def test_a_replay_goes_out_with_the_keys_the_addon_masked_and_is_stored_masked_again(lens):
    flow = _through(lens, _flow(x_api_key="sk-ant-api03-SECRETSECRET"), CLEAN)
    assert flow.request.headers["authorization"] == mask(KEY)
    assert flow.request.query["key"].endswith(REDACTED)
    _replay(lens, flow)
    # As the request goes out again: every key as the agent sent it, the other fields as they were.
    assert flow.request.headers["authorization"] == KEY
    assert flow.request.headers["x-api-key"] == "sk-ant-api03-SECRETSECRET"
    assert flow.request.query["key"] == "AIzaSyREALKEY0123456789" and flow.request.query["alt"] == "sse"
    flow.response = stream_flow(REQUEST).response
    _answer(lens, flow, CLEAN)
    assert flow.request.headers["authorization"] == mask(KEY)
    assert flow.request.headers["x-api-key"] == mask("sk-ant-api03-SECRETSECRET")
    assert flow.request.query["key"].endswith(REDACTED)
    # And again: the second replay has them too.
    _replay(lens, flow)
    assert flow.request.headers["authorization"] == KEY


def test_a_key_changed_before_the_replay_goes_as_changed(lens):
    flow = _through(lens, _flow(), CLEAN)
    flow.request.headers["authorization"] = "Bearer sk-another-key"  # edited in mitmweb, or modify_headers
    _replay(lens, flow)
    assert flow.request.headers["authorization"] == "Bearer sk-another-key"
    assert flow.request.query["key"] == "AIzaSyREALKEY0123456789"  # what was not changed comes back


def test_a_replay_on_a_failed_request_puts_back_the_keys_masked_at_its_error(lens):
    flow = _flow()
    lens.requestheaders(flow)
    lens.request(flow)
    flow.response = None
    flow.error = mflow.Error("Connect call failed")
    lens.error(flow)
    assert flow.request.headers["authorization"] == mask(KEY)
    _replay(lens, flow)
    assert flow.request.headers["authorization"] == KEY


def test_a_flow_loaded_with_its_keys_masked_is_replayed_with_a_warning_that_says_how_to_give_one(
    lens, caplog
):
    flow = _flow()
    flow.request.headers["authorization"] = mask(KEY)  # as a capture made with redaction holds it
    caplog.set_level(logging.WARNING)
    _replay(lens, flow)
    said = [r.getMessage() for r in caplog.records if "replaying" in r.getMessage()]
    assert len(said) == 1
    assert "authorization redacted: the provider will refuse it" in said[0]
    assert "modify_headers" in said[0] and "sk-proj-0123" not in said[0] and "AIzaSy" not in said[0]
    caplog.clear()
    _replay(lens, _through(lens, _flow(), CLEAN))  # its keys known: nothing to say
    assert not [r for r in caplog.records if "replaying" in r.getMessage()]


def test_a_replay_takes_the_earlier_response_annotation_with_it(lens):
    flow = _through(lens, _flow(), LOUD)
    assert flow.marked == ":warning:" and "recency-misroute" in flow.comment
    assert "toolcall_lens" in flow.metadata
    _replay(lens, flow)
    assert (flow.comment, flow.marked) == ("", "")
    assert "toolcall_lens" not in flow.metadata and "toolcall_lens_live" not in flow.metadata
    # The replay fails (the provider is down): mitmproxy's error, and no claim about a response it has not.
    flow.error = mflow.Error("Connect call failed")
    lens.error(flow)
    assert (flow.comment, flow.marked) == ("", "") and "toolcall_lens" not in flow.metadata


def test_a_clean_replay_of_a_flagged_flow_is_no_longer_marked(lens):
    flow = _through(lens, _flow(), LOUD)
    _replayed(lens, flow, CLEAN)
    result = flow.metadata["toolcall_lens"]
    assert not [w for w in result["warnings"] if w["severity"] == "warning"]
    assert flow.marked == "" and flow.comment.startswith("openai-chat") and "recency" not in flow.comment


def test_a_replay_keeps_what_the_user_wrote_and_marked(lens):
    flow = _through(lens, _flow(), LOUD)
    flow.comment, flow.marked = "the agent looped after this one", ":red_circle:"
    _replay(lens, flow)
    assert (flow.comment, flow.marked) == ("the agent looped after this one", ":red_circle:")
    # A back-reference a later flow added to the addon's line goes with it.
    flow = _through(lens, _flow(), LOUD)
    flow.comment += " | echoed wrong by flow 1234"
    flow.metadata["toolcall_lens_echoes"] = [{"flow_id": "1234", "code": "echo-mismatch", "ids": []}]
    _replay(lens, flow)
    assert flow.comment == "" and "toolcall_lens_echoes" not in flow.metadata


def test_each_replay_is_a_session_of_its_own_never_the_agents_next_turn_nor_a_loop(lens, tmp_path):
    jsonl = tmp_path / "lens.jsonl"
    lens.tctx.configure(lens, toolcall_lens_jsonl=str(jsonl))
    body = chat_stream([("call_1", "read_file", '{"path": "a.txt"}')])
    flow = _through(lens, _flow(session_id="run-1"), body)
    for _ in range(3):
        _replayed(lens, flow, body)
        session = flow.metadata["toolcall_lens"]["session"]
        assert session["by"] == "replay" and session["turn"] == 1 and session["id"].startswith(flow.id + "#")
        assert "tool-call-loop" not in flow.comment
    assert lens.sessions.get("run-1").count == 1
    records = [json.loads(line) for line in jsonl.read_bytes().splitlines()]
    assert [r["replay"] for r in records] == [None, "request", "request", "request"]
    assert len({r["session"] for r in records}) == 4
    # The agent making the same call again in its session: that is a loop (the check still works).
    turns = [_through(lens, _flow(session_id="run-1"), body) for _ in range(2)]
    assert [f.metadata["toolcall_lens"]["session"]["turn"] for f in turns] == [2, 3]
    assert "tool-call-loop" not in turns[0].comment and "tool-call-loop" in turns[1].comment


def test_the_cli_reads_a_dump_holding_a_flow_and_its_replays_as_the_addon_did(lens, tmp_path, capsys):
    # mitmdump -w saves a replayed flow again at each replay's end: one id, several entries.
    body = chat_stream([("call_1", "read_file", '{"path": "a.txt"}')])
    dump = tmp_path / "replays.flows"
    flow = _through(lens, _flow(session_id="run-1"), body)
    with dump.open("wb") as file:
        writer = mio.FlowWriter(file)
        writer.add(flow)
        for _ in range(3):
            _replayed(lens, flow, body)
            writer.add(flow)
    assert main([str(dump), "--json"]) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    assert [r["source"].get("replay") for r in results] == [None, "request", "request", "request"]
    assert [(r["session"]["by"], r["session"]["turn"]) for r in results] == [
        ("header session-id", 1),
        *[("replay", 1)] * 3,
    ]
    assert not [w for r in results for w in r["warnings"] if w["code"] == "tool-call-loop"]


def test_a_replays_span_says_it_is_one_and_is_a_trace_of_its_own(lens):
    from otlp_receiver import Receiver

    with Receiver() as receiver:
        lens.tctx.configure(lens, toolcall_lens_otlp_endpoint=receiver.url)
        body = chat_stream([("call_1", "read_file", '{"path": "a.txt"}')])
        flow = _through(lens, _flow(session_id="run-1"), body)
        _replayed(lens, flow, body)
        lens.done()  # the sessions' spans go at shutdown
        spans = receiver.wait_for(4)
    turns = [s for s in spans if s["name"].startswith("chat ")]
    assert [s["attributes"]["toolcall_lens.session.by"] for s in turns] == ["header session-id", "replay"]
    agent, replay = (s["attributes"]["gen_ai.conversation.id"] for s in turns)
    assert agent == "run-1" and replay.startswith(flow.id + "#")
    assert turns[0]["traceId"] != turns[1]["traceId"]


def test_a_fault_in_preparing_a_replay_costs_the_replay_nothing_but_its_key(lens, monkeypatch, caplog):
    import addon as addon_module

    flow = _through(lens, _flow(), CLEAN)

    def broken(flow, masked):
        raise RuntimeError("boom")

    monkeypatch.setattr(addon_module, "restore_credentials", broken)
    monkeypatch.setattr(addon_module, "still_redacted", lambda request: broken(request, None))
    caplog.set_level(logging.WARNING)
    _replay(lens, flow)  # no exception: mitmproxy sends the replay as it is
    said = [r.getMessage() for r in caplog.records]
    assert f"toolcall-lens: preparing a replay of {flow.id} failed: RuntimeError: boom" in said
    assert "toolcall-lens: reading a replay's request failed: RuntimeError: boom" in said
    assert flow.request.headers["authorization"] == mask(KEY)


def test_a_replays_calls_never_take_the_place_of_the_calls_the_agent_got(lens):
    got = [("call_a1", "read_file", '{"path": "a.txt"}'), ("call_a2", "list_dir", '{"path": "."}')]
    flow = _through(lens, _flow(), chat_stream(got))
    # Replayed while the agent goes on: the provider (a local model numbering its calls) makes one call
    # more, which only mitmproxy gets.
    _replayed(lens, flow, chat_stream([*got, ("call_a3", "read_file", '{"path": "b.txt"}')]))
    following = _flow()
    following.request.content = json.dumps(follow_up([got])).encode()  # the agent answers what it got
    result = _through(lens, following, chat_stream([])).metadata["toolcall_lens"]
    assert not [w for w in result["warnings"] if w["code"] == "unanswered-call"], result["warnings"]
    assert result["evidence"]["unanswered"] == [] and result["evidence"]["matched"] == 2, result["evidence"]


def test_a_replay_loaded_from_a_file_is_a_record_it_keeps_what_it_recorded_and_says_nothing(lens, caplog):
    # mitmdump -nr and mitmweb's File > Open run the hooks of each flow they load: a replay -w saved is one.
    flow = _through(lens, _flow(), LOUD)
    _replayed(lens, flow, LOUD)
    buffer = io.BytesIO()
    mio.FlowWriter(buffer).add(flow)
    buffer.seek(0)
    (loaded,) = mio.FlowReader(buffer).stream()
    assert loaded.is_replay == "request" and not loaded.live
    assert loaded.request.headers["authorization"] == mask(KEY)
    caplog.set_level(logging.WARNING)
    for event in eventsequence.iterate(loaded):
        lens.tctx.master.addons.invoke_addon_sync(lens, event)
    assert not [r for r in caplog.records if "replaying" in r.getMessage()]  # nothing is being replayed
    result = loaded.metadata["toolcall_lens"]
    assert result["source"] == {"read": "whole: loaded from a file", "timing": result["source"]["timing"]}
    assert result["source"]["timing"].startswith("recorded live")  # what it recorded, not dropped
    assert result["session"]["by"] == "replay" and "recency-misroute" in loaded.comment


def test_a_copy_of_a_flow_replays_with_the_keys_of_the_flow_it_was_copied_from_and_keeps_them(lens, caplog):
    # mitmweb's Duplicate (view.flows.duplicate): flow.copy(), a new id, the same metadata.
    flow = _through(lens, _flow(x_api_key="sk-ant-api03-SECRETSECRET"), CLEAN)
    copy = flow.copy()
    assert copy.id != flow.id and copy.request.headers["authorization"] == mask(KEY)
    copy.request.headers["x-title"] = "edited"  # edited before its replay, as a copy is made for
    caplog.set_level(logging.WARNING)
    _replay(lens, copy)
    assert copy.request.headers["authorization"] == KEY
    assert copy.request.headers["x-api-key"] == "sk-ant-api03-SECRETSECRET"
    assert copy.request.query["key"] == "AIzaSyREALKEY0123456789"
    assert not [r for r in caplog.records if "replaying" in r.getMessage()]
    copy.response = stream_flow(REQUEST).response
    _answer(lens, copy, CLEAN)
    assert copy.request.headers["authorization"] == mask(KEY)  # stored masked again
    # The flow it was copied from gone (deleted in mitmweb), the copy replayed once has them still, and a
    # copy of it has them from it.
    del flow
    gc.collect()
    _replay(lens, copy)
    assert copy.request.headers["authorization"] == KEY
    copy.response = stream_flow(REQUEST).response
    _answer(lens, copy, CLEAN)
    again = copy.copy()
    _replay(lens, again)
    assert again.request.headers["authorization"] == KEY


def test_a_copy_whose_flow_is_gone_or_unknown_says_its_key_is_not_there(lens, caplog):
    caplog.set_level(logging.WARNING)
    copy = _through(lens, _flow(), CLEAN).copy()  # the flow it was copied from deleted at once
    gc.collect()
    _replay(lens, copy)
    assert copy.request.headers["authorization"] == mask(KEY)
    stranger = _flow()
    stranger.request.headers["authorization"] = mask(KEY)
    stranger.metadata["masked_keys_of"] = ["not", "an", "id"]  # a file from elsewhere: never trusted
    _replay(lens, stranger)
    said = [r.getMessage() for r in caplog.records if "replaying" in r.getMessage()]
    assert len(said) == 2 and all("redacted: the provider will refuse it" in line for line in said)


def test_a_flow_that_is_no_llm_flow_keeps_its_keys_for_a_copy_and_stays_out_of_the_lens_filter(lens):
    # Keys are masked on every flow; `~meta toolcall_lens` (README) finds the LLM flows only.
    flow = tflow.tflow(resp=True)
    flow.request.headers["authorization"] = KEY
    lens.responseheaders(flow)
    assert flow.request.headers["authorization"] == mask(KEY)
    assert not flowfilter.match("~meta toolcall_lens", flow)
    copy = flow.copy()
    _replay(lens, copy)
    assert copy.request.headers["authorization"] == KEY
