"""``toolcall-lens FILE...``: reconstruct the tool calls of captured response bodies.

Exit status: 0 when no result has a warning of severity "warning", 1 when one has, 2 on a usage or
input error (nothing is analysed then).
"""

from __future__ import annotations

import argparse
import sys

import orjson

from .detect import detect_format
from .dialects import DIALECTS
from .report import format_report
from .stream import StreamAccumulator

_CHUNK = 64 * 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="toolcall-lens",
        description="Rebuild the tool calls of captured LLM response streams by identity, and say what "
        "naive accumulators would have built from the same bytes.",
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="a raw response body as captured")
    parser.add_argument("--json", action="store_true", help='print {"results": [...]} instead of a report')
    parser.add_argument("--request", metavar="REQUEST.json", help="the request body (declared tools)")
    parser.add_argument("--format", choices=sorted(DIALECTS), help="the wire format (default: detected)")
    args = parser.parse_args(argv)

    try:
        request = _read_request(args.request) if args.request else None
        inputs = [_read_input(path, args.format) for path in args.files]
    except InputError as exc:
        print(f"toolcall-lens: {exc}", file=sys.stderr)
        return 2

    results = []
    for path, body, format in inputs:
        accumulator = StreamAccumulator(format, request=request)
        for start in range(0, len(body), _CHUNK):
            accumulator.feed(body[start : start + _CHUNK])
        results.append(accumulator.finish())

    if args.json:
        sys.stdout.buffer.write(orjson.dumps({"results": results}) + b"\n")
    else:
        print("\n\n".join(format_report(result, path) for (path, _, _), result in zip(inputs, results)))
    sys.stdout.flush()
    failed = any(w["severity"] == "warning" for result in results for w in result["warnings"])
    return 1 if failed else 0


class InputError(Exception):
    pass


def _read_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None


def _read_request(path: str) -> dict:
    try:
        request = orjson.loads(_read_bytes(path))
    except orjson.JSONDecodeError as exc:
        raise InputError(f"{path} is not JSON: {exc}") from None
    if type(request) is not dict:
        raise InputError(f"{path} is not a JSON object (a request body)")
    return request


def _read_input(path: str, format: str | None) -> tuple[str, bytes, str]:
    body = _read_bytes(path)
    if format is None:
        format = detect_format(body)
        if format is None:
            raise InputError(
                f"cannot tell the wire format of {path}; pass --format ({', '.join(sorted(DIALECTS))})"
            )
    return path, body, format


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()
