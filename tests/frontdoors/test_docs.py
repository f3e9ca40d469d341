"""The front page stays a front page, and the reference pages in docs/ hold together: every relative link
(and its #anchor) leads somewhere, the option table names exactly the addon's options, every mitmproxy
command line they give stays on 127.0.0.1 without two servers on one port, and the dumps and exports the
commands write are ignored by git."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import doc_commands
import pytest
from recipes import DEFAULT_WEB_PORT, Recipe, recipes
from streams import ROOT

README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def links(text: str) -> list[str]:
    """The targets of the markdown links in ``text``, outside code blocks and code spans."""
    return LINK.findall(CODE_SPAN.sub("", FENCE.sub("", text)))


def anchors(text: str) -> set[str]:
    """The anchors GitHub gives the headings of a page: lower case, punctuation dropped, spaces to '-'."""
    found = set()
    for heading in re.findall(r"^#{1,6} (.+)$", FENCE.sub("", text), re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


def broken_links(page: Path, text: str) -> list[str]:
    broken = []
    for target in links(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: are not checked here
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.is_file() or anchor and file.suffix == ".md" and anchor not in anchors(file.read_text()):
            broken.append(target)
    return broken


def test_readme_is_a_front_page_of_at_most_200_lines():
    assert len(README.read_text().splitlines()) <= 200


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file_that_exists(page):
    text = page.read_text()
    assert links(text) or page.name != "README.md", "a README with no links"
    assert broken_links(page, text) == []


def test_the_link_check_can_fail():
    page = ROOT / "docs" / "README.md"
    assert broken_links(page, "[gone](no-such-page.md) [x](formats.md#no-such-heading) `[a](b.md)`") == [
        "no-such-page.md",
        "formats.md#no-such-heading",
    ]
    assert broken_links(page, "[ok](formats.md#compression-and-the-analysis-cap) [up](../README.md)") == []


def test_the_readme_links_every_reference_page():
    linked = {Path(t.partition("#")[0]).name for t in links(README.read_text()) if t.startswith("docs/")}
    pages = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert pages <= linked, pages - linked


def test_the_option_table_names_exactly_the_addons_options():
    from toolcall_lens.options import OPTIONS, PREFIX

    declared = {PREFIX + name for name, *_ in OPTIONS}
    doc = (ROOT / "docs" / "proxy.md").read_text()
    table = doc[doc.index("| option | default | meaning |") :]
    documented = set(re.findall(r"^\| `(toolcall_lens_\w+)` \|", table, re.MULTILINE))
    assert declared and documented == declared, documented ^ declared


def test_the_readmes_example_report_is_what_the_cli_prints(capsys, monkeypatch):
    from accumulator.cli import main

    text = README.read_text()
    command = re.search(
        r"^\.venv/bin/toolcall-lens (tests/data/production_interleaved\.sse .*)$", text, re.MULTILINE
    )
    report = re.search(
        r"^```\n(== tests/data/production_interleaved\.sse .*?)^```", text, re.MULTILINE | re.DOTALL
    )
    assert command and report
    monkeypatch.chdir(ROOT)
    assert main(command.group(1).split()) == 1
    assert report.group(1) in capsys.readouterr().out


def test_every_proxy_command_in_the_docs_keeps_mitmwebs_page_on_loopback():
    # Where the proxies listen is checked per page below (test_every_mitmproxy_command_line_...).
    found = recipes()
    assert {recipe.tool for recipe in found} >= {"mitmdump", "mitmweb"}
    for recipe in found:
        assert recipe.tool != "mitmweb" or recipe.web_host == "127.0.0.1", recipe.source


def test_no_mitmweb_command_in_the_docs_puts_its_page_on_a_proxy_port():
    # mitmweb's page listens on 8081 by default, where the reverse-mode examples put a proxy: mitmweb dies.
    found = recipes("mitmweb")
    assert found
    for recipe in found:
        ports = recipe.proxy_ports
        assert recipe.web_port not in ports, f"{recipe.source}: the page and a proxy share {recipe.web_port}"
        assert len(set(ports)) == len(ports), f"{recipe.source}: two proxies share a port"


def test_the_port_check_sees_mitmwebs_default_page_port():
    bare = Recipe("example", ["mitmweb", "--mode", "reverse:https://api.openai.com@8081"])
    assert bare.web_port == DEFAULT_WEB_PORT and bare.proxy_ports == [DEFAULT_WEB_PORT]
    moved = Recipe("example", [*bare.argv, "--set", "web_port=8090", "--mode", "regular", "-p", "8082"])
    assert moved.web_port == 8090 and moved.proxy_ports == [8081, 8082]


@pytest.mark.parametrize("page", [README, ROOT / "docs" / "proxy.md"], ids=lambda p: p.name)
def test_the_mitmweb_docs_say_how_to_move_its_page_and_which_address_opens_it(page):
    text = page.read_text()
    assert "--set web_port=" in text and "/?token=" in text


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_mitmproxy_command_line_listens_on_127_0_0_1(page):
    proxies = [
        command.argv for command in doc_commands.commands(page.read_text()) if doc_commands.is_mitm(command)
    ]
    assert [argv for argv in proxies if not doc_commands.binds_to_loopback(argv)] == []


def test_the_listen_check_can_fail():
    def binds(line: str) -> bool:
        return doc_commands.binds_to_loopback(doc_commands.parse(line).argv)

    assert binds(".venv/bin/mitmdump -s addon.py --listen-host 127.0.0.1")
    assert binds(
        "mitmdump --mode reverse:https://api.openai.com@127.0.0.1:8081 --mode reverse:https://x@127.0.0.1:2"
    )
    assert binds("mitmdump --set listen_host=127.0.0.1 --mode reverse:https://api.openai.com@8081")
    assert not binds("mitmdump -s addon.py")  # regular mode, every interface
    assert not binds("mitmdump --mode reverse:https://api.openai.com@8081")
    assert not binds("mitmdump --mode reverse:https://a@127.0.0.1:1 --mode reverse:https://b@8082")
    assert not binds("mitmdump --listen-host 0.0.0.0 --mode reverse:https://a@8081")
    assert not binds("mitmdump --listen-host 127.0.0.1 --mode reverse:https://a@0.0.0.0:8081")
    assert not binds("mitmweb --listen-host 127.0.0.1 --web-host 0.0.0.0")
    # Through the wrappers of the capture recipes: the command they run is the one checked.
    assert not binds("sudo ip netns exec lens .venv/bin/mitmdump --mode transparent -p 8080")
    assert binds("sudo ip netns exec lens .venv/bin/mitmdump --mode transparent --listen-host 127.0.0.1")
    wrapped = "sudo unshare -m --propagation private sh -c 'mount x && exec .venv/bin/mitmdump {}'"
    assert binds(wrapped.format('--mode "local:HTTP Client"'))  # local capture listens on no port
    assert not binds(wrapped.format('--mode "local:HTTP Client" --mode regular'))
    commands = doc_commands.commands(
        "`.venv/bin/mitmdump -s addon.py` and\n```sh\nX=1 mitmweb \\\n  -m regular # c\n```\n"
    )
    assert commands == [
        doc_commands.Command({"X": "1"}, ["mitmweb", "-m", "regular"]),
        doc_commands.Command({}, [".venv/bin/mitmdump", "-s", "addon.py"]),
    ]


def ignored_by_git(name: str) -> bool:
    done = subprocess.run(["git", "check-ignore", "-q", "--no-index", "--", name], cwd=ROOT, check=False)
    assert done.returncode in (0, 1), f"git check-ignore failed on {name!r}"
    return done.returncode == 0


@pytest.mark.skipif(
    shutil.which("git") is None
    or subprocess.run(["git", "rev-parse"], cwd=ROOT, capture_output=True, check=False).returncode != 0,
    reason="needs git and a checkout",
)
def test_the_dump_and_export_files_the_docs_name_are_ignored_by_git():
    # Dumps and exports hold prompts: a user who writes one inside the checkout must not commit it.
    names = {Path(name).name for page in PAGES for name in doc_commands.written_files(page.read_text())}
    assert "session.flows" in names
    assert [name for name in sorted(names) if not ignored_by_git(name)] == []
    assert not ignored_by_git("README.md")  # the check can fail


# The agent recipes the pages print are the ones tests/live/test_agents.py runs (scripts/agents.py).
AGENT_BINARIES = {"claude": "claude-code", "gemini": "gemini-cli", "opencode": "opencode", "codex": "codex"}


def _documented_agent_commands():
    for page in (README, ROOT / "docs" / "agents.md"):
        for command in doc_commands.commands(page.read_text()):
            if command.argv and command.argv[0] in AGENT_BINARIES:
                yield page.name, command


def test_the_agent_commands_the_pages_print_are_the_ones_the_agent_tests_run(tmp_path):
    from agents import recipe

    found = list(_documented_agent_commands())
    assert {AGENT_BINARIES[c.argv[0]] for _, c in found} >= {"claude-code", "gemini-cli", "opencode"}
    for page, command in found:
        name = AGENT_BINARIES[command.argv[0]]
        run = recipe(name, tmp_path / name, "http://127.0.0.1:8080")
        # Every variable the page sets is one the tests set, and every flag it passes one they pass.
        assert set(command.env) <= set(run.env), (page, command)
        flags = {word for word in command.argv[1:] if word.startswith("-")}
        assert flags <= set(run.argv), (page, command)
        subcommand = [w for w in command.argv[1:2] if not w.startswith("-") and w not in ("...", "TASK")]
        assert all(word in run.argv for word in subcommand), (page, command)


def test_the_codex_settings_the_pages_name_are_the_ones_the_agent_tests_write(tmp_path):
    from agents import recipe

    written = {
        name: (tmp_path / name / ".codex" / "config.toml").read_text()
        for name in ("codex", "codex-ws")
        if recipe(name, tmp_path / name, "http://127.0.0.1:8081")
    }
    agents_page = (ROOT / "docs" / "agents.md").read_text()
    for key in ("openai_base_url", "wire_api", "base_url", "env_key", "check_for_update_on_startup"):
        assert key in agents_page and any(f"{key} = " in text for text in written.values()), key
    assert 'openai_base_url = "http://127.0.0.1:8081/v1"' in written["codex-ws"]
    assert '`openai_base_url = "http://127.0.0.1:8081/v1"`' in README.read_text()
