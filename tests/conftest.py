"""Shared pytest setup. The tests come in tiers that mirror the layout: ``core/`` (the sans-IO core:
framing, formats, rewrite, assembly, results), ``frontdoors/`` (the addon with mitmproxy's taddons and
tflow, the CLI, the docs), ``live/`` (real processes: mitmdump, the fake providers, SDKs, a browser). Every
test under ``live/`` is marked ``live``, so ``pytest -m "not live"`` runs everything else without
starting a process. ``tests/`` (``streams.py``) and ``scripts/`` (the fake provider, lab) are importable.

A test that needs a part of the environment (Chromium, the recorded corpus in ../shared) carries
``@pytest.mark.needs(available, reason)``: where the part is missing it is skipped with that reason, but in
CI (``CI=true``, as ``.ci/run`` sets it) it fails, so that a broken set-up cannot pass as a green run."""

import os
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
for path in (TESTS, TESTS.parent / "scripts"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

LIVE = TESTS / "live"
IN_CI = os.environ.get("CI", "").lower() in ("true", "1")

# TOOLCALL_LENS_PURE=1: the pure-Python core runs, here and in every process a test starts, even where the
# compiled one is built (scripts/pure/sources_first.py).
if os.environ.get("TOOLCALL_LENS_PURE"):
    sys.path.insert(0, str(TESTS.parent / "scripts" / "pure"))
    import sources_first

    sources_first.install()


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "needs(available, reason): a part of the environment the test needs; skipped without it, failed in CI",
    )
    config.addinivalue_line(
        "markers",
        "heavy: a resource bound (an endless stream's memory, a megabyte fed a byte at a time), seconds each;"
        " skipped while a mutation run tests a mutant (docs/mutation.md)",
    )


def pytest_report_header(config):
    import accumulator

    return (
        f"toolcall-lens core: {'compiled (mypyc)' if accumulator.COMPILED else 'pure Python (the sources)'}"
    )


def pytest_runtest_setup(item):
    # mutmut names the mutant under test here; every surviving mutant of a hot path would run these too.
    if "__mutmut_" in os.environ.get("MUTANT_UNDER_TEST", "") and item.get_closest_marker("heavy"):
        pytest.skip("a resource bound: not run against each mutant (docs/mutation.md)")
    for mark in item.iter_markers("needs"):
        available, reason = mark.args
        if not available:
            if IN_CI:
                pytest.fail(f"CI=true and {reason}", pytrace=False)
            pytest.skip(reason)


def pytest_collection_modifyitems(items):
    for item in items:
        if LIVE in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.live)


@pytest.fixture(scope="module")
def provider():
    """A fake provider (scripts/fake_provider) on a free port, for a module's end-to-end tests."""
    from lab import start_fake_provider

    process, port = start_fake_provider(delay=0.002)
    try:
        yield port
    finally:
        process.stop()
