"""What a person sees, in-process: the content view, live progress, the report and export commands,
the JSONL option, and credentials redacted once the request has gone out."""

from __future__ import annotations

import io
import json
import re

import pytest
from mitmproxy import contentviews
from mitmproxy import io as mio
from mitmproxy.test import taddons, tflow
from mitmproxy.tools.web import app as web_app
from streams import DATA, call, choice, chunk, sse, tool_chunk
from test_addon import PRODUCTION, llm_flow, pieces, stream_through

import addon as addon_module
import toolcall_lens.view as view_module
from accumulator import STRATEGIES
from accumulator.report import format_report, format_view


class Updates:
    """Records the flows mitmproxy is told to refresh (what mitmweb would redraw)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def update(self, flows) -> None:
        self.seen.extend(f.id for f in flows)


def test_the_content_view_is_chosen_for_llm_responses_and_shows_everything():
    lens = addon_module.ToolcallLens()
    with taddons.context(lens):
        flow = llm_flow()
        stream_through(lens, flow, PRODUCTION)
        shown = contentviews.prettify_message(flow.response, flow)
    assert shown.view_name == "toolcall-lens"
    text = shown.text
    for expected in (
        '"query": "RBI circulars"',
        '"user_id": "u123"',
        "recency-misroute",
        "compatibility",
        "id=call_abc",
    ):
        assert expected in text
    # The failing strategy's calls beside the right ones.
    assert "recency would build" in text and "the stream carried" in text
    assert '≠ [1] get_user_profile {"query": "RBI{"user_id": "u circul' in text


def test_the_view_reads_a_flow_from_a_dump_made_without_the_addon():
    with taddons.context():
        _the_view_reads_a_flow_without_metadata()


def test_a_result_read_back_from_a_dump_reads_as_it_did_when_stored():
    # mitmproxy's dump format hands each object back with its keys in reverse order (its tnetstring):
    # the report and the view list the client rules in their one order, not the dict's.
    lens = addon_module.ToolcallLens()
    with taddons.context(lens):
        flow = llm_flow()
        stream_through(lens, flow, PRODUCTION)
        stored = flow.metadata["toolcall_lens"]
        buffer = io.BytesIO()
        mio.FlowWriter(buffer).add(flow)
        buffer.seek(0)
        (loaded,) = mio.FlowReader(buffer).stream()
    read_back = loaded.metadata["toolcall_lens"]
    assert read_back == stored and list(read_back["compatibility"]) != list(stored["compatibility"])
    assert format_report(read_back) == format_report(stored)
    assert format_view(read_back) == format_view(stored)
    rules = [line.split()[0] for line in format_report(read_back).splitlines() if line.startswith("  ")]
    assert [r for r in rules if r in STRATEGIES] == list(STRATEGIES)


def test_a_response_edited_in_the_proxy_is_shown_as_it_is_now_and_as_it_passed_once_reverted():
    # mitmweb's editor (and the console's) backs the flow up, then changes the body: the view reads the body
    # it is given and says the flow's annotation is of the response as it passed.
    lens = addon_module.ToolcallLens()
    with taddons.context(lens):
        flow = llm_flow()
        stream_through(lens, flow, PRODUCTION)
        annotated = flow.comment
        flow.backup()
        flow.response.content = (DATA / "openai_chat_parallel.sse").read_bytes()
        edited = contentviews.prettify_message(flow.response, flow)
        flow.request.path = "/page"  # a page now, on a path of no LLM API
        flow.response.headers["content-type"] = "text/html"
        flow.response.text = "<p>no stream any more</p>"
        unreadable = contentviews.prettify_message(flow.response, flow, view_name="toolcall-lens")
        flow.revert()
        assert flow.request.path == "/v1/chat/completions"
        reverted = contentviews.prettify_message(flow.response, flow)
    assert edited.view_name == "toolcall-lens" and edited.text.startswith(view_module.EDITED)
    assert "get_weather" in edited.text and "search_circulars" not in edited.text
    assert "recency-misroute" not in edited.text
    assert unreadable.text.startswith(view_module.EDITED) and view_module.NOT_READ in unreadable.text
    assert view_module.EDITED not in reverted.text and "search_circulars" in reverted.text
    assert "recency-misroute" in reverted.text and flow.comment == annotated


def test_a_comment_a_decoded_body_or_a_replay_is_no_edit_of_the_response(monkeypatch):
    lens = addon_module.ToolcallLens()
    with taddons.context(lens):
        flow = llm_flow()
        stream_through(lens, flow, PRODUCTION)
        stored = contentviews.prettify_message(flow.response, flow).text
        flow.backup()
        flow.comment = "looked at"
        assert contentviews.prettify_message(flow.response, flow).text == stored
        flow.response.encode("gzip")  # mitmproxy's flow.encode: the same body, encoded
        assert flow.modified() and contentviews.prettify_message(flow.response, flow).text == stored
        flow.response.decode()
        # A replay backs the flow up and gets another response (another start): the new one's result is
        # what the flow holds, not an edit of the old one.
        flow.response.timestamp_start += 5
        flow.response.content = (DATA / "openai_chat_parallel.sse").read_bytes()
        assert contentviews.prettify_message(flow.response, flow).text == stored


def _the_view_reads_a_flow_without_metadata():
    flow = tflow.tflow(resp=True)
    flow.request.path = "/v1/messages"
    flow.response.headers["content-type"] = "text/event-stream"
    flow.response.content = (DATA / "anthropic_messages_parallel.sse").read_bytes()
    assert "toolcall_lens" not in flow.metadata
    shown = contentviews.prettify_message(flow.response, flow)
    assert shown.view_name == "toolcall-lens"
    assert "get_weather" in shown.text and "get_time" in shown.text and "anthropic-messages" in shown.text


def test_invalid_arguments_are_shown_as_is_and_marked():
    flow = tflow.tflow(resp=True)
    flow.request.path = "/v1/chat/completions"
    flow.response.headers["content-type"] = "text/event-stream"
    flow.response.content = b"\n\n".join(PRODUCTION.split(b"\n\n")[:4]) + b"\n\n"  # cut mid-arguments
    with taddons.context():
        text = contentviews.prettify_message(flow.response, flow).text
    assert "(not valid JSON, shown as is)" in text and "truncated-stream" in text


def test_a_stream_shorter_than_the_update_interval_gets_no_live_update(monkeypatch):
    # Every chunk within 0.4 s at 2 updates a second: the flow ends before its first update was due, and
    # no hook is triggered for it (each one runs every addon of the proxy).
    clock = iter(1000.0 + 0.01 * n for n in range(10_000))
    monkeypatch.setattr(addon_module.time, "time", lambda: next(clock))
    lens, updates = addon_module.ToolcallLens(), Updates()
    with taddons.context(lens, updates):
        flow = llm_flow()
        stream_through(lens, flow, pieces(PRODUCTION, 40))  # 44 chunks, 0.44 s
    assert flow.id not in updates.seen and "toolcall_lens" in flow.metadata


def test_other_responses_keep_their_usual_view():
    flow = tflow.tflow(resp=True)
    flow.response.headers["content-type"] = "application/json"
    flow.response.content = b'{"hello": "world"}'
    with taddons.context():
        assert contentviews.prettify_message(flow.response, flow).view_name != "toolcall-lens"


def test_live_progress_updates_llm_flows_a_few_times_per_second(monkeypatch):
    clock = iter(1000.0 + 0.1 * n for n in range(10_000))  # each chunk arrives 0.1 s after the last
    monkeypatch.setattr(addon_module.time, "time", lambda: next(clock))
    lens, updates = addon_module.ToolcallLens(), Updates()
    with taddons.context(lens, updates):
        flow = llm_flow()
        lens.responseheaders(flow)
        comments = []
        for piece in pieces(PRODUCTION, 40):  # 44 chunks over 4.4 s at 2 updates per second
            flow.response.stream(piece)
            comments.append(flow.comment)
        assert 8 <= updates.seen.count(flow.id) <= 10
        assert any(
            "streaming" in c and "2 call(s) so far: search_circulars, get_user_profile" in c for c in comments
        )
        assert (
            flow.metadata["toolcall_lens_live"]["choices"][0]["tool_calls"][0]["name"] == "search_circulars"
        )
        flow.response.stream(b"")
        lens.response(flow)
    assert "toolcall_lens_live" not in flow.metadata and "streaming" not in flow.comment
    other = tflow.tflow(resp=True)  # no LLM flow, no update
    lens.responseheaders(other)
    assert other.id not in updates.seen


def test_live_progress_can_be_turned_off():
    lens, updates = addon_module.ToolcallLens(), Updates()
    with taddons.context(lens, updates) as tctx:
        tctx.configure(lens, toolcall_lens_live_updates=0)
        stream_through(lens, llm_flow(), PRODUCTION)
    assert updates.seen == []


def test_report_and_export_commands(tmp_path):
    lens = addon_module.ToolcallLens()
    with taddons.context(lens) as tctx:
        llm, other = llm_flow(), tflow.tflow(resp=True)
        stream_through(lens, llm, PRODUCTION)
        commands = tctx.master.commands
        assert {"toolcall.report", "toolcall.export"} <= set(commands.commands)
        # mitmweb calls a command at this route of its API (the live test calls them there)
        route = next(pattern for pattern, handler in web_app.handlers if handler is web_app.ExecuteCommand)
        for name in ("toolcall.report", "toolcall.export"):
            assert re.fullmatch(route, f"/commands/{name}"), name
        report = commands.call("toolcall.report", [llm, other])
        assert commands.call("toolcall_lens.report", [llm, other]) == report  # the earlier name still works
        assert report.count("\n") == 0 and "openai-chat" in report and "gpt-test" in report
        assert (
            "calls: search_circulars, get_user_profile" in report and "warnings: recency-misroute" in report
        )
        path, earlier = tmp_path / "export.jsonl", tmp_path / "earlier.jsonl"
        commands.call("toolcall.export", [llm, other], str(path))
        commands.call("toolcall_lens.export", [llm, other], str(earlier))
    assert earlier.read_bytes() == path.read_bytes()
    (line,) = path.read_bytes().splitlines()
    record = json.loads(line)
    assert (
        record["flow_id"] == llm.id
        and record["status"] == 200
        and record["url"].endswith("/v1/chat/completions")
    )
    assert record["result"] == llm.metadata["toolcall_lens"] and record["duration"] is not None


def test_the_jsonl_option_appends_one_record_per_finished_llm_flow(tmp_path):
    path = tmp_path / "live.jsonl"
    lens = addon_module.ToolcallLens()
    with taddons.context(lens) as tctx:
        tctx.configure(lens, toolcall_lens_jsonl=str(path))
        flows = [llm_flow() for _ in range(5)]
        for flow in flows:
            stream_through(lens, flow, PRODUCTION)
        stream_through(lens, tflow.tflow(resp=True), b"")  # not an LLM flow: no record
    records = [json.loads(line) for line in path.read_bytes().splitlines()]
    assert [r["flow_id"] for r in records] == [f.id for f in flows]


def test_each_jsonl_record_is_one_write_of_one_whole_line(tmp_path, monkeypatch):
    # Concurrent flows append to one O_APPEND file: a record in two writes could be split by another's.
    import os

    from toolcall_lens import export

    real_write, writes = os.write, []

    def recording_write(fd: int, data) -> int:
        writes.append((fd, bytes(data)))
        return real_write(fd, data)

    monkeypatch.setattr(export.os, "write", recording_write)
    path = tmp_path / "live.jsonl"
    lens = addon_module.ToolcallLens()
    with taddons.context(lens) as tctx:
        tctx.configure(lens, toolcall_lens_jsonl=str(path))
        fd = lens.jsonl._fd
        flows = [llm_flow() for _ in range(3)]
        for flow in flows:
            stream_through(lens, flow, PRODUCTION)
    records = [data for written_to, data in writes if written_to == fd]
    assert len(records) == len(flows)
    for data in records:
        assert data.endswith(b"\n") and data.count(b"\n") == 1
        json.loads(data)
    assert b"".join(records) == path.read_bytes()


SENTINELS = {
    "authorization": "Bearer sk-SENTINELauthorization0123456789",
    "x-api-key": "sk-ant-SENTINELxapikey0123456789",
    "api-key": "azSENTINELapikey0123456789",
    "x-goog-api-key": "AIzaSENTINELgoog0123456789",
    "x-amz-security-token": "IQoJSENTINELamztoken0123456789",
}


def test_credentials_are_redacted_once_the_request_has_gone_out():
    lens = addon_module.ToolcallLens()
    with taddons.context(lens):
        flow = llm_flow()
        flow.request.headers.update(SENTINELS)
        flow.request.query["key"] = "AIzaSENTINELquery0123456789"
        lens.request(flow)
        assert flow.request.headers["authorization"] == SENTINELS["authorization"]  # not before it is sent
        stream_through(lens, flow, PRODUCTION)
    for name in SENTINELS:
        kept = flow.request.headers[name]
        assert kept.endswith(addon_module.REDACTED) and "SENTINEL" not in kept, name
    assert flow.request.headers["authorization"].startswith("Bearer sk-")
    assert "SENTINEL" not in flow.request.query["key"] and "SENTINEL" not in flow.request.pretty_url
    buffer = __import__("io").BytesIO()
    mio.FlowWriter(buffer).add(flow)
    assert b"SENTINEL" not in buffer.getvalue()


# Every query parameter docs/proxy.md lists, each on its own request so one cannot hide another.
SECRET_QUERY = ("key", "api-key", "api_key", "X-Amz-Signature", "X-Amz-Credential", "X-Amz-Security-Token")


@pytest.mark.parametrize("name", SECRET_QUERY)
def test_each_secret_query_parameter_is_redacted(name):
    from toolcall_lens.redact import REDACTED

    lens = addon_module.ToolcallLens()
    with taddons.context(lens):
        flow = llm_flow()
        flow.request.query[name] = "SENTINELquery0123456789"
        flow.request.query["model"] = "kept-as-is"
        stream_through(lens, flow, PRODUCTION)
    assert flow.request.query[name].endswith(REDACTED) and "SENTINEL" not in flow.request.pretty_url
    assert flow.request.query["model"] == "kept-as-is"


def test_proxy_authorization_is_redacted():
    from toolcall_lens.redact import REDACTED

    lens = addon_module.ToolcallLens()
    with taddons.context(lens):
        flow = llm_flow()
        flow.request.headers["Proxy-Authorization"] = "Basic U0VOVElORUw6cHJveHlwYXNzd29yZA=="
        stream_through(lens, flow, PRODUCTION)
    kept = flow.request.headers["proxy-authorization"]
    assert kept.startswith("Basic ") and kept.endswith(REDACTED) and "cHJveHlwYXNzd29yZA" not in kept


def test_redaction_can_be_turned_off_and_covers_failed_requests():
    lens = addon_module.ToolcallLens()
    with taddons.context(lens) as tctx:
        failed = tflow.tflow(err=True)
        failed.request.headers["x-api-key"] = SENTINELS["x-api-key"]
        lens.error(failed)
        assert "SENTINEL" not in failed.request.headers["x-api-key"]
        tctx.configure(lens, toolcall_lens_redact=False)
        flow = llm_flow()
        flow.request.headers["x-api-key"] = SENTINELS["x-api-key"]
        stream_through(lens, flow, PRODUCTION)
        assert flow.request.headers["x-api-key"] == SENTINELS["x-api-key"]


@pytest.mark.parametrize(
    "value,masked",
    [
        ("Bearer sk-proj-abcdefghijklmnop", "Bearer sk-pro...[redacted]"),
        ("sk-ant-api03-xyzxyzxyzxyz", "sk-ant...[redacted]"),
        ("short", "s...[redacted]"),
        ("Bearer sk-proj...[redacted]", "Bearer sk-proj...[redacted]"),  # idempotent
        ("Bearer sk-proj\u2026[redacted]", "Bearer sk-proj\u2026[redacted]"),  # an older dump's marker
    ],
)
def test_the_mask_keeps_only_a_few_characters(value, masked):
    from toolcall_lens.redact import mask

    assert mask(value) == masked


def test_a_failing_rule_is_named_with_the_clients_that_follow_it():
    from accumulator import analyze
    from accumulator.report import format_report, format_view
    from accumulator.strategies import STRATEGIES

    # The name repeated on every delta: generic delta mergers double it.
    stream = sse(
        tool_chunk(call(0, "call_r", "read_file", '{"path": ')),
        tool_chunk(call(0, None, "read_file", '"a.txt"}')),
        chunk(choice(0, "tool_calls")),
    )
    result = analyze(stream)
    assert result["compatibility"]["field-concat"]["verdict"] == "breaks"
    report = format_report(result)
    clients = STRATEGIES["field-concat"].clients
    assert "openai-python's accumulate_delta" in clients and f"who follows it: {clients}" in report
    assert report.count("who follows it") == sum(
        v["verdict"] == "breaks" for v in result["compatibility"].values()
    )
    assert f"field-concat: {clients}" in format_view(result)  # the content view, above the side by side
