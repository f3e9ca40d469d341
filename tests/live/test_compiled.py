"""The compiled core (setup.py, mypyc) and the pure-Python one it is built from: where the build ran, the
tests run on the compiled core, and the core's tests run once more on the sources, the reference."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import accumulator

ROOT = Path(__file__).resolve().parents[2]
PURE = bool(os.environ.get("TOOLCALL_LENS_PURE"))


def _python(code: str, **env: str) -> str:
    environment = {k: v for k, v in os.environ.items() if k not in ("TOOLCALL_LENS_PURE", "PYTHONPATH")}
    out = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        cwd=ROOT,
        env={**environment, **env},
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.mark.needs(accumulator.COMPILED or PURE, "the core was installed without its compiled build")
def test_the_install_built_the_compiled_core_and_the_tests_run_on_it():
    # In CI a build that fell back to pure Python fails here (pip's output says why).
    assert _python("import accumulator; print(accumulator.COMPILED)") == "True"
    assert accumulator.COMPILED is not PURE


def test_with_toolcall_lens_pure_every_process_runs_the_sources():
    code = "import accumulator, accumulator.formats.openai_chat as m; print(accumulator.COMPILED, m.__file__)"
    out = _python(code, TOOLCALL_LENS_PURE="1", PYTHONPATH=str(ROOT / "scripts" / "pure"))
    assert out == f"False {ROOT / 'accumulator' / 'formats' / 'openai_chat.py'}"


@pytest.mark.skipif(
    not accumulator.COMPILED, reason="the core runs pure Python here: the suite already ran it"
)
@pytest.mark.timeout(1200)
def test_the_core_and_front_door_tests_pass_on_the_pure_sources_too(tmp_path):
    command = [sys.executable, "-m", "pytest", "-m", "not live", "tests/core", "tests/frontdoors"]
    command += ["-p", "no:cacheprovider", "--basetemp", str(tmp_path / "pure")]
    out = subprocess.run(
        command,
        check=False,
        cwd=ROOT,
        env={**os.environ, "TOOLCALL_LENS_PURE": "1"},
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "toolcall-lens core: pure Python (the sources)" in out.stdout.splitlines()[:8]
    assert " passed" in out.stdout.splitlines()[-1]


def test_where_the_compiler_fails_the_core_is_built_pure_and_the_build_says_why(tmp_path):
    # setup.py's fallback: a build that cannot compile (here: a compiler that always fails) leaves no
    # module behind and succeeds, saying why. (A real `pip install -e` on such a copy ends the same way.)
    copy = tmp_path / "project"
    skip = shutil.ignore_patterns(".*", "*.so", "build", "mutants", "__pycache__", "*.egg-info")
    shutil.copytree(ROOT, copy, ignore=skip)
    out = subprocess.run(
        [sys.executable, "setup.py", "build_ext", "--inplace"],
        check=False,
        cwd=copy,
        env={**os.environ, "CC": "/bin/false"},
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "toolcall-lens: the core stays pure Python (its compiled build failed" in out.stdout
    assert not list(copy.rglob("*.so"))
