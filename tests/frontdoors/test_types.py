"""The core type-checks: mypy finds nothing in ``accumulator/`` (pyproject's ``[tool.mypy]``).

The compiled core (mypyc, docs/performance.md) is built from these annotations and checks them at run
time: an annotation that lies is a crash there, so the check runs with the tests, not only at build time.
"""

from pathlib import Path

import pytest

api = pytest.importorskip("mypy.api", reason="mypy is in the dev extra (pip install -e '.[dev]')")


ROOT = Path(__file__).resolve().parents[2]


def test_mypy_finds_no_error_in_the_core(tmp_path):
    config = ["--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(tmp_path / "mypy")]
    out, err, status = api.run([str(ROOT / "accumulator"), *config, "--no-error-summary"])
    assert status == 0, out + err
