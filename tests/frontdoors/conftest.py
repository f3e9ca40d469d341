"""The addon under mitmproxy's test harness, for the front-door tests that configure it: ``lens`` is a
fresh ToolcallLens in a taddons context (``lens.tctx.configure(lens, ...)`` sets its options), shut down
as mitmproxy would at the end (its ``done`` hook)."""

import pytest
from mitmproxy.test import taddons

import addon as addon_module


@pytest.fixture
def lens():
    lens = addon_module.ToolcallLens()
    with taddons.context(lens) as tctx:
        lens.tctx = tctx
        yield lens
        lens.done()
