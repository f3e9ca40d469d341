"""The CI set-up: a test that needs a missing part of the environment fails in CI instead of skipping
(the ``needs`` mark, tests/conftest.py), and ``.ci/run`` checks for Chromium where the browser tests look."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from streams import ROOT

TESTS = ROOT / "tests"

NEEDS_MISSING = """
import pytest

@pytest.mark.needs(False, "the part is missing")
def test_needs_a_missing_part():
    pass

@pytest.mark.needs(True, "the part is here")
def test_needs_a_part_that_is_here():
    pass
"""


@pytest.mark.parametrize("ci, outcome", [("", "1 passed, 1 skipped"), ("true", "1 passed, 1 error")])
def test_a_missing_part_skips_with_its_reason_and_fails_in_ci(tmp_path, ci, outcome):
    (tmp_path / "conftest.py").write_text((TESTS / "conftest.py").read_text())
    (tmp_path / "test_part.py").write_text(NEEDS_MISSING)
    env = {"PATH": "/usr/bin:/bin", "CI": ci}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", "-q", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert outcome in run.stdout, run.stdout + run.stderr
    assert "the part is missing" in run.stdout


def test_ci_run_looks_for_chromium_where_the_browser_tests_do():
    script = (ROOT / ".ci" / "run").read_text()
    browser = (TESTS / "live" / "test_browser.py").read_text()
    (path,) = re.findall(r'CHROMIUM = Path\("([^"]+)"\)', browser)
    # CI=true comes from CI itself: .ci/run run by hand on a clone without ../shared must still skip.
    assert not re.search(r"^export CI=", script, re.MULTILINE)
    assert f"CHROMIUM={path}\n" in script and '[ ! -x "$CHROMIUM" ]' in script
