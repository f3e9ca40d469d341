"""Running the stream rewriter (accumulator.rewrite) in the tests: the pieces it sends and its report, with
the checks every rewrite must pass."""

from __future__ import annotations

import json

from accumulator.rewrite import INJECTIONS, REPAIRS, StreamRewriter


def split(names) -> tuple[list[str], list[str]]:
    """The injections and the repairs among ``names``."""
    return [n for n in names if n in INJECTIONS], [n for n in names if n in REPAIRS]


def rewrite(
    fmt: str, body: bytes, names=(), pieces=None, may_stop: bool = False, **options
) -> tuple[list[bytes], dict]:
    """The pieces a rewriter sends for ``body`` fed in ``pieces`` (whole by default), and its report. A
    rewriter that gave up passes the rest as it came, which a comparison of meaning alone may not see: it
    must not have stopped, unless the test says it may (``may_stop``)."""
    inject, repair = split(names)
    rewriter = StreamRewriter(fmt, inject=inject, repair=repair, **options)
    out = []
    fed = [body] if pieces is None else pieces
    for piece in fed:
        sent = rewriter.feed(piece)
        assert all(type(p) is bytes and p for p in sent), sent
        out += sent
    sent = rewriter.finish()
    assert all(type(p) is bytes and p for p in sent), sent
    out += sent
    report = rewriter.report()
    assert json.loads(json.dumps(report)) == report
    assert report["writes"] == len(out)
    assert report["bytes_out"] == sum(map(len, out))
    assert report["bytes_in"] == sum(map(len, fed))
    assert may_stop or report["stopped"] is None, report["stopped"]
    return out, report
