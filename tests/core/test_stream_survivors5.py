"""stream.py and result.py: what a mutation run found untested (the logic survivors of
``StreamAccumulator.finish`` and ``build_result`` in issue 16's last stretch; see docs/mutation.md). Each
test was checked by applying the mutation it guards against to the source by hand and seeing it fail."""

from __future__ import annotations

import gzip

from streams import DATA, choice, chunk, codes, sse, warning

from accumulator import StreamAccumulator, analyze

SHORT = b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'


def test_a_stream_too_short_to_sniff_while_it_came_is_read_at_its_end():
    # finish_11, _13: the bytes held for sniffing are read at the end, not dropped with the stream
    accumulator = StreamAccumulator(None)  # the format sniffed
    accumulator.feed(SHORT[:20])  # too little to tell: the next look waits for 256 bytes more
    accumulator.feed(SHORT[20:])
    result = accumulator.finish()
    assert result is not None and (result["format"], result["complete"]) == ("openai-chat", True)
    assert result["choices"][0]["text"] == "hi"


def test_a_compressed_body_cut_short_is_a_decoding_failure_at_its_end():
    # finish_4: the decoder is asked at the end whether its stream finished
    body = gzip.compress((DATA / "production_interleaved.sse").read_bytes())
    accumulator = StreamAccumulator(encoding="gzip")
    accumulator.feed(body[:-4])  # the gzip trailer missing: every event decoded, the body still cut
    result = accumulator.finish()
    assert warning(result, "decoding-failed")["message"] == (
        "the compressed body is corrupt: gzip: the compressed stream is truncated"
    )


def test_a_stream_cut_short_says_which_choices_were_unfinished_or_that_none_had_come():
    # build_result_73, _74
    before = analyze(sse(chunk(), done=False), "openai-chat")
    assert warning(before, "truncated-stream")["message"] == (
        "the stream ended without its end marker and before any choice arrived"
    )
    during = analyze(sse(chunk(choice(0, content="hi")), done=False), "openai-chat")
    assert warning(during, "truncated-stream")["message"] == (
        "the stream ended without its end marker; unfinished choices: [0]"
    )
    assert "truncated-stream" in codes(during)
