"""The core type-checks: mypy finds nothing in ``accumulator/`` (pyproject's ``[tool.mypy]``).

The compiled core (mypyc, docs/performance.md) is built from these annotations and checks them at run
time: an annotation that lies is a crash there, so the check runs with the tests, not only at build time.
"""

import os
from pathlib import Path

import pytest

api = pytest.importorskip("mypy.api", reason="mypy is in the dev extra (pip install -e '.[dev]')")


ROOT = Path(__file__).resolve().parents[2]


def test_mypy_finds_no_error_in_the_core(tmp_path):
    config = ["--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(tmp_path / "mypy")]
    out, err, status = api.run([str(ROOT / "accumulator"), *config, "--no-error-summary"])
    assert status == 0, out + err


@pytest.mark.skipif(
    bool(os.environ.get("TOOLCALL_LENS_PURE")), reason="the sources run: nothing compiled runs"
)
def test_no_compiled_module_is_older_than_its_source():
    # A compiled module shadows its source: after a change to the core, the install must run again
    # (pip install -e .), or the change would not run at all, here or in mitmdump.
    stale = [
        str(source.relative_to(ROOT))
        for compiled in (ROOT / "accumulator").rglob("*.so")
        if (source := compiled.with_name(compiled.name.split(".")[0] + ".py")).exists()
        and source.stat().st_mtime > compiled.stat().st_mtime
    ]
    assert not stale, f"changed since the compiled build: {stale}; run .venv/bin/pip install -e . again"
