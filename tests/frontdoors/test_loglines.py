"""The addon's line a flow in mitmproxy's log: a record each at a human pace, shared records under load; the URL
it names, built as mitmproxy builds it."""

from __future__ import annotations

import asyncio
import logging

import pytest
from mitmproxy.test import tflow

from toolcall_lens.loglines import BURST, URL_HOSTS, WINDOW, LogLines, pretty_url

INFO, WARNING = logging.INFO, logging.WARNING


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def records(caplog):
    caplog.set_level(logging.INFO, logger="lines")
    return lambda: [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "lines"]


def lines_of(records) -> list[str]:
    return [line for _, message in records for line in message.split("\n")]


def test_lines_at_a_human_pace_are_a_record_each_written_at_once(records):
    clock = Clock()
    lines = LogLines(logging.getLogger("lines"), clock=clock)
    for k in range(3 * BURST):
        lines.say([(WARNING if k == 5 else INFO, f"flow {k}")])
        assert records()[-1] == (WARNING if k == 5 else INFO, f"flow {k}")
        clock.now += WINDOW / BURST  # BURST lines a window, no more
    assert len(records()) == 3 * BURST


def test_lines_beyond_the_burst_wait_for_the_windows_end_and_share_one_record_per_level(records):
    clock = Clock()
    levels = [INFO] * (BURST + 3) + [WARNING, WARNING, INFO, INFO]

    async def main() -> list:
        lines = LogLines(logging.getLogger("lines"), clock=clock)
        for k, level in enumerate(levels):
            lines.say([(level, f"flow {k}")])
            clock.now += 0.001
        assert len(records()) == BURST  # the first ones, at once
        assert lines._timer is not None
        # Scheduled as the first line waited, for the window's end: the window began BURST lines before.
        waits = lines._timer.when() - asyncio.get_running_loop().time()
        assert WINDOW - 0.001 * BURST - 0.05 < waits <= WINDOW - 0.001 * BURST
        await asyncio.sleep(WINDOW + 0.05)
        assert lines._timer is None
        return records()

    written = asyncio.run(main())
    assert written[:BURST] == [(INFO, f"flow {k}") for k in range(BURST)]
    assert written[BURST:] == [
        (INFO, "\n".join(f"flow {k}" for k in [*range(BURST, BURST + 3), BURST + 5, BURST + 6])),
        (WARNING, f"flow {BURST + 3}\nflow {BURST + 4}"),
    ]


def test_a_line_said_while_others_wait_waits_behind_them_even_in_a_new_window(records):
    clock = Clock()

    async def main() -> None:
        lines = LogLines(logging.getLogger("lines"), clock=clock)
        for k in range(BURST + 1):
            lines.say([(INFO, f"flow {k}")])
        clock.now += 2 * WINDOW  # the loop was late: a new window, but a line still waits
        lines.say([(INFO, "late")])
        assert lines_of(records()) == [f"flow {k}" for k in range(BURST)]
        await asyncio.sleep(WINDOW + 0.05)

    asyncio.run(main())
    assert lines_of(records()) == [*(f"flow {k}" for k in range(BURST + 1)), "late"]


def test_a_batch_said_together_is_one_record_per_level_and_counts_as_that_many(records):
    clock = Clock()
    lines = LogLines(logging.getLogger("lines"), clock=clock)
    lines.say([(INFO, "r0"), (WARNING, "r1"), (INFO, "r2"), (WARNING, "r3"), (INFO, "r4")])
    assert records() == [(INFO, "r0\nr2\nr4"), (WARNING, "r1\nr3")]
    assert lines._written == 2


def test_under_load_flows_alternating_warnings_and_clean_ones_cost_two_records_a_window(records):
    # Half the flows with a warning, every other one (the bench's mix): each level's lines share a record.
    clock = Clock()

    async def main() -> None:
        lines = LogLines(logging.getLogger("lines"), clock=clock)
        for k in range(60):
            lines.say([(WARNING if k % 2 else INFO, f"flow {k}")])
            clock.now += WINDOW / 30  # 300 flows a second: two windows
            await asyncio.sleep(0)
        lines.flush()

    asyncio.run(main())
    assert len(records()) <= 2 * (BURST + 2)
    assert sorted(lines_of(records()), key=lambda line: int(line.split()[1])) == [
        f"flow {k}" for k in range(60)
    ]
    for level in (INFO, WARNING):
        mine = [line for lvl, message in records() if lvl == level for line in message.split("\n")]
        assert mine == [f"flow {k}" for k in range(60) if (k % 2) == (level == WARNING)]  # in order


def test_flush_writes_what_waits_at_once_and_begins_a_window(records):
    clock = Clock()

    async def main() -> None:
        lines = LogLines(logging.getLogger("lines"), clock=clock)
        for k in range(BURST + 2):
            lines.say([(INFO, f"flow {k}")])
        lines.flush()
        assert lines._timer is None
        assert lines_of(records()) == [f"flow {k}" for k in range(BURST + 2)]
        assert records()[-1] == (INFO, f"flow {BURST}\nflow {BURST + 1}")
        lines.flush()  # nothing waits: nothing written
        assert len(records()) == BURST + 1

    asyncio.run(main())


def test_without_an_event_loop_lines_beyond_the_burst_are_written_at_once(records):
    clock = Clock()
    lines = LogLines(logging.getLogger("lines"), clock=clock)
    for k in range(BURST + 3):
        lines.say([(INFO, f"flow {k}")])
        assert lines_of(records())[-1] == f"flow {k}"
    assert lines._timer is None


def test_once_closed_what_waits_is_written_and_every_line_after_at_once(records):
    # The proxy stops: lines of flows annotated after its done hook (failed as the worker stopped) must not
    # wait for a window's end the stopping loop may never reach.
    clock = Clock()

    async def main() -> None:
        lines = LogLines(logging.getLogger("lines"), clock=clock)
        for k in range(BURST + 2):
            lines.say([(INFO, f"flow {k}")])
        lines.close()
        assert lines_of(records()) == [f"flow {k}" for k in range(BURST + 2)]
        for k in range(BURST + 2, 3 * BURST):
            lines.say([(WARNING, f"flow {k}")])
            assert records()[-1] == (WARNING, f"flow {k}") and lines._timer is None

    asyncio.run(main())


def _request(
    host_header: str | None, *, scheme="https", path="/v1/messages", version="HTTP/1.1", method="POST"
):
    request = tflow.treq(scheme=scheme, path=path, http_version=version, method=method)
    request.headers.pop("host", None)
    if host_header is not None:
        if version == "HTTP/2.0":
            request.authority = host_header
        else:
            request.headers["host"] = host_header
    return request


@pytest.mark.parametrize(
    "request_",
    [
        _request("api.anthropic.com"),
        _request("api.anthropic.com:443"),
        _request("api.anthropic.com:8443"),
        _request("127.0.0.1:8080", scheme="http"),
        _request("example.com:80", scheme="http"),
        _request("Example.COM", scheme="http"),
        _request("[::1]:8443"),
        _request("[::1]"),
        _request("b\u00fccher.example"),
        _request("not a host!"),
        _request("api.openai.com", path="/v1/chat/completions?key=abc&x=1"),
        _request("api.openai.com", path="*", method="OPTIONS"),
        _request(None),
        _request("generativelanguage.googleapis.com", version="HTTP/2.0"),
        _request("api.openai.com:443", method="CONNECT", path=""),
    ],
    ids=lambda r: f"{r.method} {r.http_version} {r.host_header!r} {r.path!r}",
)
def test_the_url_a_line_names_is_mitmproxys_pretty_url(request_):
    known: dict = {}
    assert pretty_url(request_, known) == request_.pretty_url
    assert pretty_url(request_, known) == request_.pretty_url  # from what it kept


def test_the_hosts_a_proxy_keeps_urls_for_are_bounded():
    known: dict = {}
    for n in range(URL_HOSTS + 5):
        pretty_url(_request(f"host{n}.example"), known)
    assert len(known) == URL_HOSTS
    assert ("https", "host0.example") not in known and (
        "https",
        f"host{URL_HOSTS + 4}.example",
    ) in known
