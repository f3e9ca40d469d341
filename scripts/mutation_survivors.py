"""The survivors of a mutmut run, grouped by what their mutation changed (docs/mutation.md).

    .venv/bin/python scripts/mutation_survivors.py [MUTANTS_DIR] [--list KIND]

Reads mutmut's working copy (``mutants/``: each function's original and its mutants, and the ``.meta``
files with each mutant's exit code) and sorts every mutant that survived by the tokens it changed:
``wording`` (only string literals: a message, a help text, a log line), ``constant`` (only numbers),
``logic`` (anything else: an operator, a name, an argument, a call). Prints the counts per module and
kind, and with ``--list KIND`` each survivor of that kind with its changed tokens.
"""

from __future__ import annotations

import argparse
import ast
import functools
import io
import json
import sys
import tokenize
from collections import Counter, defaultdict
from pathlib import Path

SURVIVED = 0  # the tests passed with the mutant in place
NO_TESTS = 33


def functions(path: Path) -> dict[str, str]:
    """Every function of a mutated module (originals and mutants) by name, as source."""
    source = path.read_text()
    tree = ast.parse(source)
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and "__mutmut_" in node.name:
            out[node.name] = ast.get_source_segment(source, node) or ""
    return out


@functools.lru_cache(maxsize=64)
def tokens(source: str) -> list[tuple[int, str]]:
    out = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            continue
        out.append((token.type, token.string))
    return out


def changed(original: str, mutant: str) -> list[tuple[tuple[int, str] | None, tuple[int, str] | None]]:
    """The tokens that differ (pairs of original, mutant; None where one side has none), the function's
    own name left aside."""
    import difflib

    a, b = tokens(original)[2:], tokens(mutant)[2:]  # "def NAME" differs by construction
    # A mutation changes one place: the equal head and tail are left out before diffing (difflib without
    # autojunk is quadratic in what it is given; over whole functions, the listing took 20 minutes).
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    a, b = a[head : len(a) - tail], b[head : len(b) - tail]
    pairs = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        left, right = a[i1:i2], b[j1:j2]
        for n in range(max(len(left), len(right))):
            pairs.append((left[n] if n < len(left) else None, right[n] if n < len(right) else None))
    return pairs


def kind(pairs) -> str:
    types = {t[0] for pair in pairs for t in pair if t is not None}
    if pairs and all(
        (l is not None and r is not None and l[0] == r[0] == tokenize.STRING)
        or (
            l is not None
            and l[0] == tokenize.FSTRING_MIDDLE
            and (r is None or r[0] == tokenize.FSTRING_MIDDLE)
        )
        for l, r in pairs
    ):
        return "wording"
    if types <= {tokenize.NUMBER} and pairs:
        return "constant"
    return "logic"


def survivors(mutants: Path):
    for meta in sorted(mutants.rglob("*.py.meta")):
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        module = meta.with_suffix("")  # the .py
        found = [key for key, code in codes.items() if code == SURVIVED]
        if not found:
            continue
        sources = functions(module)
        for key in found:
            name = key.rsplit(".", 1)[1]
            original = sources.get(name.rsplit("__mutmut_", 1)[0] + "__mutmut_orig")
            mutant = sources.get(name)
            if original is None or mutant is None:
                yield key, "logic", []
                continue
            pairs = changed(original, mutant)
            yield key, kind(pairs), pairs


def totals(mutants: Path) -> Counter:
    count: Counter = Counter()
    for meta in mutants.rglob("*.py.meta"):
        for code in json.loads(meta.read_text())["exit_code_by_key"].values():
            count[
                "not run"
                if code is None
                else {0: "survived", 1: "killed", NO_TESTS: "no tests"}.get(code, f"exit {code}")
            ] += 1
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mutants", nargs="?", default="mutants", type=Path)
    parser.add_argument("--list", choices=("wording", "constant", "logic"))
    args = parser.parse_args(argv)
    if not args.mutants.is_dir():
        print(
            f"no mutmut working copy at {args.mutants} (run mutmut first: docs/mutation.md)", file=sys.stderr
        )
        return 2
    print("mutants:", ", ".join(f"{n} {what}" for what, n in totals(args.mutants).most_common()))
    by_module: dict[str, Counter] = defaultdict(Counter)
    listed = []
    for key, what, pairs in survivors(args.mutants):
        module = key.split(".x_")[0].split(".xǁ")[0]
        by_module[module][what] += 1
        if what == args.list:
            shown = "; ".join(f"{l[1] if l else '∅'} -> {r[1] if r else '∅'}" for l, r in pairs[:4])
            listed.append(f"{key}: {shown[:160]}")
    print(f"{'module':40} {'wording':>8} {'constant':>9} {'logic':>6}")
    for module in sorted(by_module):
        c = by_module[module]
        print(f"{module:40} {c['wording']:8} {c['constant']:9} {c['logic']:6}")
    all_ = sum(by_module.values(), Counter())
    print(f"{'all':40} {all_['wording']:8} {all_['constant']:9} {all_['logic']:6}")
    if listed:
        print()
        print("\n".join(listed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
