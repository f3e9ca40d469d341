"""The addon's line a flow in mitmproxy's log: a record each at a human pace, shared records under load."""

from __future__ import annotations

import asyncio
import logging

import pytest

from toolcall_lens.loglines import BURST, WINDOW, LogLines

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
