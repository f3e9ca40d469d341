"""Real gateways, LiteLLM's proxy and Portkey's AI gateway (pinned in scripts/gateways.py, installed by
`.ci/run` into a cache outside the repository; skipped, or in CI failed, where one is missing), each with one
mitmdump and the addon on both of its sides: the client's SDK (openai, anthropic) -> mitmdump -> the
gateway -> the same mitmdump -> the fake provider. `toolcall_lens_rewrite_filter` keeps the test bench's
injections to what the provider sends the gateway.

With each injection, and with none, whether the gateway still hands its client the same calls is what the
addon rebuilt on the client's side, compared with what the provider sent: it must be the gateway's table in
docs/test-bench.md ("Test your gateway"); where it breaks, the addon's flow on the client's side carries a
warning of severity `warning`, `gateway-altered` among them (the addon pairs the two sides of each call:
accumulator.relay), and under `interleave` the calls the gateway built are the ones the provider's flow's
`recency-misroute` predicted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

import anthropic
import fake_provider
import openai
import pytest
from doc_commands import verdict_table
from gateways import GATEWAYS, MASTER_KEY, Route, command, headers, missing
from lab import Process, proxy_argv, start_proxy
from streams import ROOT
from weblab import free_port

INJECTIONS = ("interleave", "split-names", "repeat-names", "collide-index", "rechunk")
PAGE = ROOT / "docs" / "test-bench.md"
TOOLS = {"get_weather": "city", "get_time": "tz"}  # the `sequential` scenario's two calls, and their keys
PROMPT = "Weather and time in Paris?"


class Ports(NamedTuple):
    name: str  # the gateway's, in scripts/gateways.py
    port: int  # the gateway's own
    client_side: int  # mitmdump's reverse mode in front of the gateway: the clients' base URL
    provider_side: int  # mitmdump's reverse mode in front of the fake provider: the gateway's upstream
    provider: int  # the fake provider's port


@pytest.fixture(
    scope="module",
    params=[
        pytest.param(name, marks=pytest.mark.needs(missing(name) is None, missing(name) or ""))
        for name in GATEWAYS
    ],
)
def gateway(request, provider, tmp_path_factory):
    """The gateway on a free port, sending every route to the provider's side of a proxy that each test
    starts (on ports fixed here, so the gateway outlives the proxies)."""
    name = request.param
    tmp = tmp_path_factory.mktemp(name)
    ports = Ports(name, free_port(), free_port(), free_port(), provider)
    argv, env = command(name, tmp, ports.port, f"http://127.0.0.1:{ports.provider_side}")
    process = Process(name, argv, env)
    try:
        process.wait_for(GATEWAYS[name].ready, timeout=180)
        yield ports
    finally:
        process.stop()


def through(gateway: Ports, tmp: Path, inject: str | None) -> dict[str, tuple[dict, dict, str]]:
    """Every route once through one mitmdump on both sides of the gateway, with ``inject`` on what the provider
    sends it: {route: (the provider's side's record, the client's side's record, what the client said)}."""
    routes = GATEWAYS[gateway.name].routes
    export = tmp / "flows.jsonl"
    options = [f"toolcall_lens_jsonl={export}"]
    if inject:
        options += [f"toolcall_lens_inject={inject}", f"toolcall_lens_rewrite_filter=~u :{gateway.provider}/"]
    argv = proxy_argv(None, *options)
    argv += ["--mode", f"reverse:http://127.0.0.1:{gateway.port}@127.0.0.1:{gateway.client_side}"]
    argv += ["--mode", f"reverse:http://127.0.0.1:{gateway.provider}@127.0.0.1:{gateway.provider_side}"]
    proxy, _ = start_proxy(argv)
    said = {}
    try:
        proxy.wait_for(rf"listening at 127\.0\.0\.1:{gateway.provider_side}")
        base = f"http://127.0.0.1:{gateway.client_side}"
        for name, route in routes.items():
            try:
                said[name] = ask(base, route, f"http://127.0.0.1:{gateway.provider_side}")
            except (
                openai.OpenAIError,
                anthropic.AnthropicError,
                ValueError,
                TypeError,
            ) as exc:  # a client that cannot read it
                said[name] = f"{type(exc).__name__}: {exc}"
    finally:
        proxy.stop()
    records = [json.loads(line) for line in export.read_text().splitlines()]
    sides = {"client": [], "provider": []}
    for record in records:  # the provider's flow ends before the gateway's, and the routes run one by one
        side = "provider" if f":{gateway.provider}/" in record["url"] else "client"
        sides[side].append(record)
    assert len(sides["client"]) == len(sides["provider"]) == len(routes), [r["url"] for r in records]
    return {
        name: (upstream, client, said[name])
        for name, upstream, client in zip(routes, sides["provider"], sides["client"], strict=True)
    }


def ask(base: str, route: Route, upstream: str) -> str:
    """One streamed request with the two tools through the gateway, read to its end by the official SDK."""
    schema = lambda key: {"type": "object", "properties": {key: {"type": "string"}}, "required": [key]}
    extra = headers(route, upstream)
    if route.client == "chat":
        client = openai.OpenAI(
            base_url=f"{base}/v1", api_key=MASTER_KEY, max_retries=0, default_headers=extra
        )
        tools = [
            {"type": "function", "function": {"name": n, "parameters": schema(k)}} for n, k in TOOLS.items()
        ]
        stream = client.chat.completions.create(
            model=route.model, messages=[{"role": "user", "content": PROMPT}], tools=tools, stream=True
        )
    elif route.client == "responses":
        client = openai.OpenAI(
            base_url=f"{base}/v1", api_key=MASTER_KEY, max_retries=0, default_headers=extra
        )
        tools = [{"type": "function", "name": n, "parameters": schema(k)} for n, k in TOOLS.items()]
        stream = client.responses.create(model=route.model, input=PROMPT, tools=tools, stream=True)
    else:
        client = anthropic.Anthropic(base_url=base, api_key=MASTER_KEY, max_retries=0, default_headers=extra)
        tools = [{"name": n, "input_schema": schema(k)} for n, k in TOOLS.items()]
        stream = client.messages.create(
            model=route.model,
            max_tokens=200,
            messages=[{"role": "user", "content": PROMPT}],
            tools=tools,
            stream=True,
        )
    return f"{sum(1 for _ in stream)} events"


def tool_calls(record: dict) -> list[dict]:
    return [call for choice in record["result"].get("choices", ()) for call in choice["tool_calls"]]


def calls(record: dict) -> list[tuple[str, object]]:
    """The calls the addon rebuilt on a flow: (name, arguments parsed where they parse)."""
    out = []
    for call in tool_calls(record):
        try:
            arguments = json.loads(call["arguments"])
        except (TypeError, ValueError):
            arguments = call["arguments"]
        out.append((call["name"], arguments))
    return out


# What the provider sends in every format: (name, arguments parsed).
SENT = [(call["name"], json.loads(call["arguments"])) for call in fake_provider.expected_calls("sequential")]


def severe(record: dict) -> list[str]:
    return [w["code"] for w in record["result"]["warnings"] if w["severity"] == "warning"]


def heading(name: str) -> str:
    return f"### {GATEWAYS[name].title}"


def table(name: str) -> dict[tuple[str, str], str]:
    """The gateway's table in docs/test-bench.md: {(route, injection or `none`): survives | breaks | not
    applied}."""
    return verdict_table(PAGE.read_text(), heading(name))


@pytest.mark.parametrize("name", GATEWAYS)
def test_each_gateways_table_has_every_route_and_injection_and_names_the_pinned_version(name):
    routes = GATEWAYS[name].routes
    assert set(table(name)) == {(route, column) for route in routes for column in ("none", *INJECTIONS)}
    text = PAGE.read_text()
    section = text[text.index(heading(name)) :]
    assert f"{GATEWAYS[name].title} {GATEWAYS[name].version}" in section[: section.index("|")]


def check(gateway: Ports, name: str, column: str, upstream: dict, client: dict, said: str) -> str:
    """What the client got of the provider's calls (survives, breaks, not applied) is the table's, and the
    addon says so where it breaks."""
    route = GATEWAYS[gateway.name].routes[name]
    assert upstream["result"]["format"] == route.upstream, name
    # Only the provider's side is rewritten (toolcall_lens_rewrite_filter): the client's is watched.
    assert "rewrite" not in client["result"], name
    rewrite = upstream["result"].get("rewrite")
    if column != "none" and column not in rewrite["inject"]:
        found = "not applied"
    else:
        # The shape the gateway got still carries the provider's calls, rebuilt by identity.
        assert calls(upstream) == SENT, name
        assert column == "none" or rewrite["upstream"]["calls_same"] is True, name
        found = "survives" if calls(client) == SENT else "breaks"
    report = f"{gateway.name} {name} {column}: measured {found}; client got {calls(client)}; it said {said}"
    assert found == table(gateway.name)[name, column], report
    # Where it breaks the user is told, on the flow the client got, how its calls differ from what the
    # provider sent (gateway-altered, severity warning); nowhere else.
    relayed = client["result"].get("relayed_from")
    if tool_calls(client):  # paired by the calls' ids (a client's side with no call pairs with nothing)
        assert relayed == {"flow_id": upstream["flow_id"], "calls_same": found != "breaks"}, report
    assert ("gateway-altered" in severe(client)) is (found == "breaks" and bool(tool_calls(client))), report
    if found == "breaks":
        assert severe(client), report  # whatever the damage, a warning of severity warning on the flow
        if not tool_calls(client):  # none read (Portkey's Cohere route): its end said there were some
            assert "tool-calls-missing" in severe(client), report
    if column == "none":
        assert not severe(upstream), (report, upstream["result"]["warnings"])
        if found == "survives":
            assert not severe(client), (report, client["result"]["warnings"])
    return found


def test_every_route_carries_the_providers_calls_as_the_table_says(gateway, tmp_path):
    for name, (upstream, client, said) in through(gateway, tmp_path, None).items():
        check(gateway, name, "none", upstream, client, said)
        assert "rewrite" not in upstream["result"], name


@pytest.mark.parametrize("injection", INJECTIONS)
def test_injection_through_the_gateway_is_as_the_table_says(gateway, injection, tmp_path):
    for name, (upstream, client, said) in through(gateway, tmp_path, injection).items():
        found = check(gateway, name, injection, upstream, client, said)
        if found == "breaks" and injection == "interleave" and tool_calls(client):
            # And on the provider's flow, beforehand: what a recency client builds is what the gateway built.
            [predicted] = [
                w["would_build"] for w in upstream["result"]["warnings"] if w["code"] == "recency-misroute"
            ]
            assert [(c["name"], c["arguments"] or "{}") for c in predicted] == [
                (c["name"], c["arguments"] or "{}") for c in tool_calls(client)
            ], f"{gateway.name} {name}"
