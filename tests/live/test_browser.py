"""In a real browser: mitmweb with the addon in reverse mode in front of scripts/fake_provider, one
interleaved Chat Completions stream driven through it, then headless Chromium (Debian's ``chromium``,
driven by Playwright's Python package; no browser download) checks what a person would see: the flow list
with the marker and the comment, and the flow opened in the "toolcall-lens" content view.

Skipped when /usr/bin/chromium is missing, and failed then in CI (.ci/run installs it). Every process and
the browser are stopped in finalizers, even on failure. A passing run takes the screenshot README shows; it replaces
docs/mitmweb-toolcall-lens.png only with TOOLCALL_LENS_SCREENSHOT=1 set (so test runs leave the tree as it
was)."""

from __future__ import annotations

import http.client
import json
import os
import re
import time
import warnings
from pathlib import Path

import pytest
from lab import ROOT
from mitmproxy.utils.emoji import emoji
from playwright.sync_api import expect, sync_playwright
from weblab import start_mitmweb_proxy

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOT = ROOT / "docs" / "mitmweb-toolcall-lens.png"
VIEWPORT = {"width": 1400, "height": 900}
SPLIT_AT = 560  # px: where the screenshot puts the splitter between the flow list and the flow
UI_TIMEOUT = 20_000  # ms, for every wait in the page: generous for a busy 2-core machine
# The flow list's columns; "comment" shows flow.comment. The marker is drawn inside the "path" cell.
WEB_COLUMNS = ["icon", "path", "method", "status", "size", "comment"]

COMMENT = "openai-chat interleaved: 2 calls: search_circulars, get_user_profile | warning: recency-misroute"
MARKER = emoji[":warning:"]  # mitmweb sends and shows flow.marked ":warning:" as the emoji itself
TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("search_circulars", "get_user_profile")
]
MESSAGES = [{"role": "user", "content": "Find the RBI circulars and my profile."}]
# What the toolcall-lens view must show for this stream: both calls with their pretty-printed arguments,
# the warning, the compatibility verdicts, and the calls the failing "recency" strategy would have built.
VIEW_TEXT = [
    "search_circulars",
    "get_user_profile",
    '"query": "RBI circulars"',
    '"user_id": "u123"',
    "recency-misroute",
    "compatibility",
    '{"query": "RBI{"user_id": "u circulars"}123"}',
]

# Skipped without it, failed in CI (tests/conftest.py): .ci/run installs it and checks this very path.
pytestmark = pytest.mark.needs(
    os.access(CHROMIUM, os.X_OK),
    f"browser tests need Debian's chromium at {CHROMIUM} (apt-get install chromium; .ci/run installs it)",
)


@pytest.fixture(scope="module")
def web(provider):
    # The flow list's columns are a Sequence[str] option: one --set each.
    proxy = start_mitmweb_proxy(provider, *(f"web_columns={column}" for column in WEB_COLUMNS))
    try:
        yield proxy
    finally:
        proxy.process.stop()


@pytest.fixture(scope="module")
def flow_id(web) -> str:
    """Drive the interleaved stream through mitmweb; the id of its flow, once mitmweb shows it annotated."""
    conn = http.client.HTTPConnection("127.0.0.1", web.port, timeout=30)
    try:
        body = json.dumps({"model": "interleaved", "stream": True, "messages": MESSAGES, "tools": TOOLS})
        conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        received = response.read()
    finally:
        conn.close()
    assert response.status == 200 and received.endswith(b"data: [DONE]\n\n")
    web.process.wait_for(r"toolcall-lens POST .*recency-misroute", timeout=30)
    # mitmweb publishes the flow after the addon's hook returns: poll its API until it has the annotation.
    deadline = time.monotonic() + 30
    while True:
        flows = [f for f in web.flows() if f["request"]["path"] == "/v1/chat/completions"]
        if flows and flows[0]["comment"] and flows[0]["response"]:
            return flows[0]["id"]
        if time.monotonic() > deadline:
            raise AssertionError(f"mitmweb never showed the annotated flow: {flows}")
        time.sleep(0.1)


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser, web, flow_id):
    """A fresh browser context, logged in to mitmweb (``?token=`` sets its auth cookie), on the flow list."""
    context = browser.new_context(viewport=VIEWPORT)
    try:
        page = context.new_page()
        page.set_default_timeout(UI_TIMEOUT)
        page.goto(f"{web.url}/?token={web.password}")
        yield page
    finally:
        context.close()


def flow_row(page):
    return page.locator(
        ".flow-table tbody tr", has=page.locator("td.col-comment", has_text="recency-misroute")
    )


def test_mitmweb_api_carries_the_comment_and_the_marker(web, flow_id):
    (flow,) = [f for f in web.flows() if f["id"] == flow_id]
    assert flow["comment"] == COMMENT
    assert flow["marked"] == MARKER
    assert flow["response"]["status_code"] == 200
    status, _ = web.api("/flows", token="not-the-password")
    assert status in (401, 403)  # the web password is in force


def test_flow_list_shows_the_marker_and_the_comment(page):
    expect(page.locator(".flow-table thead th.col-comment")).to_have_text("Comment", timeout=UI_TIMEOUT)
    row = flow_row(page)
    expect(row).to_have_count(1, timeout=UI_TIMEOUT)
    expect(row.locator("td.col-comment")).to_have_text(COMMENT, timeout=UI_TIMEOUT)
    expect(row.locator("td.col-path .marker")).to_have_text(MARKER, timeout=UI_TIMEOUT)
    expect(row.locator("td.col-path")).to_contain_text("/v1/chat/completions", timeout=UI_TIMEOUT)


def test_flow_opened_in_the_toolcall_lens_view_shows_both_calls_and_the_warning(page, flow_id, tmp_path):
    flow_row(page).click()
    expect(page).to_have_url(re.compile(rf"#/flows/{flow_id}/request$"), timeout=UI_TIMEOUT)
    page.locator("nav.nav-tabs-sm").get_by_text("Response", exact=True).click()
    expect(page).to_have_url(re.compile(rf"#/flows/{flow_id}/response$"), timeout=UI_TIMEOUT)

    view = page.locator(".contentview").first
    title = view.locator(".controls h5")
    selector = view.locator(".controls a.btn", has_text="View:")
    # "auto" picks the toolcall-lens view for an LLM stream by itself...
    expect(selector).to_contain_text("auto", timeout=UI_TIMEOUT)
    expect(title).to_have_text("toolcall-lens", timeout=UI_TIMEOUT)
    # ...and it can be picked by name from the view menu.
    selector.click()
    page.locator("ul.dropdown-menu.is-open li a", has_text=re.compile(r"^toolcall-lens$")).click()
    expect(selector).to_contain_text("toolcall-lens", timeout=UI_TIMEOUT)
    expect(title).to_have_text("toolcall-lens", timeout=UI_TIMEOUT)

    text = view.locator("pre")
    for expected in VIEW_TEXT:
        expect(text).to_contain_text(expected, timeout=UI_TIMEOUT)
    # The flow list beside it still shows the marker and the comment.
    expect(flow_row(page).locator("td.col-path .marker")).to_have_text(MARKER, timeout=UI_TIMEOUT)

    target = SCREENSHOT if os.environ.get("TOOLCALL_LENS_SCREENSHOT") else tmp_path / SCREENSHOT.name
    save_screenshot(page, view, target)
    assert target.stat().st_size > 10_000


def save_screenshot(page, view, target) -> None:
    """The screenshot, written only by a passing run, atomically: a read-only checkout only gets a
    warning."""
    # Give the flow detail most of the width (drag the splitter left), then scroll the view to the top.
    splitter = page.locator(".splitter.splitter-x").first.bounding_box()
    if splitter is not None:
        y = splitter["y"] + splitter["height"] / 2
        page.mouse.move(splitter["x"] + splitter["width"] / 2, y)
        page.mouse.down()
        page.mouse.move(SPLIT_AT, y, steps=5)
        page.mouse.up()
    view.evaluate("element => element.scrollIntoView({block: 'start'})")
    partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        target.parent.mkdir(exist_ok=True)
        partial.write_bytes(page.screenshot(type="png"))
        os.replace(partial, target)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        warnings.warn(f"could not save {target}: {exc}", stacklevel=2)
