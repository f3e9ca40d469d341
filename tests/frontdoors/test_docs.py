"""The front page stays a front page, and the reference pages in docs/ hold together: every relative link
(and its #anchor) leads somewhere, and the option table names exactly the addon's options."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
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
    command = re.search(r"^\.venv/bin/toolcall-lens (tests/data/production_interleaved\.sse .*)$", text, re.MULTILINE)
    report = re.search(r"^```\n(== tests/data/production_interleaved\.sse .*?)^```", text, re.MULTILINE | re.DOTALL)
    assert command and report
    monkeypatch.chdir(ROOT)
    assert main(command.group(1).split()) == 1
    assert report.group(1) in capsys.readouterr().out
