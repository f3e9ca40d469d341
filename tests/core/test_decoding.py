"""Content-Encoding: round trips however the bytes are cut, corrupt input, and bombs held to the cap."""

from __future__ import annotations

import functools
import random
import sys
import tracemalloc
import zlib

import brotli
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accumulator.decoding import ContentDecoder, ContentEncoder, TooLarge, decode_body, supported
from accumulator.request import request_body

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd

BIG = 1 << 40  # a cap never reached


def gzip(data: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


def raw_deflate(data: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


ENCODERS = {
    "identity": lambda data: data,
    "gzip": gzip,
    "x-gzip": gzip,
    "deflate": zlib.compress,
    "br": brotli.compress,
    "zstd": zstd.compress,
    "gzip, br": lambda data: brotli.compress(gzip(data)),  # gzip applied first, so decoded last
    "br, zstd": lambda data: zstd.compress(brotli.compress(data)),
    "deflate, identity, gzip": lambda data: gzip(zlib.compress(data)),
}
SAMPLE = random.Random(3).randbytes(5000) + b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n' * 4000


def run(encoding: str, pieces: list[bytes], cap: int = BIG) -> tuple[bytes, ContentDecoder]:
    decoder = ContentDecoder(encoding, cap)
    out = b"".join(decoder.decode(p) for p in pieces) + decoder.flush()
    return out, decoder


def cut(body: bytes, points: list[int]) -> list[bytes]:
    points = sorted({p % (len(body) + 1) for p in points})
    return [body[a:b] for a, b in zip([0, *points], [*points, len(body)])]


@pytest.mark.parametrize("encoding", list(ENCODERS))
def test_round_trip_whole_and_in_chunks(encoding):
    body = ENCODERS[encoding](SAMPLE)
    for step in (len(body), 4096, 7):
        out, decoder = run(encoding, [body[i : i + step] for i in range(0, len(body), step)])
        assert out == SAMPLE and decoder.error is None and not decoder.exceeded, step


@pytest.mark.parametrize("encoding", list(ENCODERS))
def test_round_trip_byte_by_byte(encoding):
    data = SAMPLE[:3000] + SAMPLE[-3000:]
    body = ENCODERS[encoding](data)
    out, decoder = run(encoding, [body[i : i + 1] for i in range(len(body))])
    assert out == data and decoder.error is None


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(list(ENCODERS)),
    st.binary(max_size=3000),
    st.lists(st.integers(min_value=0, max_value=1 << 16), max_size=20),
)
def test_random_data_and_chunkings_round_trip(encoding, data, points):
    body = ENCODERS[encoding](data)
    out, decoder = run(encoding, cut(body, points))
    assert out == data and decoder.error is None and not decoder.exceeded


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(list(ENCODERS)),
    st.integers(min_value=1, max_value=len(SAMPLE) + 10),
    st.lists(st.integers(min_value=0, max_value=1 << 20), max_size=10),
)
def test_the_output_is_exactly_capped_however_cut(encoding, cap, points):
    body = ENCODERS[encoding](SAMPLE)
    out, decoder = run(encoding, cut(body, points), cap)
    assert out == SAMPLE[:cap]
    assert decoder.exceeded is (len(SAMPLE) > cap) and decoder.error is None


def test_after_the_cap_nothing_more_is_returned():
    decoder = ContentDecoder("gzip", 100)
    body = gzip(SAMPLE)
    assert decoder.decode(body[:5000]) == SAMPLE[:100] and decoder.exceeded
    assert decoder.decode(body[5000:]) == b"" and decoder.flush() == b"" and decoder.error is None


def test_encoding_names_are_case_and_space_insensitive():
    assert run(" GZip ,  BR ", [brotli.compress(gzip(b"abc"))])[0] == b"abc"
    assert run("", [b"plain"])[0] == b"plain"


def test_raw_deflate_is_accepted_for_deflate():
    body = raw_deflate(SAMPLE)
    for step in (len(body), 1):
        out, decoder = run("deflate", [body[i : i + step] for i in range(0, len(body), step)])
        assert out == SAMPLE and decoder.error is None


def test_several_gzip_members_and_zstd_frames_are_read_in_turn():
    assert run("gzip", [gzip(b"one ") + gzip(b"two")])[0] == b"one two"
    assert run("zstd", [zstd.compress(b"one ") + zstd.compress(b"two")])[0] == b"one two"
    body = gzip(b"one ") + gzip(b"two")
    assert run("gzip", [body[i : i + 1] for i in range(len(body))])[0] == b"one two"


def test_bytes_after_the_end_of_gzip_or_deflate_are_ignored():
    for encoding, body in (
        ("gzip", gzip(b"abc") + b"\0\0\0\0"),
        ("deflate", zlib.compress(b"abc") + b"junk"),
    ):
        out, decoder = run(encoding, [body])
        assert out == b"abc" and decoder.error is None, encoding


@pytest.mark.parametrize(
    "encoding,body",
    [
        ("gzip", b"\x1f\x8b\x08\x00" + b"not really gzip" * 10),
        ("gzip", b"<html>not gzip</html>"),
        ("deflate", b"\x78\x9c" + b"\xff" * 50),
        ("br", b"definitely not brotli" * 5),
        ("zstd", b"\x28\xb5\x2f\xfd" + b"\xff" * 50),
        ("zstd", b"not zstd at all"),
        ("gzip, br", brotli.compress(b"this is not gzip inside")),
    ],
)
def test_corrupt_input_sets_error_once_and_never_raises(encoding, body):
    decoder = ContentDecoder(encoding, BIG)
    out = decoder.decode(body)
    assert decoder.error is not None and not decoder.exceeded
    first = decoder.error
    assert decoder.decode(gzip(b"more")) == b"" and decoder.flush() == b"" and decoder.error == first
    assert out == b""


def test_output_before_the_corruption_is_still_returned():
    body = gzip(SAMPLE)
    broken = body[:2000] + bytes(b ^ 0x55 for b in body[2000:2100]) + body[2100:]
    out, decoder = run("gzip", [broken])
    assert decoder.error is not None and out and SAMPLE.startswith(out[:1000])


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br", "zstd", "gzip, br"])
def test_a_truncated_stream_is_an_error_at_flush(encoding):
    body = ENCODERS[encoding](SAMPLE)
    decoder = ContentDecoder(encoding, BIG)
    out = decoder.decode(body[: len(body) // 2])
    assert decoder.error is None and SAMPLE.startswith(out)
    decoder.flush()
    assert "truncated" in decoder.error


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br", "zstd", "gzip, br", "identity"])
def test_an_empty_body_is_not_an_error(encoding):
    out, decoder = run(encoding, [b""])
    assert out == b"" and decoder.error is None and not decoder.exceeded


def test_supported_encodings():
    for encoding in ("identity", "", "gzip", "x-gzip", "deflate", "br", "zstd", "gzip, br", "Br, identity"):
        assert supported(encoding), encoding
    for encoding in ("compress", "xz", "gzip, compress", "gzip, gzip, gzip, gzip, gzip"):
        assert not supported(encoding), encoding


def test_an_unsupported_encoding_is_an_error_not_an_exception():
    decoder = ContentDecoder("gzip, compress", BIG)
    assert decoder.error and "compress" in decoder.error
    assert decoder.decode(b"anything") == b"" and decoder.flush() == b""


def test_identity_is_passed_through_and_capped():
    decoder = ContentDecoder("identity", 10)
    assert decoder.decode(b"12345") == b"12345" and not decoder.exceeded
    assert decoder.decode(b"6789abcdef") == b"6789a" and decoder.exceeded
    assert decoder.decode(b"more") == b""
    decoder = ContentDecoder("identity", 10)  # the cap exactly: not past it
    assert decoder.decode(b"1234567890") == b"1234567890" and not decoder.exceeded
    assert decoder.decode(b"x") == b"" and decoder.exceeded


N = 200 << 20  # the bombs inflate to 200 MB of zeros


def _streamed(compress, finish) -> bytes:
    block = bytes(1 << 20)
    return b"".join([compress(block) for _ in range(N >> 20)] + [finish()])


@functools.cache
def bomb(encoding: str) -> bytes:
    if encoding in ("gzip", "deflate"):
        c = zlib.compressobj(9, zlib.DEFLATED, 31 if encoding == "gzip" else 15)
        return _streamed(c.compress, c.flush)
    if encoding == "br":
        c = brotli.Compressor(quality=1)
        return _streamed(c.process, c.finish)
    if encoding == "zstd":
        c = zstd.ZstdCompressor(level=1)
        return _streamed(c.compress, c.flush)
    if encoding == "gzip, br":
        # The middle stream is huge too: 200 MB of stored (level 0) gzip blocks, brotli-compressed.
        inner = zlib.compressobj(0, zlib.DEFLATED, 31)
        outer = brotli.Compressor(quality=1)
        return _streamed(
            lambda block: outer.process(inner.compress(block)),
            lambda: outer.process(inner.flush()) + outer.finish(),
        )
    if encoding == "gzip, gzip":
        return gzip(bomb("gzip"))
    raise AssertionError(encoding)


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br", "zstd", "gzip, br", "gzip, gzip"])
def test_a_decompression_bomb_is_held_to_the_cap_in_bounded_memory(encoding):
    body = bomb(encoding)
    assert len(body) < 1 << 20  # a small body ...
    cap = 1 << 20
    tracemalloc.start()
    try:
        decoder = ContentDecoder(encoding, cap)
        total = 0
        for i in range(0, len(body), 16384):
            total += len(decoder.decode(body[i : i + 16384]))
        total += len(decoder.flush())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # ... that would inflate to 200 MB gives exactly the cap, in memory of about the cap.
    assert total == cap and decoder.exceeded and decoder.error is None
    assert peak < 4 * cap, peak


def test_a_bomb_fed_whole_stays_bounded_too():
    body = bomb("br")
    cap = 1 << 20
    tracemalloc.start()
    try:
        decoder = ContentDecoder("br", cap)
        out = decoder.decode(body)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(out) == cap and out == bytes(cap) and decoder.exceeded
    assert peak < 4 * cap, peak


def test_a_zstd_window_over_8_mib_is_refused_rather_than_allocated():
    # RFC 9659 caps the window of the zstd content coding at 8 MiB; a larger one could cost 128 MiB.
    for window_log, accepted in ((23, True), (24, False)):
        c = zstd.ZstdCompressor(options={zstd.CompressionParameter.window_log: window_log})
        out, decoder = run("zstd", [c.compress(b"abc" * 1000) + c.flush()])
        assert (decoder.error is None) is accepted and (out == b"abc" * 1000) is accepted


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["gzip", "deflate", "br", "zstd", "gzip, br"]),
    st.integers(min_value=0, max_value=1 << 16),
    st.binary(max_size=8),
    st.booleans(),
    st.lists(st.integers(min_value=0, max_value=1 << 16), max_size=10),
)
def test_damaged_input_never_raises_and_is_judged_the_same_however_cut(encoding, at, junk, append, points):
    body = ENCODERS[encoding](SAMPLE[:2000])
    if append:
        body += junk
    else:
        at %= len(body)
        body = body[:at] + junk + body[at + len(junk) :]
    whole, whole_decoder = run(encoding, [body])
    out, decoder = run(encoding, cut(body, points))
    assert (decoder.error is None) is (whole_decoder.error is None)
    if decoder.error is None:
        assert out == whole


# -- what a mutation run found untested ----------------------------------------------------------------------


# 120,000 bytes of 6 bits each: one zstd block, compressed to more than a 64 KiB slice of input.
MIXED = bytes(b & 0x3F for b in random.Random(5).randbytes(120_000))
# 4 MiB of zeros, then MIXED: a few bytes that decode to far more than a pull's 64 KiB (zlib, brotli still
# hold output when the pull is full), with more input after them in the same chunk.
ZEROS_THEN_MIXED = bytes(4 << 20) + MIXED


def reference(encoding: str):
    """What the bytes fed so far decode to, all of it at once (an uncapped decompressor of the library)."""
    if encoding in ("gzip", "deflate"):
        return zlib.decompressobj(31 if encoding == "gzip" else 15).decompress
    if encoding == "zstd":
        return zstd.ZstdDecompressor().decompress
    d = brotli.Decompressor()

    def process(chunk: bytes) -> bytes:
        out = d.process(chunk)
        while not d.can_accept_more_data():
            out += d.process(b"")
        return out

    return process


@pytest.mark.parametrize(
    "encoding,data,step",
    [
        pytest.param(encoding, data, step, id=f"{encoding}-{name}-{step}")
        for encoding in ("gzip", "deflate", "br", "zstd")
        for name, data in (("zeros-then-mixed", ZEROS_THEN_MIXED), ("mixed", MIXED))
        for step in (64, 1000, 1 << 30)
    ],
)
def test_each_chunk_gives_at_once_all_that_the_bytes_so_far_decode_to(encoding, data, step):
    # Nothing decodable is held back for the next chunk or for flush: the analysis sees each event as soon as
    # its bytes arrive (a pull that fills its 64 KiB while zlib still holds output, a zstd slice of input that
    # decodes to nothing yet, brotli's output pending after a bounded call).
    sent = ENCODERS[encoding](data)
    decoder, expect = ContentDecoder(encoding, BIG), reference(encoding)
    for i in range(0, len(sent), step):
        chunk = sent[i : i + step]
        assert decoder.decode(chunk) == expect(chunk), i
    assert decoder.flush() == b"" and decoder.error is None and not decoder.exceeded


def test_zstd_of_incompressible_data_in_large_chunks_decodes_whole_by_its_end():
    # Input a pull left behind is kept, before the next chunk's, and nothing is lost.
    data = random.Random(5).randbytes(300_000)
    sent = zstd.compress(data)
    out, decoder = run("zstd", [sent[:200_000], sent[200_000:]])
    assert out == data and decoder.error is None


def test_zstd_of_incompressible_data_fed_whole_decodes_whole():
    # Raw blocks of 128 KiB: a pull's 64 KiB, twice, exactly; the next pull gives nothing and wants input,
    # which the chunk still has (this lost the rest of the body, reported "truncated", before the fix).
    data = random.Random(5).randbytes(300_000)
    out, decoder = run("zstd", [zstd.compress(data)])
    assert out == data and decoder.error is None


@pytest.mark.parametrize(
    "encoding,body,after",
    [
        ("gzip", gzip(b"abc") + b"\0", gzip(b"def")),  # not a member: all that follows is dropped
        ("deflate", zlib.compress(b"abc"), zlib.compress(b"def")),  # deflate is one stream
        ("deflate", raw_deflate(b"abc"), raw_deflate(b"def")),
    ],
)
def test_bytes_after_the_end_are_dropped_however_they_arrive(encoding, body, after):
    for pieces in ([body + after], [body, after], [body, after[:1], after[1:]]):
        out, decoder = run(encoding, pieces)
        assert out == b"abc" and decoder.error is None, pieces


@pytest.mark.parametrize(
    "encoding,body", [("gzip", gzip(b"abc") + b"\0"), ("deflate", zlib.compress(b"abc"))]
)
def test_bytes_dropped_after_the_end_are_not_kept_in_memory(encoding, body):
    junk = bytes(1 << 20)
    decoder = ContentDecoder(encoding, BIG)
    tracemalloc.start()
    try:
        out = decoder.decode(body) + b"".join(decoder.decode(junk) for _ in range(16)) + decoder.flush()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out == b"abc" and decoder.error is None
    assert peak < 1 << 20, peak  # 16 MiB dropped, a slice at a time


STORED_WITH_PADDING = (
    bytes([0x08, 5, 0, 0xFA, 0xFF]) + b"hello" + raw_deflate(b"")
)  # padding bits are ignored


@pytest.mark.parametrize(
    "body,data",
    [
        (
            raw_deflate(b"3\x1b\\8v;7\x05\x0bY\xea\xcel\x02g>"),
            b"3\x1b\\8v;7\x05\x0bY\xea\xcel\x02g>",
        ),  # 33 96
        (STORED_WITH_PADDING, b"hello"),  # 08 05: method 8, window 0, but the header check fails
        (raw_deflate(b""), b""),  # two bytes in all
    ],
)
def test_raw_deflate_is_told_from_zlib_by_the_whole_header(body, data):
    # A zlib header is method 8, a window of at most 2**15 and a check of the first two bytes (RFC 1950): a raw
    # stream meeting only some of the three is still raw.
    assert body[:2] != zlib.compress(data)[:2]
    for step in (len(body), 2, 1):
        out, decoder = run("deflate", [body[i : i + step] for i in range(0, len(body), step)])
        assert out == data and decoder.error is None, step


@pytest.mark.parametrize(
    "encoding,body,coding",
    [
        ("deflate", zlib.compress(SAMPLE)[:-100], "deflate"),
        ("gzip", gzip(SAMPLE)[:-100], "gzip"),
        ("deflate, br", brotli.compress(zlib.compress(SAMPLE)[:-100]), "deflate"),
        ("deflate", b"\x78\x9c" + b"\xff" * 50, "deflate"),
    ],
)
def test_a_truncated_or_corrupt_stream_names_its_coding(encoding, body, coding):
    _, decoder = run(encoding, [body])
    assert decoder.error.startswith(f"{coding}: "), decoder.error


def test_a_zstd_window_over_8_mib_is_refused_in_a_later_frame_too():
    c = zstd.ZstdCompressor(options={zstd.CompressionParameter.window_log: 24})
    out, decoder = run("zstd", [zstd.compress(b"first") + c.compress(b"abc" * 1000) + c.flush()])
    assert decoder.error is not None and out == b"first"


def test_a_chain_of_four_codings_is_the_longest_accepted():
    four, five = "gzip, deflate, br, zstd", "gzip, deflate, br, zstd, gzip"
    assert supported(four) and not supported(five)
    body = zstd.compress(brotli.compress(zlib.compress(gzip(SAMPLE))))
    out, decoder = run(four, [body])
    assert out == SAMPLE and decoder.error is None
    decoder = ContentDecoder(five, BIG)  # every coding known, too many of them: an error, not an exception
    assert decoder.error == "too many codings" and decoder.decode(body) == b"" and decoder.flush() == b""


def test_a_cap_of_zero_decodes_nothing_and_inflates_nothing():
    body = gzip(bytes(64 << 20))
    tracemalloc.start()
    try:
        decoder = ContentDecoder("gzip", 0)
        out = decoder.decode(body)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out == b"" and decoder.exceeded and decoder.error is None and decoder.flush() == b""
    assert peak < 1 << 20, peak  # zlib reads a limit of 0 as none: 64 MiB


@pytest.mark.parametrize("encoding", list(ENCODERS))
def test_output_of_the_cap_exactly_has_not_exceeded_it_one_byte_more_has(encoding):
    # As an uncompressed body is held to the cap: a decoded-size-cap warning means bytes went unread.
    out, decoder = run(encoding, [ENCODERS[encoding](SAMPLE)], cap=len(SAMPLE))
    assert out == SAMPLE and not decoder.exceeded and decoder.error is None
    out, decoder = run(encoding, [ENCODERS[encoding](SAMPLE)], cap=len(SAMPLE) - 1)
    assert out == SAMPLE[:-1] and decoder.exceeded and decoder.error is None


@pytest.mark.parametrize("encoding", ["identity", "gzip", "gzip, br"])
@pytest.mark.parametrize("complete", [True, False])
def test_after_flush_nothing_more_is_decoded(encoding, complete):
    body = ENCODERS[encoding](SAMPLE)
    decoder = ContentDecoder(encoding, BIG)
    decoder.decode(body if complete else body[: len(body) // 2])
    assert decoder.flush() == b""
    error = decoder.error
    assert (error is None) is (complete or encoding == "identity")
    assert decoder.decode(body) == b"" and decoder.decode(b"more") == b"" and decoder.flush() == b""
    assert decoder.error == error and not decoder.exceeded


def test_the_decoder_states_its_encoding_and_cap():
    decoder = ContentDecoder("gzip, br", 1234)  # the cap is the limit a decoded-size-cap warning states
    assert (decoder.encoding, decoder.max_output_bytes) == ("gzip, br", 1234)
    assert decoder.exceeded is False and decoder.error is None


@pytest.mark.parametrize("encoding", [e for e in ENCODERS if e != "identity"])
def test_every_encode_decodes_at_once_to_all_the_data_given_so_far(encoding):
    encoder, decoder = ContentEncoder(encoding), ContentDecoder(encoding, BIG)
    for piece in (b"data: one\n\n", b"", b"data: two\n\n", SAMPLE[:20000]):
        assert decoder.decode(encoder.encode(piece)) == piece
    assert decoder.decode(encoder.finish()) == b"" and decoder.flush() == b"" and decoder.error is None
    with pytest.raises(ValueError, match="compress"):
        ContentEncoder("gzip, compress")


@pytest.mark.parametrize("encoding", sorted(ENCODERS))
def test_a_whole_body_is_decoded_in_one_call(encoding):
    # A request's body, as Codex sends its own (zstd) and the worker reads it.
    assert decode_body(ENCODERS[encoding](SAMPLE), encoding, BIG) == SAMPLE


@pytest.mark.parametrize(
    "encoding,body,why",
    [
        ("zstd", b"not zstd at all", "its content-encoding 'zstd' does not decode (zstd: "),
        (
            "gzip",
            gzip(SAMPLE)[:-40],
            "its content-encoding 'gzip' does not decode (gzip: the compressed stream is truncated)",
        ),
        (
            "compress",
            b"anything",
            "its content-encoding 'compress' does not decode (unsupported content-encoding 'compress')",
        ),
        ("zstd", zstd.compress(SAMPLE), f"it decodes to more than {len(SAMPLE) - 1} bytes, the cap"),
    ],
)
def test_a_whole_body_that_cannot_be_decoded_says_why(encoding, body, why):
    with pytest.raises(ValueError) as raised:
        decode_body(body, encoding, len(SAMPLE) - 1)
    assert str(raised.value).startswith(why), str(raised.value)
    assert isinstance(raised.value, TooLarge) == ("the cap" in why)


def test_a_requests_body_is_read_as_it_came_when_its_coding_is_identity_or_lies():
    # A request's body (Codex compresses its own): identity is no coding (the body whole, past any cap, as
    # mitmproxy reads it); a header that lies over plain JSON is read as it came; else why not.
    plain = b'{"messages": []}'
    assert request_body(plain * 10, " Identity ", 4) == plain * 10
    assert request_body(plain, "zstd", BIG) == plain
    assert request_body(zstd.compress(plain), "zstd", BIG) == plain
    assert request_body(None, "zstd", BIG) is None and request_body(b"x", None, 0) == b"x"
    assert request_body(zstd.compress(plain), "zstd", len(plain)) == plain  # the cap exactly
    with pytest.raises(
        ValueError, match="^the request's body cannot be read: it decodes to more than 4 bytes"
    ):
        request_body(zstd.compress(plain), "zstd", 4)
    with pytest.raises(ValueError, match="^the request's body cannot be read: its content-encoding 'br'"):
        request_body(b"[1, 2]", "br", BIG)  # JSON, but no object: no request
