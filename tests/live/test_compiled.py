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


def _run(args: list[str], cwd: Path = ROOT, clean: bool = False, **env: str) -> str:
    """This Python with ``args`` in ``cwd``; its output (it must succeed). ``clean``: without the pure
    mode this run may be in."""
    drop = ("TOOLCALL_LENS_PURE", "PYTHONPATH") if clean else ()
    environment = {**{k: v for k, v in os.environ.items() if k not in drop}, **env}
    out = subprocess.run(
        [sys.executable, *args], check=False, cwd=cwd, env=environment, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    return out.stdout


def _python(code: str, **env: str) -> str:
    return _run(["-c", code], clean=True, **env).strip()


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
    command = ["-m", "pytest", "-m", "not live", "tests/core", "tests/frontdoors", "-p", "no:cacheprovider"]
    lines = _run([*command, "--basetemp", str(tmp_path / "pure")], TOOLCALL_LENS_PURE="1").splitlines()
    assert "toolcall-lens core: pure Python (the sources)" in lines[:8]
    assert " passed" in lines[-1]


def test_where_the_compiler_fails_the_core_is_built_pure_and_the_build_says_why(tmp_path):
    # setup.py's fallback: a build that cannot compile (here: a compiler that always fails) leaves no
    # module behind and succeeds, saying why. (A real `pip install -e` on such a copy ends the same way.)
    copy = tmp_path / "project"
    skip = shutil.ignore_patterns(".*", "*.so", "build", "mutants", "__pycache__", "*.egg-info")
    shutil.copytree(ROOT, copy, ignore=skip)
    out = _run(["setup.py", "build_ext", "--inplace"], copy, CC="/bin/false")
    assert "toolcall-lens: the core stays pure Python (its compiled build failed" in out
    assert not list(copy.rglob("*.so"))


def test_a_pure_install_removes_the_compiled_modules_an_earlier_build_left(tmp_path):
    # They would shadow the sources on import, and fail to import without the shared library this install
    # no longer points to: an edit mypy refuses (or TOOLCALL_LENS_PURE=1) left a checkout that would not
    # import at all.
    copy = tmp_path / "project"
    skip = shutil.ignore_patterns(".*", "*.so", "build", "mutants", "__pycache__", "*.egg-info")
    shutil.copytree(ROOT, copy, ignore=skip)
    left = [
        copy / "accumulator" / "assembly.cpython-312-x86_64-linux-gnu.so",
        copy / "accumulator" / "formats" / "openai_chat.cpython-312-x86_64-linux-gnu.so",
        copy / "0123abcd__mypyc.cpython-312-x86_64-linux-gnu.so",
    ]
    for path in left:
        path.write_bytes(b"an earlier build")
    kept = copy / "scripts" / "kept.cpython-312-x86_64-linux-gnu.so"  # not the core's: not touched
    kept.write_bytes(b"")
    out = _run(["setup.py", "build_ext", "--inplace"], copy, TOOLCALL_LENS_PURE="1")
    assert "toolcall-lens: removed 3 compiled modules of an earlier build" in out
    assert not any(path.exists() for path in left) and kept.exists()
