"""The core, compiled with mypyc where this machine can (docs/performance.md): pyproject.toml holds the
project's metadata; this file only adds the compiled modules.

The same Python sources are compiled to C extension modules that sit beside them and take precedence on
import. Where they cannot be built (no C compiler, no Python headers, mypy missing) the install goes on
without them, saying why, and the pure-Python core runs: the same results, slower. TOOLCALL_LENS_PURE=1
at install time skips the build; at run time it makes the tests and the benchmark import the sources
(scripts/pure/sources_first.py).
"""

import os
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
# Every module of the core but the package files, the CLI, the pricing (once per response or per run, not
# per event) and the rewriter (opt-in, its own benchmark). The sessions and the report are compiled: once
# per response too, but on the proxy's thread, where placing a short flow in its session cost ~33 us and
# its summary line ~9 (docs/performance.md). Paths relative to the project, as mypyc wants them.
NOT_COMPILED = {"cli.py", "cost.py", "__init__.py"}
COMPILED = sorted(
    str(path.relative_to(ROOT))
    for path in (ROOT / "accumulator").rglob("*.py")
    if path.name not in NOT_COMPILED and "rewrite" not in path.parts
)


class OptionalBuildExt(build_ext):
    """Builds the compiled core, or nothing: a build that fails half-way leaves no module behind (a
    module whose shared library is missing would fail to import)."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001  (a compiler or headers missing: never a failed install)
            self._remove_built()
            print(f"toolcall-lens: the core stays pure Python (its compiled build failed: {exc})")

    def _remove_built(self) -> None:
        # The modules built so far, wherever they went (the build's folder, or beside the sources). The
        # build's temporary folder stays: an editable install goes on using it.
        for ext in self.extensions:
            for path in (self.get_ext_fullpath(ext.name), ROOT / self.get_ext_filename(ext.name)):
                Path(path).unlink(missing_ok=True)


def extensions() -> list:
    if os.environ.get("TOOLCALL_LENS_PURE"):
        return _pure()
    try:
        from mypyc.build import mypycify
    except ImportError:
        print("toolcall-lens: mypy is missing from the build: the core stays pure Python")
        return _pure()
    # A library without types where the build runs (brotli, jsonschema; any, in a build environment that
    # lacks one) is typed as Any: the compiled code calls it as Python would.
    options = ["--ignore-missing-imports"]
    try:
        return mypycify([*options, *COMPILED], opt_level="3", debug_level="0")
    except BaseException as exc:  # noqa: BLE001  (mypy refused the sources: never a failed install)
        print(
            f"toolcall-lens: the core stays pure Python (mypy refused the sources, exit {exc}; pip -v shows why)"
        )
        return _pure()


def _pure() -> list:
    """No compiled module: those an earlier build left beside the sources go too. They would take
    precedence over the sources on import (old code), and fail to import without the shared library this
    install no longer points to: a checkout whose edit mypy refuses would not import at all."""
    built = [*(ROOT / "accumulator").rglob("*"), *ROOT.glob("*__mypyc*")]
    stale = [path for path in built if path.suffix in (".so", ".pyd") and path.is_file()]
    for path in stale:
        path.unlink(missing_ok=True)
    if stale:
        print(f"toolcall-lens: removed {len(stale)} compiled modules of an earlier build")
    return []


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
