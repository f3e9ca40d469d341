"""TOOLCALL_LENS_PURE=1: the core's Python sources are imported even where its compiled build sits beside
them (setup.py), so the pure-Python core, the reference, runs every test too.

Python imports an extension module before a source file of the same name; this finder, first on
``sys.meta_path``, finds the core's modules among source files only. tests/conftest.py and scripts/bench.py
install it in their own process and put this folder on PYTHONPATH, so that every Python process they start
(mitmdump, the CLI) loads it at start-up (``sitecustomize.py`` beside it imports it).
"""

import os
import sys
from importlib.machinery import SOURCE_SUFFIXES, FileFinder, SourceFileLoader


class SourcesFirst:
    """Finds the modules of ``accumulator`` as source files only (the package itself, never compiled, is
    found as usual: its ``__path__`` is where its modules are looked for)."""

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if not name.startswith("accumulator.") or path is None:
            return None
        for entry in path:
            spec = FileFinder(entry, (SourceFileLoader, SOURCE_SUFFIXES)).find_spec(name)
            if spec is not None:
                return spec
        return None


def install() -> None:
    """With TOOLCALL_LENS_PURE set: the sources first, here and in the Python processes started from here."""
    if not os.environ.get("TOOLCALL_LENS_PURE") or SourcesFirst in sys.meta_path:
        return
    sys.meta_path.insert(0, SourcesFirst)
    here = os.path.dirname(os.path.abspath(__file__))
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if here not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [here, *paths]))


install()
