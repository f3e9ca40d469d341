"""A ~50 MB Chat Completions stream fed in 64 KiB, 7-byte and 1-byte chunks: the same result every time,
with the bytes the line buffer copies, counted from outside it (not a timer, and not a counter of the code
under test), showing the work stays linear however the bytes are cut, and tracemalloc showing the memory
follows the argument bytes, not the feed calls.

The stream: four parallel calls, interleaved round-robin, each one long JSON object built from
fragments of a few to ~450 characters (JSON escapes, non-ASCII UTF-8); halfway through, one event carries a
~2 MB fragment: the line a naive decoder re-joins on every byte (quadratic), here arriving one byte at a
time in the 1-byte case.

Every chunking feeds the whole stream (7-byte pieces: ~7 million ``feed`` calls; the 1-byte case feeds
the big event's region byte by byte and the rest in 7-byte pieces), and its result must equal the whole
body's fed at once. Memory is
measured with tracemalloc, which slows small feeds several times over: with 64 KiB chunks over the
whole stream, bounded by the argument bytes; with 7-byte and 1-byte chunks over a contiguous ~2.4 MB
region around the big event only, bounded by what the same region costs in 64 KiB chunks plus its
argument bytes (a cost per feed call would show there). No wall-clock assertions.

Copies are counted by ``CopyMeter``: while it runs, the line buffer's module sees counting versions of
``bytes`` and ``bytearray``, so every pending line it grows or hands out is counted, and the count is
checked against the bytes fed as it grows: a copy of the pending line per feed call (quadratic) fails
within a few thousand feeds instead of running for hours. pytest-timeout (pyproject) backs it up for a
slowdown the meter cannot see.
"""

from __future__ import annotations

import builtins
import json
import tracemalloc
from typing import Self

import pytest
from streams import call, choice, chunk, sse, tool_chunk

from accumulator import StreamAccumulator, analyze
from accumulator.framing import lines

TARGET_BYTES = 50 * 1000 * 1000
BIG_FRAGMENT_CHARS = 2 * 1000 * 1000  # under the default 8 MiB event cap
REGION_EVENTS = 64  # events either side of the big one in the region measured with small chunks
NAMES = ("write_file", "search_docs", "run_query", "summarize")
# Latin-1 only: a str holding any wider character takes 2-4 bytes a character, which would measure
# CPython's string layout rather than the accumulator.
WORDS = [
    "Lorem",
    "ipsum",
    '"dolor"',
    "sit,",
    "«über»",
    "café\nnaïve\ttab",
    "back\\slash",
    "amet",
    "adipiscing",
]
COPY_FACTOR = 3  # bytes the line buffer copies per byte fed, at most ...
COPY_SLACK = 64 * 1024  # ... plus this
MEMORY_FACTOR = 4  # traced peak per argument byte, at most ...
MEMORY_SLACK = 2 * 1024 * 1024  # ... plus this
# This stream's calls carry ~12 MB of arguments each, over the default per-call cap (tests/core/test_caps.py
# covers the caps): here they are lifted so that every byte is rebuilt.
UNCAPPED = {"max_argument_chars": TARGET_BYTES}


def encode(obj: dict) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode()


class Stream:
    """The body, the calls it carries, and where the big event's region lies."""

    def __init__(self) -> None:
        events: list[bytes] = [encode(chunk(choice(role="assistant", content=None)))]
        fragments: list[list[str]] = [[] for _ in NAMES]
        per_event: list[int] = [0]  # argument bytes each event carries
        for k, name in enumerate(NAMES):
            first = f'{{"path": "out/{name}.txt", "content": "'
            events.append(encode(tool_chunk(call(k, f"call_{k}", name, first, type="function"))))
            fragments[k].append(first)
            per_event.append(len(first.encode()))
        size = sum(len(e) + 8 for e in events)
        big = None
        i = 0
        while size < TARGET_BYTES:
            k = i % len(NAMES)
            if big is None and size > TARGET_BYTES // 2:
                text = ("x" * 96 + 'é\n"\\') * (BIG_FRAGMENT_CHARS // 100)
                big = len(events)
            else:
                text = " ".join(WORDS[(i + j) % len(WORDS)] for j in range(1 + i * 7 % 61))
            fragment = json.dumps(text, ensure_ascii=False)[1:-1]  # a piece of a JSON string's text
            events.append(encode(tool_chunk(call(k, arguments=fragment))))
            fragments[k].append(fragment)
            per_event.append(len(fragment.encode()))
            size += len(events[-1]) + 8
            i += 1
        for k in range(len(NAMES)):
            events.append(encode(tool_chunk(call(k, arguments='"}'))))
            fragments[k].append('"}')
            per_event.append(2)
        events.append(encode(chunk(choice(finish_reason="tool_calls"))))
        per_event.append(0)
        framed = [sse(e, done=False) for e in events]
        framed.append(sse())  # data: [DONE]
        self.body = b"".join(framed)
        self.arguments = ["".join(f) for f in fragments]
        self.argument_bytes = sum(per_event)
        self.big_event_bytes = len(framed[big])
        lo, hi = big - REGION_EVENTS, big + REGION_EVENTS + 1
        self.region = (sum(map(len, framed[:lo])), sum(map(len, framed[:hi])))
        self.region_argument_bytes = sum(per_event[lo:hi])


@pytest.fixture(scope="module")
def stream() -> Stream:
    return Stream()


@pytest.fixture(scope="module")
def reference(stream) -> dict:
    """The result of the whole body fed at once."""
    return analyze(stream.body, "openai-chat", **UNCAPPED)


class CopyMeter:
    """Bytes handed to the accumulator (``fed``) and bytes the line buffer copies (``copied``): what it
    appends to a pending line, and every ``bytes``/``bytearray`` it makes of one. A context manager that
    swaps counting versions into ``accumulator.framing.lines`` while it is open."""

    def __init__(self) -> None:
        self.fed = 0
        self.copied = 0

    def count(self, n: int) -> None:
        self.copied += n
        if self.copied > COPY_FACTOR * self.fed + COPY_SLACK:
            raise AssertionError(f"copied {self.copied} bytes after {self.fed} fed: not linear")

    def feed(self, accumulator: StreamAccumulator, body: bytes, start: int, stop: int, size: int) -> None:
        put = accumulator.feed
        for i in range(start, stop, size):
            piece = body[i : min(i + size, stop)]
            self.fed += len(piece)
            put(piece)

    def __enter__(self) -> Self:
        count = self.count

        class CountingBytearray(bytearray):
            def __init__(self, *args) -> None:
                super().__init__(*args)
                count(len(self))

            def __iadd__(self, other):
                count(len(other))
                return super().__iadd__(other)

            def __add__(self, other):
                return CountingBytearray(bytes(self) + bytes(other))

        def counting_bytes(*args):
            made = builtins.bytes(*args)
            count(len(made))
            return made

        self._saved = lines.__dict__.get("bytes"), lines.__dict__.get("bytearray")
        lines.bytes, lines.bytearray = counting_bytes, CountingBytearray
        return self

    def __exit__(self, *exc) -> None:
        for name, saved in zip(("bytes", "bytearray"), self._saved, strict=True):
            if saved is None:
                delattr(lines, name)
            else:
                setattr(lines, name, saved)


def feed(accumulator: StreamAccumulator, body: bytes, start: int, stop: int, size: int) -> None:
    put = accumulator.feed
    for i in range(start, stop, size):
        put(body[i : min(i + size, stop)])


def traced_peak(
    accumulator: StreamAccumulator,
    body: bytes,
    start: int,
    stop: int,
    size: int,
    meter: CopyMeter | None = None,
) -> int:
    """Feed body[start:stop] in ``size``-byte pieces (through ``meter`` if given); the peak of the memory
    allocated meanwhile."""
    tracemalloc.start()
    try:
        if meter is None:
            feed(accumulator, body, start, stop, size)
        else:
            meter.feed(accumulator, body, start, stop, size)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.fixture(scope="module")
def coarse_region_peak(stream) -> int:
    """The traced peak while the big event's region goes in as 64 KiB chunks: the baseline of the fine
    chunkings (it is mostly parsing the big event: orjson needs ~13x a document's size while it parses)."""
    accumulator = StreamAccumulator("openai-chat", **UNCAPPED)
    start, stop = stream.region
    feed(accumulator, stream.body, 0, start, 65536)
    return traced_peak(accumulator, stream.body, start, stop, 65536)


def test_the_stream_is_what_it_should_be(stream, reference):
    assert len(stream.body) >= TARGET_BYTES
    assert stream.big_event_bytes > 2_000_000
    assert stream.region[1] - stream.region[0] > stream.big_event_bytes
    calls = reference["choices"][0]["tool_calls"]
    assert [(c["id"], c["name"]) for c in calls] == [(f"call_{k}", name) for k, name in enumerate(NAMES)]
    assert [c["arguments"] for c in calls] == stream.arguments
    for k, c in enumerate(calls):
        value = json.loads(c["arguments"])
        assert value["path"] == f"out/{NAMES[k]}.txt" and len(value["content"]) > 5_000_000
    # Interleaved fragments after the first that name only an index: "the latest call" would misroute.
    assert [w["code"] for w in reference["warnings"]] == ["recency-misroute"]
    assert reference["complete"] is True


def test_64kib_chunks_same_result_linear_work_memory_follows_the_arguments(stream, reference):
    body = stream.body
    accumulator = StreamAccumulator("openai-chat", **UNCAPPED)
    with CopyMeter() as meter:
        peak = traced_peak(accumulator, body, 0, len(body), 65536, meter)
    result = accumulator.finish()
    assert result == reference
    assert meter.fed == len(body)
    assert meter.copied <= COPY_FACTOR * len(body), (meter.copied, len(body))
    limit = MEMORY_FACTOR * stream.argument_bytes + MEMORY_SLACK
    assert peak <= limit, (
        f"traced peak {peak / 1e6:.1f} MB while feeding {stream.argument_bytes / 1e6:.1f} MB of arguments "
        f"({peak / stream.argument_bytes:.1f} bytes per argument byte; limit {limit / 1e6:.1f} MB)"
    )


@pytest.mark.parametrize("size", [7, 1], ids=["7B", "1B"])
def test_small_chunks_same_result_linear_work_memory_not_per_feed_call(
    stream, reference, coarse_region_peak, size
):
    """The whole stream in small pieces; the region around the big event (a ~2 MB line arriving ``size``
    bytes at a time) is traced, and must cost no more memory than the same bytes in 64 KiB
    chunks, give or take its argument bytes."""
    body = stream.body
    start, stop = stream.region
    # Outside the region, 1-byte pieces would only repeat what the 7-byte case shows at 50 million feed
    # calls (a minute and a half); there they go in 7-byte pieces, the region byte by byte.
    outside = 7
    accumulator = StreamAccumulator("openai-chat", **UNCAPPED)
    feed(accumulator, body, 0, start, outside)
    with CopyMeter() as meter:
        peak = traced_peak(accumulator, body, start, stop, size, meter)
    feed(accumulator, body, stop, len(body), outside)
    result = accumulator.finish()

    assert result == reference
    assert [c["arguments"] for c in result["choices"][0]["tool_calls"]] == stream.arguments

    # Linear work: each byte is copied a bounded number of times however the input is cut, the
    # multi-megabyte line that came in `size`-byte pieces included (the meter also checks as it goes).
    assert meter.fed == stop - start
    assert meter.copied <= COPY_FACTOR * (stop - start), (meter.copied, stop - start)

    # Memory: what the arguments need, not a cost per feed call.
    limit = coarse_region_peak + stream.region_argument_bytes + MEMORY_SLACK
    assert peak <= limit, (
        f"{size}-byte chunks: traced peak {peak / 1e6:.1f} MB while feeding the {(stop - start) / 1e6:.1f} MB "
        f"around the big event ({stream.region_argument_bytes / 1e6:.1f} MB of arguments, "
        f"{-(-(stop - start) // size)} feed calls); the same bytes in 64 KiB chunks: {coarse_region_peak / 1e6:.1f} MB; "
        f"limit {limit / 1e6:.1f} MB"
    )
