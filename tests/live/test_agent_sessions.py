"""Real agent CLIs at once through one mitmdump with the addon, against the fake provider's `agent` scenario:
Claude Code, Codex (HTTP SSE), Gemini CLI and opencode, their requests interleaved on one proxy. Each run
must be one session of its own, its turns in order, told as the agent lets it be told: Claude Code,
Codex and opencode by the session headers they send, Gemini CLI (which sends none) by the conversation its
follow-up carries. The CLI's `sessions` view of the dump must group the flows as the addon did live."""

from __future__ import annotations

import itertools
import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from agents import NOTES, NOTES_TEXT, RUNS, missing, recipe
from lab import proxy_argv, start_fake_provider, start_proxy
from mitmproxy import io
from streams import ROOT

pytestmark = pytest.mark.live

RUN_TIMEOUT = 240  # only so a hung agent fails the test instead of hanging it
# Each agent, the User-Agent its requests carry, and how its session is told.
AGENTS = {
    "claude-code": ("claude-cli/", "header x-claude-code-session-id"),
    "codex": ("codex_exec/", "header session-id"),
    "gemini-cli": ("GeminiCLI", "new"),
    "opencode": ("opencode/", "header x-session-id"),
}


# A gate in front of the addon: each agent's first request waits until every agent has sent one, so the
# runs are surely interleaved on the proxy (an agent alone takes well under a second against the provider).
GATE = """
import asyncio

AGENTS = {agents!r}


class Gate:
    def __init__(self):
        self.seen = set()
        self.open = None

    async def request(self, flow):
        agent = next((a for a in AGENTS if a in flow.request.headers.get("user-agent", "")), None)
        if agent is None:
            return
        if self.open is None:
            self.open = asyncio.Event()
        self.seen.add(agent)
        if len(self.seen) == len(AGENTS):
            self.open.set()
        try:
            await asyncio.wait_for(self.open.wait(), 60)
        except TimeoutError:
            self.open.set()  # an agent that never came: the others go on, and the test says so


addons = [Gate()]
"""


def needs_all():
    why = [reason for name in AGENTS if (reason := missing(RUNS[name])) is not None]
    return pytest.mark.needs(not why, "; ".join(why))


@needs_all()
def test_agents_at_once_through_one_proxy_are_one_session_each_in_the_addon_and_the_cli(tmp_path: Path):
    # One working folder for all: the provider has each agent read the same notes file.
    work = tmp_path / "work"
    work.mkdir()
    (work / NOTES).write_text(NOTES_TEXT)
    export, dump = tmp_path / "flows.jsonl", tmp_path / "flows.mitm"
    provider, provider_port = start_fake_provider(0.002, "--agent-file", str(work / NOTES))
    try:
        gate = tmp_path / "gate.py"
        gate.write_text(GATE.format(agents=[ua for ua, _ in AGENTS.values()]))
        argv = proxy_argv(
            provider_port, f"toolcall_lens_jsonl={export}", dump=dump, scripts=(gate, ROOT / "addon.py")
        )
        proxy, port = start_proxy(argv)
        try:

            def run(name: str) -> subprocess.CompletedProcess:
                home = tmp_path / f"home-{name}"
                home.mkdir()
                how = recipe(name, home, f"http://127.0.0.1:{port}")
                return subprocess.run(
                    how.argv,
                    cwd=work,
                    env=how.env,
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    text=True,
                    timeout=RUN_TIMEOUT,
                    check=False,
                )

            with ThreadPoolExecutor(len(AGENTS)) as pool:
                done = dict(zip(AGENTS, pool.map(run, AGENTS), strict=True))
        finally:
            proxy.stop()
    finally:
        provider.stop()
    for name, outcome in done.items():
        assert outcome.returncode == 0, f"{name}: {outcome.stderr[-2000:]}"

    with dump.open("rb") as file:
        agent_of = {
            flow.id: next(
                name for name, (ua, _) in AGENTS.items() if ua in flow.request.headers.get("user-agent", "")
            )
            for flow in io.FlowReader(file).stream()
        }
    records = [json.loads(line) for line in export.read_text().splitlines()]
    by_agent: dict[str, list[dict]] = {name: [] for name in AGENTS}
    for record in records:
        by_agent[agent_of[record["flow_id"]]].append(record)
    # The runs overlapped on the proxy (else the grouping would prove little).
    spans = sorted((min(r["time"] for r in rs), max(r["time"] for r in rs)) for rs in by_agent.values())
    assert all(later[0] < earlier[1] for earlier, later in itertools.pairwise(spans)), spans

    sessions = {}
    for name, (_, told) in AGENTS.items():
        mine = sorted(by_agent[name], key=lambda r: r["time"])
        assert len(mine) >= 2, f"{name}: {len(mine)} LLM flow(s)"
        assert len({r["session"] for r in mine}) == 1, f"{name} split: {[r['session'] for r in mine]}"
        assert [r["turn"] for r in mine] == list(range(1, len(mine) + 1)), name
        first = mine[0]["result"]["session"]
        assert first["by"] == told, name
        sessions[name] = mine[0]["session"]
        # Each run's follow-up sent both results back: none of its calls was left unanswered, no loop.
        codes = {w["code"] for r in mine for w in r["result"]["warnings"]}
        assert not codes & {"tool-call-loop", "unanswered-call"}, (name, codes)
        results = [t for r in mine for t in r["result"]["session"]["tool_results"]]
        assert len(results) == 2, (name, results)
    assert len(set(sessions.values())) == len(AGENTS)
    # Gemini CLI's follow-up joined its first turn by the conversation it carries.
    gemini = sorted(by_agent["gemini-cli"], key=lambda r: r["time"])
    assert gemini[1]["result"]["session"]["by"] == f"the conversation of flow {gemini[0]['flow_id']}"

    # The CLI on the dump: the same sessions, the same turns, and the view names each.
    cli = [str(Path(subprocess.sys.executable).parent / "toolcall-lens"), "sessions", str(dump), "--json"]
    shown = subprocess.run(cli, capture_output=True, text=True, timeout=120, check=False, cwd=ROOT)
    assert shown.returncode == 0, shown.stderr
    grouped = {
        turn["flow_id"]: (session["id"], turn["turn"])
        for session in json.loads(shown.stdout)["sessions"]
        for turn in session["turns"]
    }
    assert grouped == {r["flow_id"]: (r["session"], r["turn"]) for r in records}
    text = subprocess.run(cli[:-1], capture_output=True, text=True, timeout=120, check=False, cwd=ROOT).stdout
    assert text.count("== session ") == len(AGENTS) and "NEVER ANSWERED" not in text
