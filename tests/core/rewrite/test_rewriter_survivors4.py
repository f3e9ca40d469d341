"""The stream rewriter: what a mutation run found untested (the logic survivors of
``accumulator/rewrite/rewriter.py`` that came after a rewriter that raises was made to stop and say so;
see docs/mutation.md). Each test was checked by applying the mutation it guards against to the source by
hand and seeing it fail."""

from __future__ import annotations

import gzip
import zlib

import fake_provider
import pytest
from faults import Failing
from rewriting import rewrite
from streams import DATA, call, choice, chunk, sse, tool_chunk

from accumulator import analyze
from accumulator.boundaries import cut, hostile_cuts
from accumulator.rewrite import StreamRewriter, reorder


def calls(body: bytes, fmt: str = "openai-chat") -> list[tuple]:
    return [
        (c["id"], c["name"], c["arguments"]) for ch in analyze(body, fmt)["choices"] for c in ch["tool_calls"]
    ]


CHAT = fake_provider.body("openai-chat", "interleaved")
CHAT_EVENTS = fake_provider.events("openai-chat", "interleaved")
# Two calls' fragments and no finish: a reorderer holds them to the end of the stream.
HELD = sse(
    tool_chunk(call(0, "call_a", "alpha", '{"a": ')),
    tool_chunk(call(1, "call_b", "beta", '{"b": ')),
    tool_chunk(call(0, arguments="1}")),
    tool_chunk(call(1, arguments="2}")),
    done=False,
)


# --- _decoded: the tool-call cap (mutant _decoded_14) ---------------------------------------------------------


def test_a_stream_with_exactly_the_capped_number_of_calls_is_rewritten_to_its_end():
    count = len(calls(CHAT))
    _, report = rewrite("openai-chat", CHAT, ["serialize"], max_calls=count)
    assert report["stopped"] is None
    _, report = rewrite("openai-chat", CHAT, ["serialize"], max_calls=count - 1, may_stop=True)
    assert report["stopped"]["reason"] == f"more than {count - 1} tool calls: the rest passes as it is"


# --- _feed: decoded bytes are rewritten and re-encoded a MiB at a time (mutants _feed_13, _14) ---------------


def test_a_body_that_decodes_to_several_mib_leaves_in_a_piece_per_mib():
    text = [chunk(choice(0, content="x" * 60_000)) for _ in range(45)]  # about 2.6 MiB decoded
    body = sse(*text, tool_chunk(call(0, "call_1", "lookup", '{"q": 1}')), chunk(choice(0, "tool_calls")))
    out, report = rewrite("openai-chat", gzip.compress(body), ["serialize"], encoding="gzip")
    assert report["stopped"] is None and report["decoding_error"] is None
    decoder = zlib.decompressobj(wbits=31)
    decoded = [decoder.decompress(piece) for piece in out]
    assert b"".join(decoded) == body
    # Two full MiB batches, the rest at the end, then the gzip trailer: never the whole body at once.
    assert report["writes"] == len(out) == 4
    assert max(map(len, decoded)) < 1024 * 1024 + 65_536


def test_a_fault_of_the_rewriters_own_in_a_decoded_mib_passes_every_decoded_byte_and_is_no_decoding_error(
    monkeypatch,
):
    # Found in this review: a raise while rewriting a MiB batch was taken for the body failing to decode; the
    # compressed input then went out raw after what it had decoded to, so the client got that part twice.
    text = [chunk(choice(0, content="x" * 60_000)) for _ in range(45)]  # about 2.6 MiB decoded
    body = sse(tool_chunk(call(0, "call_1", "lookup", '{"q": 1}')), *text, chunk(choice(0, "tool_calls")))

    def failing(self, unit, role, key):
        raise RuntimeError("boom")

    monkeypatch.setattr(reorder.Interleaver, "_add", failing)
    out, report = rewrite("openai-chat", gzip.compress(body), ["interleave"], encoding="gzip", may_stop=True)
    assert gzip.decompress(b"".join(out)) == body
    assert report["decoding_error"] is None
    assert report["stopped"]["reason"] == "internal error (RuntimeError: boom): the rest passes as it is"


# --- _finish: a compressed body cut short (mutants _finish_3, _4, _5, _6) ----------------------------------


@pytest.mark.parametrize(("cut_by", "error"), [(0, None), (3, "gzip: the compressed stream is truncated")])
def test_a_gzip_body_cut_short_is_a_decoding_error_at_the_end(cut_by, error):
    encoded = gzip.compress(CHAT, mtime=0)
    encoded = encoded[: len(encoded) - cut_by]
    _, report = rewrite("openai-chat", encoded, ["serialize"], encoding="gzip", reencode=False)
    assert report["decoding_error"] == error


# --- _finish: where calls arrive whole, the last event of a body cut short is counted (_finish_10, _11, _12)


def test_the_unfinished_last_event_of_a_body_passed_unsplit_is_counted():
    body = fake_provider.body("gemini", "interleaved")
    events = len(fake_provider.events("gemini", "interleaved"))
    out, report = rewrite("gemini", body[:-5], ["rechunk"])
    assert b"".join(out) == body[:-5] and report["stopped"] is None
    assert report["events_in"] == report["events_out"] == events


# --- _finish: the unfinished last event leaves last, cut only when rechunking (_finish_25, _27, _28, _29) ---


@pytest.mark.parametrize("names", [["interleave"], ["serialize"], ["interleave", "rechunk"], ["rechunk"]])
def test_an_unfinished_last_event_leaves_last_after_everything_held(names):
    rest = sse(chunk(choice(0, "tool_calls")), done=False)[:-5]
    body = HELD + rest
    out, report = rewrite("openai-chat", body, names)
    assert report["stopped"] is None
    assert len(b"".join(out)) == len(body) and calls(b"".join(out)) == calls(body)
    tail = cut(rest, hostile_cuts(rest)) if "rechunk" in names else [rest]
    assert len(tail) > 1 or "rechunk" not in names
    assert out[-len(tail) :] == tail


# --- _events: counting events fed in pieces, and the event-size cap (_events_7, _14, _30, _31) ---------------


def test_every_event_fed_in_pieces_is_counted_and_an_event_of_exactly_the_cap_passes():
    biggest = max(map(len, CHAT_EVENTS))
    pieces = [CHAT[i : i + 50] for i in range(0, len(CHAT), 50)]
    _, report = rewrite("openai-chat", CHAT, ["serialize"], pieces=pieces, max_event_bytes=biggest)
    assert report["stopped"] is None
    assert report["events_in"] == report["events_out"] == len(CHAT_EVENTS)


def test_an_event_still_arriving_beyond_the_cap_stops_the_rewriting_and_says_why():
    big = sse(chunk(choice(0, content="x" * 500)), done=False)
    body = sse(tool_chunk(call(0, "call_1", "lookup", "{}")), done=False) + big
    cap = 300
    out, report = rewrite(
        "openai-chat",
        body,
        ["serialize"],
        pieces=[body[:-100], body[-100:]],
        max_event_bytes=cap,
        may_stop=True,
    )
    assert b"".join(out) == body
    assert report["stopped"]["reason"] == f"an event over {cap} bytes: the rest passes as it is"


def test_a_last_event_cut_at_exactly_the_cap_is_no_oversized_event():
    last = sse(chunk(choice(0, content="x" * 500)), done=False)
    body = sse(tool_chunk(call(0, "call_1", "lookup", "{}")), done=False) + last[:-1]
    out, report = rewrite("openai-chat", body, ["serialize"], max_event_bytes=len(last) - 1, may_stop=True)
    assert report["stopped"] is None and b"".join(out) == body


# --- _events: an oversized event after events rewritten in the same feed (_events_16, _18) ------------------


def test_events_rewritten_before_an_oversized_one_in_the_same_feed_leave_rewritten():
    big = sse(chunk(choice(0, content="x" * 500)), done=False)
    body = sse(tool_chunk(call(0, "call_1", "lookup", '{"q": 1}')), done=False) + big
    out, report = rewrite("openai-chat", body, ["split-names"], max_event_bytes=300, may_stop=True)
    assert report["stopped"]["reason"] == f"an event of {len(big)} bytes is over the 300 cap"
    assert report["edits"] == {"split-names": 1}
    sent = b"".join(out)
    assert sent.count(b"data: ") == 3 and calls(sent) == calls(body)  # the name split in two events
    assert report["events_in"] == 2 and report["events_out"] == 3


# --- _unit: an event passed as it is (rechunk only, a comment) is sent once (_unit_3, _16) ------------------


@pytest.mark.parametrize(
    ("names", "body"),
    [
        (["rechunk"], CHAT),
        (
            ["interleave"],
            b": keep-alive\n\n" + CHAT_EVENTS[0] + b": keep-alive\n\n" + b"".join(CHAT_EVENTS[1:]),
        ),
    ],
)
def test_events_passed_before_a_stop_are_not_sent_again(names, body):
    out, report = rewrite(
        "openai-chat", body, names, max_event_bytes=max(map(len, CHAT_EVENTS)) - 1, may_stop=True
    )
    assert report["stopped"] is not None
    assert b"".join(out) == body
    assert report["events_out"] == report["events_in"]


# --- _step: the hold cap is exceeded only beyond it (_step_23) ----------------------------------------------


def test_holding_exactly_the_cap_releases_nothing_early():
    _, report = rewrite("openai-chat", CHAT, ["interleave"])
    held = report["held_bytes_max"]
    assert held > 0
    _, report = rewrite("openai-chat", CHAT, ["interleave"], max_held_bytes=held)
    assert report["released_early"] is False
    _, report = rewrite("openai-chat", CHAT, ["interleave"], max_held_bytes=held - 1)
    assert report["released_early"] is True


# --- _flush: what one reorderer releases at the end goes through the stages after it (_flush_3, _4) ------


def test_calls_held_at_an_end_without_a_finish_pass_through_every_later_stage():
    body = HELD
    out, report = rewrite("openai-chat", body, ["interleave", "serialize"])
    assert report["stopped"] is None
    sent = b"".join(out)
    assert len(sent) == len(body) and calls(sent) == calls(body)


# --- The mutants of the run's last stretch (__init__ _4, _11, _84, _115; _feed_22, _23; feed_1: in rewrite()) ------------


def test_an_unknown_format_or_transformation_is_refused_by_name():
    # __init___4, _11: what a library user who builds a StreamRewriter is told
    with pytest.raises(ValueError, match="^unknown format 'grpc'$"):
        StreamRewriter("grpc", inject=["interleave"])
    with pytest.raises(ValueError, match="^unknown injection 'shuffle'; known: interleave, "):
        StreamRewriter("openai-chat", inject=["shuffle"])


def test_an_aws_frame_over_the_cap_stops_the_rewriting_at_its_prelude_not_once_it_is_whole():
    # __init___84: the splitter is given the rewriter's cap, so a frame's prelude is enough to stop: its
    # bytes pass at once instead of being held until the whole frame has come.
    body = (DATA / "bedrock_converse_parallel.bin").read_bytes()
    sizes = []
    at = 0
    while at < len(body):
        sizes.append(int.from_bytes(body[at : at + 4], "big"))
        at += sizes[-1]
    cap = max(sizes) - 1
    big = sizes.index(max(sizes))
    start = sum(sizes[:big])
    rewriter = StreamRewriter("bedrock-converse", inject=["interleave"], max_event_bytes=cap)
    first = rewriter.feed(body[: start + 12])  # up to the big frame's prelude
    assert rewriter.report()["stopped"]["reason"] == (
        f"an AWS event-stream frame of {max(sizes)} bytes is over the {cap} cap: the rest passes as it is"
    )
    out = first + rewriter.feed(body[start + 12 :]) + rewriter.finish()
    assert b"".join(out) == body


@pytest.mark.parametrize("encoding", ["identity", "Identity", " IDENTITY "])
def test_identity_in_any_case_is_no_encoding(encoding):
    # __init___115
    out, report = rewrite("openai-chat", CHAT, ["serialize"], encoding=encoding)
    assert report["decoded"] is None and b"".join(out) != CHAT


def test_a_content_decoder_that_raises_is_a_decoding_error_naming_it_and_the_input_passes_raw():
    # _feed_22, _23: the decoder is not meant to raise; if it does, that is the body failing to decode
    body = gzip.compress(CHAT)
    rewriter = StreamRewriter("openai-chat", repair=["serialize"], encoding="gzip")
    rewriter._content = Failing(rewriter._content, "decode_pieces", RuntimeError("decoder bug"))
    out = rewriter.feed(body) + rewriter.finish()
    assert b"".join(out) == body
    report = rewriter.report()
    assert report["decoding_error"] == "RuntimeError: decoder bug"
    assert (
        report["stopped"]["reason"]
        == "the body stopped decoding (RuntimeError: decoder bug): the rest passes raw"
    )


class CountingDecoder:
    """Stands for a content decoder and counts the inputs handed to it."""

    def __init__(self, target) -> None:
        self.target = target
        self.inputs = 0

    def decode_pieces(self, data: bytes):
        self.inputs += 1
        return self.target.decode_pieces(data)

    def __getattr__(self, name):
        return getattr(self.target, name)


def test_after_the_body_stops_decoding_the_rest_passes_raw_without_going_through_the_decoder_again():
    # _feed_29: the rest of a body that failed to decode is passed as it came, never decoded again
    body = bytearray(gzip.compress(CHAT))
    body[12] ^= 0xFF  # the first deflate block: corrupt at once
    pieces = [bytes(body[:20]), bytes(body[20:40]), bytes(body[40:])]
    rewriter = StreamRewriter("openai-chat", repair=["serialize"], encoding="gzip")
    counting = rewriter._content = CountingDecoder(rewriter._content)
    out = [piece for data in pieces for piece in rewriter.feed(data)] + rewriter.finish()
    assert b"".join(out) == bytes(body)
    assert rewriter.report()["decoding_error"]
    assert counting.inputs == 1
