"""A flow replayed, all real: the official openai SDK through mitmweb with the addon (redaction on, as by
default) in front of scripts/fake_provider, which answers each request with a hash of the API key it got
(``X-Received-Credentials-SHA256``); then the flow replayed as mitmweb's Replay button does it (its API's
``POST /flows/ID/replay``), and a dump replayed with ``mitmdump -C``. Before, a replay went out with the
key the addon had masked (a real provider answers 401), a replay that failed kept the earlier response's
comment and marker, and three replays made the agent's session loop."""

from __future__ import annotations

import contextlib
import hashlib
import json

import fake_provider
import openai
from lab import Process, proxy_argv, settle, start_fake_provider, start_mitmdump
from mitmproxy import io as mio
from weblab import start_mitmweb_proxy

KEY = "sk-test-0123456789abcdefghijklmnop"
SENT = hashlib.sha256(f"Bearer {KEY}\n\n\n\n".encode()).hexdigest()  # as the fake provider hashes it
TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("search_circulars", "get_user_profile")
]


def ask(port: int) -> None:
    client = openai.OpenAI(
        base_url=f"http://127.0.0.1:{port}/v1",
        api_key=KEY,
        max_retries=0,
        default_headers={"session-id": "run-1"},
    )
    messages = [{"role": "user", "content": "Find the RBI circulars and my profile."}]
    with client.chat.completions.stream(model="interleaved", messages=messages, tools=TOOLS) as stream:
        assert len(stream.get_final_completion().choices[0].message.tool_calls) == 2


def received(flow: dict) -> str:
    (value,) = [
        v for name, v in flow["response"]["headers"] if name.lower() == "x-received-credentials-sha256"
    ]
    return value


def authorization(flow: dict) -> str:
    (value,) = [v for name, v in flow["request"]["headers"] if name.lower() == "authorization"]
    return value


def records(jsonl) -> list[dict]:
    return [json.loads(line) for line in jsonl.read_bytes().splitlines()]


@contextlib.contextmanager
def asked_through_mitmweb(jsonl):
    """The fake provider and mitmweb with the addon in front of it, the SDK's request through it: (the
    provider, mitmweb, the annotated flow as its API gives it); both stopped after."""
    provider, provider_port = start_fake_provider(delay=0.0)
    web = start_mitmweb_proxy(provider_port, f"toolcall_lens_jsonl={jsonl}")
    try:
        ask(web.port)
        (flow,) = settle(lambda: [f for f in web.flows() if f.get("comment", "").startswith("openai-chat")])
        assert received(flow) == SENT and authorization(flow).endswith("...[redacted]")
        yield provider, web, flow
    finally:
        web.process.stop()
        provider.stop()


def test_mitmwebs_replay_sends_the_key_and_each_replay_is_told_apart_from_the_agents_turns(tmp_path):
    jsonl = tmp_path / "lens.jsonl"
    with asked_through_mitmweb(jsonl) as (provider, web, flow):
        assert flow["marked"]  # the warning marker (mitmweb shows it as its emoji)
        for n in range(2, 5):
            status, _ = web.api(f"/flows/{flow['id']}/replay", body={})
            assert status == 200
            settle(lambda n=n: jsonl.exists() and len(records(jsonl)) == n)
            (flow,) = web.flows()
            # The provider got the key the agent sent; the stored flow holds it masked again.
            assert received(flow) == SENT and authorization(flow).endswith("...[redacted]")
            assert flow["is_replay"] == "request"
        lines = records(jsonl)
        assert [r["replay"] for r in lines] == [None, "request", "request", "request"]
        assert [(r["session"], r["turn"]) for r in lines[:1]] == [("run-1", 1)]
        assert {r["result"]["session"]["by"] for r in lines[1:]} == {"replay"}
        assert not [w for r in lines for w in r["result"]["warnings"] if w["code"] == "tool-call-loop"]
        assert "tool-call-loop" not in flow["comment"] and "recency-misroute" in flow["comment"]
        web.process.wait_for(r"toolcall-lens \[replay\] POST http://127\.0\.0\.1:\d+/v1/chat/completions")
        # The provider gone, a replay fails: the flow shows mitmproxy's error and nothing of the addon's.
        provider.stop()
        status, _ = web.api(f"/flows/{flow['id']}/replay", body={})
        assert status == 200
        (flow,) = settle(lambda: [f for f in web.flows() if f.get("error")])
        assert "response" not in flow or flow["response"] is None
        assert (flow["comment"], flow["marked"]) == ("", "")


def test_a_dump_replayed_with_mitmdump_c_says_its_key_is_not_there_and_modify_headers_gives_it(tmp_path):
    recorded = tmp_path / "session.flows"
    provider, provider_port = start_fake_provider(delay=0.0)
    try:
        proxy, port = start_mitmdump(provider_port, recorded)
        try:
            ask(port)
        finally:
            proxy.stop()

        def replay(*options: str) -> tuple[Process, dict]:
            out = tmp_path / f"replayed{len(options)}.flows"
            argv = proxy_argv(None, *options, dump=out) + ["-C", str(recorded)]
            process = Process("mitmdump -C", argv)
            assert process.popen.wait(60) == 0, "\n".join(process.lines)  # it ends once the replay is done
            process.stop()
            with out.open("rb") as file:
                (flow,) = mio.FlowReader(file).stream()
            return process, flow.get_state()

        process, flow = replay()
        said = [line for line in process.lines if "toolcall-lens: replaying" in line]
        assert len(said) == 1 and "authorization redacted: the provider will refuse it" in said[0]
        assert "modify_headers" in said[0] and KEY[:12] not in "\n".join(process.lines)
        assert dict(flow["response"]["headers"])[b"X-Received-Credentials-SHA256"].decode() != SENT

        # What the warning says to do: the key given again, for the replayed requests only.
        process, flow = replay(f"modify_headers=/~q/Authorization/Bearer {KEY}")
        assert not [line for line in process.lines if "toolcall-lens: replaying" in line]
        assert dict(flow["response"]["headers"])[b"X-Received-Credentials-SHA256"].decode() == SENT
        assert dict(flow["request"]["headers"])[b"Authorization"].endswith(b"...[redacted]")
        assert "recency-misroute" in flow["comment"]
    finally:
        provider.stop()


def test_an_earlier_turn_edited_and_replayed_while_the_agent_goes_on_costs_its_next_turn_nothing(tmp_path):
    jsonl = tmp_path / "lens.jsonl"
    provider, provider_port = start_fake_provider(delay=0.0)
    web = start_mitmweb_proxy(provider_port, f"toolcall_lens_jsonl={jsonl}")  # the worker on, as by default
    try:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{web.port}/v1", api_key=KEY, max_retries=0)
        tools = [{"type": "function", "function": {"name": "get_current_weather", "parameters": {}}}]
        asked = [{"role": "user", "content": "The weather?"}]
        with client.chat.completions.stream(model="name-repeated", messages=asked, tools=tools) as stream:
            stream.get_final_completion()
        # The call it made, as a client that routes by identity rebuilds it (the SDK's helper glues the
        # id this scenario repeats in every delta).
        (got,) = fake_provider.expected_calls("name-repeated")
        assert got["id"] == "call_r1"
        (flow,) = settle(lambda: jsonl.exists() and records(jsonl))
        # In mitmweb: its request edited (another model, which makes one call more under the same id
        # scheme), then replayed. Its calls go to mitmproxy only.
        status, body = web.api(f"/flows/{flow['flow_id']}/request/content.data")
        assert status == 200
        status, _ = web.api(
            f"/flows/{flow['flow_id']}",
            body={"request": {"content": body.decode().replace("name-repeated", "custom-interleaved")}},
            method="PUT",
        )
        assert status == 200
        assert web.api(f"/flows/{flow['flow_id']}/replay", body={})[0] == 200
        settle(lambda: len(records(jsonl)) == 2)
        assert [c["id"] for c in records(jsonl)[1]["result"]["choices"][0]["tool_calls"]] == [
            "call_p1",
            "call_r1",
        ]
        # The agent's next turn answers the call it got: checked against it, nothing dropped.
        following = [
            *asked,
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": got["id"],
                        "type": "function",
                        "function": {"name": got["name"], "arguments": got["arguments"]},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": got["id"], "content": "sunny"},
        ]
        with client.chat.completions.stream(model="text", messages=following, tools=tools) as stream:
            stream.get_final_completion()
        settle(lambda: len(records(jsonl)) == 3)
        result = records(jsonl)[2]["result"]
        assert [w["code"] for w in result["warnings"] if w["severity"] == "warning"] == [], result["warnings"]
        assert result["evidence"]["unanswered"] == [] and result["evidence"]["matched"] == 1, result[
            "evidence"
        ]
    finally:
        web.process.stop()
        provider.stop()


def test_a_flow_duplicated_in_mitmweb_edited_and_replayed_goes_with_the_key_the_agent_sent(tmp_path):
    jsonl = tmp_path / "lens.jsonl"
    with asked_through_mitmweb(jsonl) as (_, web, flow):
        # mitmweb's Duplicate, then the copy's request edited in its flow editor, then its Replay.
        status, copy_id = web.api(f"/flows/{flow['id']}/duplicate", body={})
        assert status == 200
        copy_id = copy_id.decode()
        status, body = web.api(f"/flows/{copy_id}/request/content.data")
        assert status == 200
        edited = json.loads(body) | {"model": "sequential"}
        content = {"request": {"content": json.dumps(edited)}}
        assert web.api(f"/flows/{copy_id}", body=content, method="PUT")[0] == 200
        assert web.api(f"/flows/{copy_id}/replay", body={})[0] == 200
        settle(lambda: jsonl.exists() and len(records(jsonl)) == 2)
        (copy,) = [f for f in web.flows() if f["id"] == copy_id]
        # The provider got the key the agent sent; the copy holds it masked, as its original does.
        assert received(copy) == SENT and authorization(copy).endswith("...[redacted]")
        assert copy["is_replay"] == "request" and "recency-misroute" not in copy["comment"]
        assert records(jsonl)[1]["result"]["model"] == "sequential"
        assert not [line for line in web.process.lines if "redacted: the provider will refuse it" in line]


def test_a_response_edited_in_mitmweb_is_viewed_as_it_is_now_and_as_it_passed_once_reverted(tmp_path):
    jsonl = tmp_path / "lens.jsonl"
    with asked_through_mitmweb(jsonl) as (_, web, flow):

        def viewed() -> str:
            status, body = web.api(f"/flows/{flow['id']}/response/content/auto.json")
            assert status == 200, body
            shown = json.loads(body)
            assert shown["view_name"] == "toolcall-lens"
            return shown["text"]

        assert "recency-misroute" in viewed() and "(edited since it passed" not in viewed()
        # Its flow editor: another stream put in the response's place, two calls one after the other.
        content = {"response": {"content": fake_provider.sse_body("sequential").decode()}}
        assert web.api(f"/flows/{flow['id']}", body=content, method="PUT")[0] == 200
        now = viewed()
        assert now.startswith("(edited since it passed") and "recency-misroute" not in now
        assert "get_weather" in now and "get_time" in now and "search_circulars" not in now
        (edited,) = web.flows()
        assert "recency-misroute" in edited["comment"] and edited["marked"]  # as it passed
        assert web.api(f"/flows/{flow['id']}/revert", body={})[0] == 200
        assert "recency-misroute" in viewed() and "(edited since it passed" not in viewed()
