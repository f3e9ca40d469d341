"""Shared pytest setup: the scripts/ folder (fake provider, process helpers) is importable in tests."""

import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))


@pytest.fixture(scope="module")
def provider():
    """A fake provider (scripts/fake_provider) on a free port, for a module's end-to-end tests."""
    from lab import start_fake_provider

    process, port = start_fake_provider(delay=0.002)
    try:
        yield port
    finally:
        process.stop()
