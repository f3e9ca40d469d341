"""The addon and the CLI on a gateway seen on both sides (accumulator.relay): the client's flow names the
provider's flow it was relayed from, and says `gateway-altered` where the gateway handed on other calls."""

from __future__ import annotations

import json

from chat_flows import chat_stream, follow_up, through_addon
from mitmproxy import io
from mitmproxy.test import taddons

import addon as addon_module
from accumulator.cli import main
from accumulator.report import format_view
from accumulator.sessions import format_session

SENT = [("call_w1", "get_weather", '{"city": "Paris"}'), ("call_t1", "get_time", '{"tz": "Europe/Paris"}')]
# What a gateway appending each fragment to the latest call hands on from those two calls interleaved.
SPLICED = [("call_w1", "get_weather", ""), ("call_t1", "get_time", '{"ci{"tz": ty": "Pa"Europe/ris"}Paris"}')]
PROVIDER = "https://api.provider.test/v1/chat/completions"
GATEWAY = "http://127.0.0.1:4000/v1/chat/completions"


def both_sides(handed_on, *, provider_url: str = PROVIDER):
    """Through the addon: the gateway's flow to its provider (sent after the client's request, ended first),
    then the client's; tflow's responses end at 946681203, its requests start at 946681200."""
    lens = addon_module.ToolcallLens()
    request = follow_up([])
    with taddons.context(lens):
        upstream = through_addon(lens, chat_stream(SENT), request, url=provider_url, start=946681200.5)
        client = through_addon(lens, chat_stream(handed_on), request, url=GATEWAY, start=946681200.0)
    return upstream, client


def test_a_faithful_gateway_is_named_on_its_clients_flow_and_nothing_is_marked():
    upstream, client = both_sides(SENT)
    result = client.metadata["toolcall_lens"]
    assert result["relayed_from"] == {"flow_id": upstream.id, "calls_same": True}
    assert not client.marked and "gateway-altered" not in client.comment
    assert "relayed_from" not in upstream.metadata["toolcall_lens"]


def test_a_gateway_that_splices_calls_is_gateway_altered_on_its_clients_flow():
    upstream, client = both_sides(SPLICED)
    result = client.metadata["toolcall_lens"]
    assert result["relayed_from"] == {"flow_id": upstream.id, "calls_same": False}
    [warning] = [w for w in result["warnings"] if w["code"] == "gateway-altered"]
    assert warning["relayed_from"] == upstream.id
    assert [(c["id"], c["name"], c["arguments"]) for c in warning["sent"]] == SENT
    assert client.marked and "gateway-altered" in client.comment
    view = format_view(result)  # mitmweb's toolcall-lens view: the two sides of each call, side by side
    assert "its provider sent" in view and "the gateway handed on" in view
    assert (
        'get_time {"tz": "Europe/Paris"}' in view and 'get_time {"ci{"tz": ty": "Pa"Europe/ris"}Paris' in view
    )


def test_two_responses_of_one_server_are_no_relay():
    _, client = both_sides(SPLICED, provider_url=GATEWAY)
    assert "relayed_from" not in client.metadata["toolcall_lens"]


def dumped(flows, tmp_path):
    """The two sides as ``mitmdump -w`` saves them."""
    dump = tmp_path / "gateway.flows"
    with dump.open("wb") as file:
        writer = io.FlowWriter(file)
        for flow in flows:
            writer.add(flow)
    return dump


def test_the_cli_pairs_the_two_sides_in_a_dump_as_the_addon_did(tmp_path, capsys):
    flows = both_sides(SPLICED)
    dump = dumped(flows, tmp_path)
    assert main([str(dump), "--json"]) == 1
    upstream, client = json.loads(capsys.readouterr().out)["results"]
    assert client["relayed_from"] == {"flow_id": flows[0].id, "calls_same": False}
    assert "relayed_from" not in upstream
    assert main([str(dump)]) == 1
    report = capsys.readouterr().out
    assert f"relayed by a gateway from flow {flows[0].id}: DIFFERENT calls (gateway-altered)" in report


def test_the_agents_session_says_which_of_its_turns_a_gateway_relayed_and_from_which_session():
    lens = addon_module.ToolcallLens()
    request = follow_up([])
    with taddons.context(lens):
        upstream = through_addon(lens, chat_stream(SENT), request, url=PROVIDER, start=946681200.5)
        client = through_addon(lens, chat_stream(SENT), request, url=GATEWAY, start=946681200.0)
        gateway_side = lens.sessions.of_flow(upstream.id)
        record = lens.sessions.record(lens.sessions.of_flow(client.id))
        assert record["totals"]["relayed_turns"] == 1
        assert record["relayed_from_sessions"] == [gateway_side.id]
        assert record["turns"][0]["relayed_from"] == upstream.id
        text = format_session(record)
        assert f"flow {client.id[:8]} (relayed from flow {upstream.id[:8]})" in text
        assert (
            f"relayed: 1 turn(s) passed through a gateway whose own requests were seen too (session "
            f"{gateway_side.id}): their tokens and cost are counted on both sides, add up one"
        ) in text
        # The gateway's own side relayed nothing: its session says nothing of it.
        own = lens.sessions.record(gateway_side)
        assert own["totals"]["relayed_turns"] == 0 and "relayed_from_sessions" not in own
        assert "relayed" not in format_session(own)


def test_the_cli_says_the_same_of_a_dump_of_both_sides(tmp_path, capsys):
    flows = both_sides(SENT)
    main([str(dumped(flows, tmp_path)), "--json"], sessions_view=True)
    sessions = {s["turns"][0]["flow_id"]: s for s in json.loads(capsys.readouterr().out)["sessions"]}
    client = sessions[flows[1].id]
    assert client["totals"]["relayed_turns"] == 1
    assert client["relayed_from_sessions"] == [sessions[flows[0].id]["id"]]
