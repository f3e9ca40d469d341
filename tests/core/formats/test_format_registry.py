"""One format, one module: every table comes from the format modules, no other module of the core names a
format, and a new format is one module registered with its tests."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from streams import ROOT, warning

from accumulator import FORMATS, analyze, analyze_message, classify, formats
from accumulator.formats.base import FRAMINGS, JsonDialect, WireFormat
from accumulator.rewrite import supported

CORE = ROOT / "accumulator"
NAMES = set(FORMATS)


def _strings(tree: ast.AST) -> list[tuple[int, str]]:
    """String constants of a module, docstrings left out (prose may say which format uses what)."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def _outside_formats() -> list[Path]:
    return [p for p in CORE.rglob("*.py") if "formats" not in p.relative_to(CORE).parts]


@pytest.mark.parametrize("path", _outside_formats(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_outside_formats_names_a_format(path):
    tree = ast.parse(path.read_text())
    named = [(line, text) for line, text in _strings(tree) if any(name in text for name in NAMES)]
    assert named == [], f"{path.name} names a format: {named}"
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            parts = node.module.split(".")
            assert not (
                "formats" in parts and len(parts) > parts.index("formats") + 1 and parts[-1] != "base"
            ), f"{path.name} imports a format module: {node.module}"


def test_the_check_above_can_fail(tmp_path):
    tree = ast.parse('"""a docstring naming gemini is fine"""\nX = {"openai-chat": 1}\n')
    assert [text for _, text in _strings(tree)] == ["openai-chat"]


def test_every_format_declares_everything_the_registry_builds_from():
    for name, wire in formats.FORMATS.items():
        assert isinstance(wire, WireFormat) and wire.name == name
        assert wire.framings and set(wire.framings) <= set(FRAMINGS)
        assert wire.paths, f"{name} is recognised on no path"
        assert formats.path_format(_a_path(wire)) is not None


def _a_path(wire: WireFormat) -> str:
    # A concrete path for each of its patterns' first form.
    pattern = wire.paths[0][0]
    return pattern.replace("(^|/)", "/").replace("[^/]+", "m").replace("$", "").replace("\\", "")


class _EchoDialect(JsonDialect):
    """A made-up wire format, for this test alone: one JSON object per line, ``{"call": name, "args": {}}``."""

    empty_arguments = "{}"
    fragments = False

    def obj_ops(self, obj, kind, number):
        # The payload read by JsonDialect.ops, as a new format's dialect needs no more.
        from accumulator.ops import StreamEnd, ToolCallDelta

        if obj.get("end"):
            return [StreamEnd(number)]
        return [ToolCallDelta(number, 0, obj.get("id"), None, obj["call"], obj.get("args"), whole=True)]

    def message_ops(self, body):
        return []

    def finish(self, number):
        return []


def test_a_new_format_is_one_module_registered(monkeypatch):
    wire = WireFormat(
        name="echo-lines",
        dialect=_EchoDialect,
        framings=("ndjson",),
        paths=((r"/echo/v1/lines$", False),),
        sniff=lambda event, obj: obj is not None and "call" in obj,
        tools=lambda request: (
            {t: None for t in request.get("echo_tools", ())} if "echo_tools" in request else None
        ),
    )
    monkeypatch.setitem(formats.FORMATS, wire.name, wire)
    monkeypatch.setattr(
        formats, "_PATHS", formats._PATHS + tuple((p, wire.name, a) for p, a in wire.compiled_paths)
    )
    body = b'{"call": "lookup", "id": "c1", "args": {"q": 1}}\n{"call": "fetch", "id": "c2", "args": {}}\n[1]\n{"end": true}\n'
    exchange = classify(path="/echo/v1/lines", content_type="application/x-ndjson")
    assert (exchange.kind, exchange.format) == ("stream", "echo-lines")
    result = analyze(body, None, request={"echo_tools": ["lookup"]})
    assert result["format"] == "echo-lines"
    assert [(c["name"], c["arguments"]) for c in result["choices"][0]["tool_calls"]] == [
        ("lookup", '{"q":1}'),
        ("fetch", "{}"),
    ]
    # fetch: its request reader spoke; the third line is no JSON object, which the base dialect says
    assert [w["code"] for w in result["warnings"]] == ["malformed-event", "undeclared-tool"]
    assert warning(result, "malformed-event")["event"] == 3
    assert [c["first_event"] for c in result["choices"][0]["tool_calls"]] == [1, 2]
    assert result["compatibility"]["recency"]["verdict"] == "n/a"  # whole calls: nothing to route
    assert supported("echo-lines") == {"rechunk"}  # no reorder keys, no edits: only bytes can be cut


def test_the_base_dialect_hands_its_format_each_events_object_and_type():
    # JsonDialect.ops_10: an SSE event's type reaches obj_ops with its JSON object
    from accumulator.framing import SseDecoder
    from accumulator.warnings import WarningLog

    seen = []

    class Typed(JsonDialect):
        def obj_ops(self, obj, kind, number):
            seen.append((obj, kind, number))
            return []

    (event,) = SseDecoder().feed(b'event: call\ndata: {"a": 1}\n\n')
    assert Typed(WarningLog()).ops(event, 7) == []
    assert seen == [({"a": 1}, "call", 7)]


def test_a_message_of_each_format_is_recognised_by_its_module():
    assert analyze_message(b'{"object": "chat.completion", "choices": []}')["format"] == "openai-chat"
    assert formats.sniff_message(b'{"type": "message", "content": []}') == "anthropic-messages"
    assert formats.sniff_message(b'{"output": {"message": {}}}') == "bedrock-converse"
    assert formats.sniff_message(b'{"hello": 1}') is None
