"""What each install gives, checked against pyproject.toml: the base install (`pip install -e .`) declares
every distribution the addon, the CLI and the demo's `--offline` path import; `.[demo]` adds what the live
demo imports; `.[dev]` (the tests) holds `.[demo]`. Imports are read from the sources, by module name."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from collections.abc import Iterable
from importlib.metadata import packages_distributions
from pathlib import Path

from packaging.requirements import Requirement
from streams import ROOT

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
SCRIPTS = ROOT / "scripts"
# This repository's own modules and scripts, importable from the checkout.
LOCAL = {"accumulator", "toolcall_lens", "addon", "lab", "fake_provider", "demo"}
# Standard library only in newer Pythons than 3.12; accumulator/decoding.py imports it only there.
NEWER_STDLIB = {"compression"}

# The OpenTelemetry export is an extra (`otel`), imported only when asked for: its own check below.
OTEL_SOURCES = [ROOT / "toolcall_lens" / "otel.py"]
BASE_SOURCES = [
    *(ROOT / "accumulator").rglob("*.py"),
    *(p for p in (ROOT / "toolcall_lens").rglob("*.py") if p not in OTEL_SOURCES),
    ROOT / "addon.py",
]


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared(requirements: Iterable[str]) -> set[str]:
    return {normalized(Requirement(line).name) for line in requirements}


def imports(nodes: Iterable[ast.AST]) -> set[str]:
    """The top-level names of the absolute imports among the nodes."""
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def imports_of(path: Path, *, functions: Iterable[str] | None = None) -> set[str]:
    """Every import in the file; with functions, only those at module level and in those functions."""
    tree = ast.parse(path.read_text())
    if functions is None:
        return imports(ast.walk(tree))
    nodes = list(tree.body)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in functions:
            nodes += ast.walk(node)
    return imports(nodes)


def undeclared(modules: set[str], requirements: set[str]) -> dict[str, list[str]]:
    """The third-party modules no declared distribution provides: {module: the distributions that do}."""
    provided_by = packages_distributions()
    missing = {}
    for module in sorted(modules - LOCAL - NEWER_STDLIB - set(sys.stdlib_module_names)):
        distributions = [normalized(name) for name in provided_by.get(module, [])]
        if not set(distributions) & requirements:
            missing[module] = distributions
    return missing


def demo_requirements() -> set[str]:
    return declared(PROJECT["dependencies"]) | declared(PROJECT["optional-dependencies"]["demo"])


def test_the_base_install_declares_what_the_addon_and_the_cli_import():
    modules = set().union(*(imports_of(path) for path in BASE_SOURCES))
    assert {"mitmproxy", "orjson"} <= modules  # the reading works
    assert undeclared(modules, declared(PROJECT["dependencies"])) == {}


def test_the_otel_extra_declares_what_the_export_imports_and_the_dev_extra_holds_it():
    modules = set().union(*(imports_of(path) for path in OTEL_SOURCES))
    assert {"opentelemetry", "requests"} <= modules
    extras = PROJECT["optional-dependencies"]
    assert undeclared(modules, declared(PROJECT["dependencies"]) | declared(extras["otel"])) == {}
    itself = [r for r in map(Requirement, extras["dev"]) if normalized(r.name) == normalized(PROJECT["name"])]
    assert any("otel" in r.extras for r in itself)


def test_the_base_install_declares_what_the_offline_demo_imports():
    modules = imports_of(SCRIPTS / "demo.py", functions=("offline", "main")) | imports_of(
        SCRIPTS / "lab.py", functions=()
    )
    assert "openai" not in modules and "accumulator" in modules
    assert undeclared(modules, declared(PROJECT["dependencies"])) == {}


def test_the_demo_extra_declares_what_the_live_demo_imports():
    # The live demo runs the openai SDK, mitmdump with the addon, and the fake provider.
    sources = [SCRIPTS / "demo.py", SCRIPTS / "lab.py", *(SCRIPTS / "fake_provider").rglob("*.py")]
    modules = set().union(*(imports_of(path) for path in sources))
    assert {"openai", "h11"} <= modules
    assert undeclared(modules, demo_requirements()) == {}


def test_the_dev_extra_holds_the_demo_extra():
    extras = PROJECT["optional-dependencies"]
    dev = [Requirement(line) for line in extras["dev"]]
    itself = [r for r in dev if normalized(r.name) == normalized(PROJECT["name"])]
    holds_demo = any("demo" in r.extras for r in itself)
    assert holds_demo or declared(extras["demo"]) <= declared(extras["dev"])


def test_the_check_can_fail():
    assert undeclared({"openai", "json", "accumulator", "compression"}, declared(["mitmproxy>=12"])) == {
        "openai": ["openai"]
    }
    assert undeclared({"backports"}, declared(["backports.zstd>=1.0; python_version < '3.14'"])) == {}
