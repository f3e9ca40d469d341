"""Real agent CLIs through mitmdump with the addon, against the fake provider's `agent` scenario: Claude Code,
Codex (HTTP SSE, and its built-in provider's Responses WebSocket mode), Gemini CLI and opencode, the pinned
versions of scripts/agents.py, installed by `.ci/run` into a cache outside the repository (skipped, or in CI
failed, where node, npm or the agent is missing); beside them the Python agents of the test extras: the
OpenAI Agents SDK's, LangChain's and Pydantic AI's. Each runs one bounded, non-interactive task with its own
HOME and config: the provider answers its first request with two parallel, interleaved calls to tools it
declared (a shell command, a file read) and the follow-up carrying their results with a final text.

Clean runs: the calls the addon rebuilt are the ones the provider sent, the follow-up echoed them under the
names sent and carried both results (checked by the addon: no warning), and no warning of severity
`warning` came. Then every
injection against every agent: whether it survives is measured and must be the table in the README; and
seed-args, which breaks the stream on purpose, against the Chat agents: what each echoes must be the table
in docs/agents.md."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import NamedTuple

import pytest
from agents import AGENTS, FRAMEWORK_RUNS, NOTES, NOTES_TEXT, PATCH_MODEL, RUNS, missing, recipe
from doc_commands import verdict_table
from fake_provider.agent import FINAL_TEXT, PATCH, PATCH_OPERATION, PATCHED, PATCHED_TEXT
from lab import start_fake_provider, start_mitmdump
from mitmproxy import io
from streams import ROOT

from accumulator.assembly import first_value
from accumulator.echo import extract_echoes

RUN_TIMEOUT = 240  # only so a hung agent fails the test instead of hanging it
INJECTIONS = ("interleave", "split-names", "repeat-names", "collide-index", "rechunk")
README = ROOT / "README.md"
# The agents over Chat Completions, where seed-args applies (its own table in agents.md).
SEEDED_RUNS = ("opencode", "openai-agents-chat", "langchain", "pydantic-ai", "litellm-sdk")


def needs(name: str):
    why = missing(RUNS[name] if name in RUNS else FRAMEWORK_RUNS[name][0])
    return pytest.mark.needs(why is None, why or "")


class Outcome(NamedTuple):
    done: subprocess.CompletedProcess
    sent: list[dict]  # the provider's GET /agent: every answer it made
    records: list[dict]  # the addon's JSON lines
    flows: list  # the dump's flows


def folders(tmp: Path) -> tuple[Path, Path]:
    """An agent's working folder (with the notes file the provider has it read) and its own HOME."""
    work, home = tmp / "work", tmp / "home"
    work.mkdir(parents=True)
    home.mkdir(parents=True)
    (work / NOTES).write_text(NOTES_TEXT)
    return work, home


def run_agent(
    name: str,
    tmp: Path,
    inject: str | None = None,
    *provider_args: str,
    mcp: dict | None = None,
    env: dict | None = None,
    options: tuple[str, ...] = (),
) -> Outcome:
    work, home = folders(tmp)
    export, dump = tmp / "flows.jsonl", tmp / "flows.mitm"
    provider, provider_port = start_fake_provider(0.002, "--agent-file", str(work / NOTES), *provider_args)
    try:
        options = (f"toolcall_lens_jsonl={export}", *options)
        options += (f"toolcall_lens_inject={inject}",) if inject else ()
        proxy, port = start_mitmdump(provider_port, dump, *options)
        try:
            run = recipe(name, home, f"http://127.0.0.1:{port}", mcp)
            done = subprocess.run(
                run.argv,
                cwd=work,
                env={**run.env, **(env or {})},
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=RUN_TIMEOUT,
                check=False,
            )
        finally:
            proxy.stop()
        with urllib.request.urlopen(f"http://127.0.0.1:{provider_port}/agent", timeout=10) as answer:
            sent = json.loads(answer.read())
    finally:
        provider.stop()
    records = [json.loads(line) for line in export.read_text().splitlines()] if export.exists() else []
    with dump.open("rb") as file:
        flows = list(io.FlowReader(file).stream())
    return Outcome(done, sent, records, flows)


def sent_calls(outcome: Outcome) -> list[dict]:
    [turn] = [entry for entry in outcome.sent if entry["answer"] == "calls"]
    return turn["calls"]


def as_json(arguments):
    return json.loads(arguments) if isinstance(arguments, str) else arguments


def rebuilt_calls(outcome: Outcome) -> list[dict]:
    """Every call the addon rebuilt on an LLM flow, in order."""
    return [
        {"id": call["id"], "name": call["name"], "arguments": as_json(call["arguments"])}
        for record in outcome.records
        for choice in record["result"].get("choices", ())
        for call in choice["tool_calls"]
    ]


def calls_of(record: dict) -> list[dict]:
    return [call for choice in record["result"].get("choices", ()) for call in choice["tool_calls"]]


def follow_ups(outcome: Outcome) -> list[dict]:
    """The provider's answers to requests that carried tool results."""
    return [entry for entry in outcome.sent if entry["answer"] == "results"]


def survived(outcome: Outcome) -> bool:
    """It finished with the final text, after a follow-up that carried a result for each call sent, and
    echoed no call it was sent under another name: an agent that answers a call by its id but built its
    name wrong (`bashbashbash`, from a name sent again on every delta) ran no such tool, and answers with
    the error its tool loop made of it."""
    sent = sent_calls(outcome)
    ids = {call["id"] for call in sent}
    if None in ids:  # calls without ids (Gemini): the agent answers them under ids of its own making
        answered = any(len(entry["results"]) >= len(sent) for entry in follow_ups(outcome))
    else:
        answered = any(ids <= set(entry["results"]) for entry in follow_ups(outcome))
    names = {call["id"]: call["name"] for call in sent if call["id"]}
    faithful = all(
        entry.get("echoed", {}).get(call_id, name) == name
        for entry in follow_ups(outcome)
        for call_id, name in names.items()
    )
    return outcome.done.returncode == 0 and FINAL_TEXT in outcome.done.stdout and answered and faithful


def echoed(outcome: Outcome) -> list[tuple]:
    """The calls the agent echoed back in the request that carried their results (HTTP flows of the dump)."""
    found = []
    for flow in outcome.flows:
        if not hasattr(flow, "request") or flow.websocket is not None:
            continue
        try:
            body = json.loads(flow.request.get_content() or b"null")
        except ValueError:
            continue
        calls, results = extract_echoes(body)
        if results:
            found.append(([(c.id, c.name, as_json(c.arguments or "{}")) for c in calls], results))
    return found


# Runs beside the table's: Pydantic AI over Responses (LangChain's fails there: its own test below).
CLEAN_RUNS = [*RUNS, "pydantic-ai-responses"]


@pytest.mark.parametrize("name", [pytest.param(name, marks=needs(name)) for name in CLEAN_RUNS])
def test_agent_rebuilt_calls_are_the_ones_sent_and_its_follow_up_answers_both(name, tmp_path):
    outcome = run_agent(name, tmp_path)
    report = f"stdout:\n{outcome.done.stdout}\nstderr:\n{outcome.done.stderr[-3000:]}"
    assert survived(outcome), report
    sent = [{**call, "arguments": json.loads(call["arguments"])} for call in sent_calls(outcome)]
    assert rebuilt_calls(outcome) == sent, report
    # The calls come interleaved on purpose: the one true warning is that recency routing would misroute
    # them, on the flow that carried them. Nothing else, on no other flow: no false warning.
    loud = [
        (bool(calls_of(r)), w["code"])
        for r in outcome.records
        for w in r["result"]["warnings"]
        if w["severity"] == "warning"
    ]
    whole = name == "gemini-cli"  # Gemini sends each call whole: no routing rule can go wrong
    assert loud == ([] if whole else [(True, "recency-misroute")]), loud
    codes = {w["code"] for r in outcome.records for w in r["result"]["warnings"]}
    assert not codes & {"client-misassembled", "unknown-tool-call-id"}
    websocket = [r for r in outcome.records if r["result"].get("websocket")]
    if name == "codex-ws":
        # The built-in provider speaks Responses over WebSocket: the addon read it there, and the client's
        # next response.create answered both calls.
        assert websocket and not [r for r in outcome.records if not r["result"].get("websocket")]
        evidence = [
            r["result"]["websocket"]["evidence"] for r in websocket if r["result"]["websocket"]["evidence"]
        ]
        assert {call["id"] for call in sent} <= set(evidence[0]["answered"]), evidence
    else:
        assert not websocket
        # The follow-up echoed each call as sent (the addon checked it against the stream: no warning above).
        [(calls, results)] = echoed(outcome)[:1]
        if name == "gemini-cli":
            # The stream named no ids (as the Gemini API's does not): Gemini CLI made its own, so the echo
            # is matched by turn, position and name, and each of its ids has a result.
            assert [c["id"] for c in sent] == [None] * len(sent)
            assert [(n, a) for _, n, a in calls] == [(c["name"], c["arguments"]) for c in sent]
            assert all(i for i, _, _ in calls) and {i for i, _, _ in calls} <= set(results)
        else:
            expected = [(c["id"], c["name"], c["arguments"]) for c in sent]
            assert sorted(calls, key=str) == sorted(expected, key=str)
            assert {c["id"] for c in sent} <= set(results)
        # And the addon checked that follow-up against the stream, and it matched: the result says so.
        checked = [
            r["result"]["evidence"]
            for r in outcome.records
            if (r["result"].get("evidence") or {}).get("earlier_flows")
        ]
        assert checked, [r["result"].get("evidence") for r in outcome.records]
        assert checked[0]["matched"] == len(sent), checked
        assert not checked[0]["unanswered"] and not checked[0]["unknown"], checked


@pytest.mark.needs(missing("codex") is None, missing("codex") or "")
@pytest.mark.parametrize("name", ["codex-patch", "codex-ws-patch"])
def test_codex_applies_the_patch_of_a_custom_tool_call_the_addon_rebuilt(name, tmp_path):
    # Codex declares its apply_patch, a custom (free-form) tool, to the GPT-5 models: the provider answers
    # one with a shell call and a patch, their deltas interleaved; Codex applies the patch it rebuilt. Over
    # HTTP SSE, and over its built-in provider's Responses WebSocket.
    outcome = run_agent(name, tmp_path, None, "--agent-model", PATCH_MODEL)
    report = f"stdout:\n{outcome.done.stdout}\nstderr:\n{outcome.done.stderr[-3000:]}"
    assert survived(outcome), report
    assert (tmp_path / "work" / PATCHED).read_text() == PATCHED_TEXT
    [turn] = [entry for entry in outcome.sent if entry["answer"] == "calls"]
    assert "apply_patch" in turn["tools"]
    [record] = [r for r in outcome.records if calls_of(r)]
    rebuilt = [(c["id"], c["name"], c["arguments"], c.get("custom", False)) for c in calls_of(record)]
    shell, patch = turn["calls"]
    assert rebuilt == [
        (shell["id"], shell["name"], shell["arguments"], False),
        (patch["id"], "apply_patch", PATCH, True),
    ]
    loud = [(bool(calls_of(r)), w["code"]) for r in outcome.records for w in r["result"]["warnings"]
            if w["severity"] == "warning"]  # fmt: skip
    assert loud == [(True, "recency-misroute")], loud
    if name == "codex-ws-patch":
        # The next response.create answered both calls, the patch with a custom_tool_call_output.
        answered = (record["result"]["websocket"]["evidence"] or {}).get("answered") or []
        assert sorted(answered) == sorted([shell["id"], patch["id"]]), record["result"]["websocket"]
        return
    # Codex echoed the patch as a custom_tool_call item and answered it: checked, and it matched.
    [evidence] = [r["result"]["evidence"] for r in outcome.records if (r["result"].get("evidence") or {}).get("earlier_flows")][:1]  # fmt: skip
    assert (evidence["matched"], evidence["unanswered"], evidence["unknown"]) == (2, [], []), evidence


@pytest.mark.needs(missing("codex") is None, missing("codex") or "")
@pytest.mark.parametrize("name", ["codex", "codex-ws", "codex-patch", "codex-ws-patch"])
def test_codex_calls_an_mcp_servers_tool_declared_in_a_namespace_or_found_by_a_tool_search(name, tmp_path):
    # Codex declares an MCP server's tools in a namespace (mcp__archive); to the GPT-5 models it defers them
    # behind a client-executed tool search instead, whose output loads them for the next turn. The provider
    # searches where it must, then calls the server's lookup_1 beside the shell, interleaved; Codex runs it
    # on the real MCP server (tests/mcp_server.py). The addon shows the search as a call, the lookup in its
    # namespace, and no undeclared-tool: the tools the search loaded are declared, over WebSocket too,
    # where the next turns carry only their new items.
    calls_log = tmp_path / "mcp-calls.jsonl"
    server = [sys.executable, str(ROOT / "tests" / "mcp_server.py"), str(calls_log)]
    provider = ("--agent-search", "lookup_1", "--agent-model", PATCH_MODEL)
    outcome = run_agent(name, tmp_path, None, *provider, mcp={"archive": server})
    report = f"stdout:\n{outcome.done.stdout}\nstderr:\n{outcome.done.stderr[-3000:]}"
    assert survived(outcome), report
    assert [json.loads(line) for line in calls_log.read_text().splitlines()] == [
        {"name": "lookup_1", "arguments": {"key": "k1"}}
    ], report
    searched = name.endswith("-patch")
    searches = [entry["calls"] for entry in outcome.sent if entry["answer"] == "search"]
    assert len(searches) == searched, outcome.sent
    shell, lookup = sent_calls(outcome)
    expected = [(shell["id"], shell["name"], None, None), (lookup["id"], "lookup_1", "mcp__archive", None)]
    if searched:
        [[search]] = searches
        expected.insert(0, (search["id"], "tool_search", None, "tool_search"))
    rebuilt = [(c["id"], c["name"], c.get("namespace"), c.get("builtin")) for r in outcome.records for c in calls_of(r)]  # fmt: skip
    assert rebuilt == expected
    loud = [w["code"] for r in outcome.records for w in r["result"]["warnings"] if w["severity"] == "warning"]
    assert loud == ["recency-misroute"], loud  # the interleaving: no undeclared-tool, no schema-mismatch
    if name.startswith("codex-ws"):
        answered = {i for r in outcome.records for i in ((r["result"]["websocket"]["evidence"] or {}).get("answered") or ())}  # fmt: skip
        assert {call[0] for call in expected} <= answered, [r["result"]["websocket"] for r in outcome.records]
        return
    # Codex echoed the search and the calls and answered them (a tool search by its output): checked.
    evidence = [r["result"]["evidence"] for r in outcome.records if (r["result"].get("evidence") or {}).get("earlier_flows")]  # fmt: skip
    assert evidence and all(not e["unanswered"] and not e["unknown"] for e in evidence), evidence
    assert max(e["matched"] for e in evidence) == len(expected), evidence


@pytest.mark.needs(missing("claude-code") is None, missing("claude-code") or "")
@pytest.mark.parametrize("deferred", [False, True], ids=["declared", "tool-search"])
def test_claude_code_calls_an_mcp_servers_tool_declared_or_loaded_by_its_tool_search(deferred, tmp_path):
    # Claude Code declares an MCP server's tools as mcp__SERVER__TOOL; with its tool search on
    # (ENABLE_TOOL_SEARCH, automatic past many MCP tools) it lists them by name only, and a call to its
    # ToolSearch tool loads one: the next request declares it. The provider searches where it must, then
    # calls the tool beside the shell; the server gets the call; the addon's checks find nothing amiss.
    calls_log = tmp_path / "mcp-calls.jsonl"
    server = [sys.executable, str(ROOT / "tests" / "mcp_server.py"), str(calls_log)]
    wanted = "mcp__archive__lookup_1"
    env = {"ENABLE_TOOL_SEARCH": "true" if deferred else "false"}
    outcome = run_agent(
        "claude-code", tmp_path, None, "--agent-search", wanted, mcp={"archive": server}, env=env
    )
    report = f"stdout:\n{outcome.done.stdout}\nstderr:\n{outcome.done.stderr[-3000:]}"
    assert survived(outcome), report
    assert [json.loads(line) for line in calls_log.read_text().splitlines()] == [
        {"name": "lookup_1", "arguments": {"key": "k1"}}
    ], report
    searches = [entry["calls"] for entry in outcome.sent if entry["answer"] == "search"]
    assert [[c["name"] for c in calls] for calls in searches] == ([["ToolSearch"]] if deferred else [])
    shell, lookup = sent_calls(outcome)
    assert lookup["name"] == wanted
    rebuilt = [(c["id"], c["name"]) for r in outcome.records for c in calls_of(r)]
    expected = [(c["id"], c["name"]) for c in (*(searches[0] if searches else ()), shell, lookup)]
    assert rebuilt == expected
    loud = [w["code"] for r in outcome.records for w in r["result"]["warnings"] if w["severity"] == "warning"]
    assert loud == ["recency-misroute"], loud  # the interleaving: no undeclared-tool, no schema-mismatch
    evidence = [r["result"]["evidence"] for r in outcome.records if (r["result"].get("evidence") or {}).get("earlier_flows")]  # fmt: skip
    assert evidence and all(not e["unanswered"] and not e["unknown"] for e in evidence), evidence


# How each CLI names an MCP server's tool in the tools it declares: Gemini CLI mcp_SERVER_TOOL, opencode
# SERVER_TOOL (Claude Code's mcp__SERVER__TOOL and Codex's namespace are tested above).
MCP_NAMES = {"gemini-cli": "mcp_archive_lookup_1", "opencode": "archive_lookup_1"}


@pytest.mark.parametrize("name", [pytest.param(name, marks=needs(name)) for name in MCP_NAMES])
def test_gemini_cli_and_opencode_call_an_mcp_servers_tool_under_their_own_names_for_it(name, tmp_path):
    # The provider calls the MCP server's lookup_1, under the name the agent declared it by, beside the
    # shell; the agent runs it on the real server (tests/mcp_server.py) and answers it. The addon rebuilt
    # the call under that name, found it declared and its arguments to its schema (Gemini CLI declares it
    # with parametersJsonSchema), and matched the follow-up's answer: nothing said but opencode's
    # interleaving (Gemini sends each call whole).
    calls_log = tmp_path / "mcp-calls.jsonl"
    server = [sys.executable, str(ROOT / "tests" / "mcp_server.py"), str(calls_log)]
    wanted = MCP_NAMES[name]
    outcome = run_agent(name, tmp_path, None, "--agent-search", wanted, mcp={"archive": server})
    report = f"stdout:\n{outcome.done.stdout}\nstderr:\n{outcome.done.stderr[-3000:]}"
    assert survived(outcome), report
    assert [json.loads(line) for line in calls_log.read_text().splitlines()] == [
        {"name": "lookup_1", "arguments": {"key": "k1"}}
    ], report
    [turn] = [entry for entry in outcome.sent if entry["answer"] == "calls"]
    assert wanted in turn["tools"], turn["tools"]
    shell, lookup = sent_calls(outcome)
    assert lookup["name"] == wanted
    rebuilt = [(c["id"], c["name"], as_json(c["arguments"])) for r in outcome.records for c in calls_of(r)]
    assert rebuilt == [(c["id"], c["name"], json.loads(c["arguments"])) for c in (shell, lookup)]
    loud = [w["code"] for r in outcome.records for w in r["result"]["warnings"] if w["severity"] == "warning"]
    assert loud == ([] if name == "gemini-cli" else ["recency-misroute"]), loud
    codes = {w["code"] for r in outcome.records for w in r["result"]["warnings"]}
    assert not codes & {"undeclared-tool", "schema-mismatch", "unanswered-call", "unknown-tool-call-id"}, (
        codes
    )
    evidence = [r["result"]["evidence"] for r in outcome.records if (r["result"].get("evidence") or {}).get("earlier_flows")]  # fmt: skip
    assert evidence and evidence[0]["matched"] == 2, evidence
    assert all(not e["unanswered"] and not e["unknown"] for e in evidence), evidence


@pytest.mark.needs(missing("openai-agents") is None, missing("openai-agents") or "")
@pytest.mark.parametrize("worker", [False, True], ids=["in-proxy", "worker"])
@pytest.mark.parametrize("name", ["openai-agents-builtin", "openai-agents-builtin-ws"])
def test_the_agents_sdks_built_in_shell_and_patch_are_rebuilt_declared_answered(name, worker, tmp_path):
    # The OpenAI Agents SDK's ShellTool and ApplyPatchTool, declared by type: the provider sends a built-in
    # shell call and a patch; the SDK runs both and finishes; the addon (in the proxy, or in its worker)
    # rebuilt both as built-in calls, declared, whole in their items, answered: no warning.
    outcome = run_agent(name, tmp_path, options=(f"toolcall_lens_worker={str(worker).lower()}",))
    report = f"stdout:\n{outcome.done.stdout}\nstderr:\n{outcome.done.stderr[-3000:]}"
    assert survived(outcome), report
    assert json.loads(outcome.done.stdout)["done"] == [
        {"tool": "shell", "command": "echo hi", "exit": 0},
        {"tool": "apply_patch", "operation": "create_file", "path": PATCHED},
    ], report
    assert (tmp_path / "work" / PATCHED).read_text().strip() == PATCHED_TEXT.strip()  # as the SDK applied it
    shell, patch = sent_calls(outcome)
    action = {"commands": ["echo hi"], "timeout_ms": None, "max_output_length": None}
    expected = [
        (shell["id"], "shell", "shell", action),
        (patch["id"], "apply_patch", "apply_patch", PATCH_OPERATION),
    ]
    rebuilt = [(c["id"], c["name"], c.get("builtin"), json.loads(c["arguments"])) for r in outcome.records for c in calls_of(r)]  # fmt: skip
    assert rebuilt == expected
    loud = [(w["code"], w["message"]) for r in outcome.records for w in r["result"]["warnings"] if w["severity"] == "warning"]  # fmt: skip
    assert loud == []
    if name.endswith("-ws"):  # the next response.create answered both
        answered = {i for r in outcome.records for i in ((r["result"]["websocket"]["evidence"] or {}).get("answered") or ())}  # fmt: skip
        assert answered == {shell["id"], patch["id"]}
    else:  # the request after them echoed both calls as streamed and answered both
        (evidence,) = [r["result"]["evidence"] for r in outcome.records if (r["result"].get("evidence") or {}).get("earlier_flows")]  # fmt: skip
        assert evidence["matched"] == 2 and evidence["unanswered"] == [] and evidence["unknown"] == []


@pytest.mark.parametrize("name", [pytest.param("langchain-responses", marks=needs("langchain-responses"))])
def test_langchain_over_responses_breaks_on_interleaved_calls_the_addon_says_why_serialize_mends_it(
    name, tmp_path
):
    # langchain-openai's Responses path starts a new call whenever a delta's output_index differs from the
    # last one's: an interleaved delta of the first call becomes a third call, without id or name, and
    # LangGraph's tool loop fails on it (a ToolMessage needs a tool_call_id). The provider's calls come
    # interleaved: the agent never gets to a follow-up. The addon rebuilt both calls by item and says the
    # stream breaks recency routing; with toolcall_lens_repair=serialize the same agent finishes.
    outcome = run_agent(name, tmp_path)
    assert not survived(outcome) and outcome.done.returncode != 0
    assert "tool_call_id" in outcome.done.stderr, outcome.done.stderr[-3000:]
    assert follow_ups(outcome) == []
    [record] = [r for r in outcome.records if calls_of(r)]
    sent = [{**call, "arguments": json.loads(call["arguments"])} for call in sent_calls(outcome)]
    assert rebuilt_calls(outcome) == sent
    assert [w["code"] for w in record["result"]["warnings"]] == ["recency-misroute"]
    mended = run_agent(name, tmp_path / "serialized", options=("toolcall_lens_repair=serialize",))
    report = f"stdout:\n{mended.done.stdout}\nstderr:\n{mended.done.stderr[-3000:]}"
    assert survived(mended), report
    assert sorted(t["tool"] for t in json.loads(mended.done.stdout)["done"]) == ["read_file", "shell"], report


def table() -> dict[tuple[str, str], str]:
    """The README's injection table: {(agent run, injection): survives | breaks | not applied}."""
    return verdict_table(README.read_text(), "## In front of a real agent")


def measured(outcome: Outcome, injection: str) -> str:
    # What was done is on the result of an HTTP flow that carried the calls, and on the connection's record
    # (in the dump) of a WebSocket one.
    rewrites = [r["result"].get("rewrite") for r in outcome.records if calls_of(r)]
    rewrites += [
        flow.metadata.get("toolcall_lens", {}).get("rewrite") for flow in outcome.flows if flow.websocket
    ]
    applied = any(injection in (rewrite or {}).get("inject", ()) for rewrite in rewrites)
    if not applied:
        return "not applied"
    return "survives" if survived(outcome) else "breaks"


def test_the_table_has_every_agent_and_injection():
    assert set(table()) == {(name, injection) for name in RUNS for injection in INJECTIONS}
    assert set(AGENTS) <= {RUNS[name] for name in RUNS}


@pytest.mark.parametrize("injection", INJECTIONS)
@pytest.mark.parametrize("name", [pytest.param(name, marks=needs(name)) for name in RUNS])
def test_injection_against_agent_is_as_the_table_says(name, injection, tmp_path):
    outcome = run_agent(name, tmp_path, inject=injection)
    report = f"stdout:\n{outcome.done.stdout}\nstderr:\n{outcome.done.stderr[-3000:]}"
    found = measured(outcome, injection)
    assert found == table()[name, injection], f"measured: {name} {injection} {found}\n{report}"
    if found == "breaks" and follow_ups(outcome):
        # The agent went on with what it built: its follow-up's evidence must show the damage.
        said = {
            w["code"]
            for r in outcome.records
            if (r["result"].get("evidence") or {}).get("earlier_flows")
            for w in r["result"]["warnings"]
        }
        assert said & {"client-misassembled", "unanswered-call"}, (said, report)


def seeded_table() -> dict[tuple[str, str], str]:
    """agents.md's table of what each Chat agent echoes under seed-args: {(run, "echoes"): kind}."""
    return verdict_table(
        (ROOT / "docs" / "agents.md").read_text(), "### A translator's seeded arguments (`seed-args`)"
    )


def echo_kind(echoed: str, streamed: str) -> str:
    """What an echo of arguments that were no JSON whole is: the streamed text itself, the JSON value it
    began with, or something else."""
    if echoed == streamed:
        return "as sent"
    first = first_value(streamed)
    try:
        same = first is not None and json.loads(echoed or "{}") == first[0]
    except ValueError:
        same = False
    return "the first value" if same else "other"


@pytest.mark.parametrize("name", [pytest.param(name, marks=needs(name)) for name in SEEDED_RUNS])
def test_seeded_arguments_are_kept_as_the_table_says(name, tmp_path):
    outcome = run_agent(name, tmp_path, inject="seed-args")
    report = f"stdout:\n{outcome.done.stdout}\nstderr:\n{outcome.done.stderr[-3000:]}"
    [provider] = [r["result"] for r in outcome.records if calls_of(r)]
    streamed = {c["id"]: c["arguments"] for c in provider["choices"][0]["tool_calls"]}
    assert all(a.startswith("{}{") for a in streamed.values()), streamed
    # On the stream: what a parse-early client builds.
    (cut,) = [w for w in provider["warnings"] if w["code"] == "parse-early-misroute"]
    assert [c["arguments"] for c in cut["would_build"]] == ["{}"] * len(streamed)
    # The follow-up: what the agent echoed for each call, and what the addon said of it.
    [(echoes, _)] = [
        found
        for flow in outcome.flows
        if hasattr(flow, "request") and flow.websocket is None
        for found in [extract_echoes(json.loads(flow.request.get_content() or b"null"))]
        if found[1]
    ]
    kinds = {echo_kind(c.arguments or "", streamed[c.id]) for c in echoes if c.id in streamed}
    assert len(kinds) == 1 and kinds == {seeded_table()[name, "echoes"]}, (kinds, report)
    said = [w for r in outcome.records if not calls_of(r) for w in r["result"]["warnings"]]
    misassembled = [w for w in said if w["code"] == "client-misassembled"]
    if kinds == {"as sent"}:
        assert misassembled == [], misassembled
    else:
        assert len(misassembled) == len(streamed), said
        first = kinds == {"the first value"}
        assert all(w.get("arguments_first_value", False) is first for w in misassembled), misassembled


def through_toolcall_lens_run(name: str, tmp: Path, *mode: str) -> subprocess.CompletedProcess:
    """The agent run by `toolcall-lens run MODE... -- AGENT`, pointed straight at the provider (no proxy
    variable, no reverse proxy): the capture is the command's."""
    work, home = folders(tmp)
    provider, provider_port = start_fake_provider(0.002, "--agent-file", str(work / NOTES))
    try:
        run = recipe(name, home, f"http://127.0.0.1:{provider_port}")
        env = {k: v for k, v in run.env.items() if "proxy" not in k.lower()}
        argv = [str(ROOT / ".venv" / "bin" / "toolcall-lens"), "run", *mode, "--dir", str(tmp / "run")]
        argv += ["--timeout", str(RUN_TIMEOUT - 20), "--", *run.argv]
        return subprocess.run(
            argv,
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
            check=False,
        )
    finally:
        provider.stop()


@pytest.mark.parametrize("name", [pytest.param("codex", marks=needs("codex"))])
@pytest.mark.parametrize("capture", [[], ["--capture", "tokio-rt-worker"]], ids=["followed", "by-name"])
def test_toolcall_lens_run_captures_codex_in_local_mode_without_proxy_variables(name, capture, tmp_path):
    """`toolcall-lens run --mode local [--capture tokio-rt-worker] -- codex ...`: Codex's npm launcher
    starts the binary whose requests leave from tokio-rt-worker threads: captured as the launcher's
    descendant, or by that thread name."""
    from toolcall_lens.run import local_mode_unavailable

    if reason := local_mode_unavailable():
        pytest.skip(reason)
    done = through_toolcall_lens_run(name, tmp_path, "--mode", "local", *capture)
    assert done.returncode == 0, done.stderr[-3000:]
    assert FINAL_TEXT in done.stdout
    report = done.stderr
    assert "2 LLM response(s)" in report and "2 calls: exec_command, exec_command" in report, report
    assert "2 echo(es) matched" in report, report


@pytest.mark.parametrize("name", [pytest.param("claude-code", marks=needs("claude-code"))])
def test_toolcall_lens_run_captures_claude_code_in_transparent_mode(name, tmp_path):
    """`toolcall-lens run --mode transparent -- claude ...`: every connection of its process tree is
    redirected to the proxy (a cgroup of its own, one iptables rule), no thread name to know."""
    from toolcall_lens.run import transparent_mode_unavailable

    if reason := transparent_mode_unavailable():
        pytest.skip(reason)
    done = through_toolcall_lens_run(name, tmp_path, "--mode", "transparent")
    assert done.returncode == 0, done.stderr[-3000:]
    assert FINAL_TEXT in done.stdout
    report = done.stderr
    assert "2 calls: Bash, Read" in report and "2 echo(es) matched" in report, report
