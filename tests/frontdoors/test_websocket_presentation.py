"""What a person sees of a WebSocket flow, in-process: the content view on each message, the connection's
summary line, the report and export commands (one line and one record per response)."""

from __future__ import annotations

import copy
import json

from mitmproxy import contentviews
from mitmproxy.test import taddons, tflow
from schemas import check_connection, check_result
from test_addon import PRODUCTION, llm_flow, stream_through
from websocket_messages import websocket_flow

import addon as addon_module
from accumulator import Connection, connection_result
from accumulator.report import connection_summary_line, results_of


def _recorded(flow, trimmed: int = 0) -> dict:
    """What the addon stores for this WebSocket flow (its messages fed live), then ``trimmed`` messages
    dropped from the front of the stored flow, as the addon does."""
    live = Connection("openai-responses", path=flow.request.path)
    for message in flow.websocket.messages:
        live.message(message.from_client, message.content, message.is_text, now=message.timestamp)
    live.finish()
    record = connection_result(live)
    record["connection"]["trimmed"] = trimmed
    record["connection"]["closed"] = {"code": 1000, "reason": "", "by_client": True}
    check_connection(record)
    del flow.websocket.messages[:trimmed]
    flow.metadata["toolcall_lens"] = record
    return record


def test_results_of_reads_an_http_result_and_a_connection_record():
    flow = websocket_flow()
    record = _recorded(flow)
    assert results_of(record) == record["responses"] and len(results_of(record)) == 3
    http_result = {"format": "x", "choices": [], "warnings": []}
    assert results_of(http_result) == [http_result]
    assert results_of(None) == [] and results_of("text") == []


def test_the_connection_summary_line_counts_responses_calls_and_warnings():
    record = _recorded(websocket_flow())
    assert connection_summary_line(record) == (
        "openai-responses websocket: 3 responses (1 prewarm), calls: shell, apply_patch"
        " | warning: recency-misroute, unanswered-call"
    )
    twice = copy.deepcopy(record)
    twice["responses"].append(copy.deepcopy(record["responses"][1]))
    twice["responses"][-1]["complete"] = False
    twice["connection"]["responses"] = 4
    twice["connection"]["warnings"] = [{"code": "malformed-event", "severity": "info", "message": "m"}]
    twice["connection"]["closed"] = {"code": 1011, "reason": "", "by_client": False}
    assert connection_summary_line(twice) == (
        "openai-responses websocket: 4 responses (1 prewarm, 1 incomplete), calls: shell ×2, apply_patch ×2"
        " | warning: recency-misroute, unanswered-call | info: malformed-event | closed 1011 by server"
    )


def _shown(flow, index: int):
    with taddons.context():
        return contentviews.prettify_message(flow.websocket.messages[index], flow)


def test_the_view_shows_the_response_a_message_belongs_to_counting_trimmed_messages():
    flow = websocket_flow()
    _recorded(flow, trimmed=5)  # messages 1 to 5 are gone: the first stored one is message 6
    first = _shown(flow, 0)
    assert first.view_name == "toolcall-lens"
    lines = first.text.splitlines()
    assert lines[0].startswith(
        "openai-responses websocket: 3 responses (1 prewarm), calls: shell, apply_patch"
    )
    assert lines[1] == "message 6 (server → client): response 2 (messages 4 to 12)"
    assert '"call_id": "call_sh"' in first.text  # the message itself
    assert "(the whole response under message 12, its last)" in first.text
    assert "openai-chat" not in first.text and "compatibility" not in first.text  # the summary only
    last = _shown(flow, 6)  # message 12: the end of response 2, its whole report
    assert "message 12 (server → client): response 2" in last.text
    assert "id=call_sh" in last.text and "recency would build" in last.text and "unanswered-call" in last.text
    client = _shown(flow, 7)  # message 13: the next turn's response.create
    assert "message 13 (client → server): response 3 (messages 13 to 16)" in client.text


def test_the_view_rebuilds_a_connection_the_addon_did_not_record():
    flow = websocket_flow("gemini-live")
    flow.request.path = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
    assert "toolcall_lens" not in flow.metadata
    shown = _shown(flow, 3)  # the server's toolCall, in a binary frame
    assert shown.view_name == "toolcall-lens"
    assert shown.text.startswith("gemini-live websocket: 2 responses, calls: find")
    assert "message 4 (server → client): response 1 (messages 4 to 4)" in shown.text
    assert "id=call_gl" in shown.text
    setup = _shown(flow, 1)  # setupComplete: part of no response
    assert "message 2 (server → client): part of no response" in setup.text
    assert "toolcall_lens" not in flow.metadata  # the view only reads


def test_the_view_is_chosen_for_llm_websockets_and_left_for_others():
    known = websocket_flow("openai-realtime")
    assert _shown(known, 4).view_name == "toolcall-lens"
    unknown_path = websocket_flow("openai-realtime")
    unknown_path.request.path = "/socket"
    assert _shown(unknown_path, 4).view_name != "toolcall-lens"
    # ... unless the addon recorded it (it recognised the connection from its messages)
    _recorded(unknown_path)
    assert _shown(unknown_path, 4).view_name == "toolcall-lens"
    chat = tflow.twebsocketflow()  # an ordinary WebSocket: its messages keep their usual view
    assert _shown(chat, 0).view_name != "toolcall-lens"


def test_report_and_export_give_one_line_and_one_record_per_response(tmp_path):
    lens = addon_module.ToolcallLens()
    with taddons.context(lens) as tctx:
        llm = llm_flow()
        stream_through(lens, llm, PRODUCTION)
        ws = websocket_flow(start=946684800.0)
        record = _recorded(ws, trimmed=2)
        plain_ws = tflow.twebsocketflow()  # no record: not an LLM flow
        commands = tctx.master.commands
        report = commands.call("toolcall.report", [llm, ws, plain_ws])
        path = tmp_path / "export.jsonl"
        commands.call("toolcall.export", [llm, ws, plain_ws], str(path))
    lines = report.splitlines()
    assert len(lines) == 4 and "openai-chat" in lines[0]
    # Response 1's messages were trimmed from the stored flow: it is shown at the flow's own time.
    assert lines[1].startswith("23:00:00  example.com ws#1  openai-responses  gpt-ws  calls: -")
    assert lines[2] == (
        "00:00:03  example.com ws#2  openai-responses  gpt-ws  calls: shell, apply_patch  "
        "warnings: recency-misroute, unanswered-call"
    )
    records = [json.loads(line) for line in path.read_bytes().splitlines()]
    assert [r["flow_id"] for r in records] == [llm.id, ws.id, ws.id, ws.id]
    assert "transport" not in records[0] and records[0]["result"] == llm.metadata["toolcall_lens"]
    assert [(r["transport"], r["position"]) for r in records[1:]] == [("websocket", n) for n in (1, 2, 3)]
    assert [r["result"] for r in records[1:]] == record["responses"]
    for r in records[1:]:
        check_result(r["result"])
    # Response 2 ran from message 4 to 12, one second apart: its time and duration are its own.
    assert records[2]["time"] == "2000-01-01T00:00:03+00:00" and records[2]["duration"] == 8.0
    # Response 1's messages were trimmed from the stored flow: the flow's time, no duration.
    assert records[1]["duration"] is None and records[1]["time"] == "1999-12-31T23:00:00+00:00"


def test_a_message_in_two_responses_spans_belongs_to_the_later_one():
    from toolcall_lens.view import response_of

    def response(position: int, first: int, last: int) -> dict:
        return {"websocket": {"position": position, "first_message": first, "last_message": last}}

    # Two lanes (or a Realtime response started while another ran): their spans overlap.
    record = {"transport": "websocket", "connection": {}, "responses": [response(1, 1, 6), response(2, 3, 9)]}
    assert [response_of(record, n)["websocket"]["position"] for n in (1, 2, 3, 6, 7, 9)] == [1, 1, 2, 2, 2, 2]
    assert response_of(record, 10) is None


def test_the_rebuilt_connection_follows_the_messages_still_arriving():
    from mitmproxy.websocket import WebSocketMessage
    from wsproto.frame_protocol import Opcode

    flow = websocket_flow("openai-responses")
    flow.websocket.messages = flow.websocket.messages[:12]  # the third turn has not come yet
    assert _shown(flow, 11).text.startswith("openai-responses websocket: 2 responses")
    more = websocket_flow("openai-responses").websocket.messages[12:]
    flow.websocket.messages += [
        WebSocketMessage(Opcode.TEXT, m.from_client, m.content, m.timestamp) for m in more
    ]
    shown = _shown(flow, 15)
    assert shown.text.startswith("openai-responses websocket: 3 responses")
    assert "message 16 (server → client): response 3 (messages 13 to 16)" in shown.text
