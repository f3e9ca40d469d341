"""The result is JSON-safe and matches RESULT_SCHEMA; docs/warnings.md and docs/result.md agree with the code."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from schemas import check_result
from streams import CORPUS, DATA, HAVE_CORPUS, NO_CORPUS, ROOT, call, choice, chunk, sse, tool_chunk

from accumulator import CATALOGUE, RESULT_SCHEMA, analyze

HOSTILE = [
    (DATA / "production_interleaved.sse").read_bytes(),
    sse(tool_chunk(call(0, "a", "f", '{"x": ')), {"error": {"message": "boom"}}, done=False),
    sse(b"not json", b"\xff\xfe", tool_chunk(call(None, None, None, "orphan")), chunk(choice(0, "stop"))),
    sse(tool_chunk(call(0, "a", "get_", "{")), tool_chunk(call(0, "b", "x", "}")), done=False),
    b"",
    b"data: [DONE]",
]


REQUEST = {"tools": [{"type": "function", "function": {"name": "get_weather"}}]}
# The recorded Chat streams too, when the corpus is here (else one placeholder, skipped with the reason).
RECORDED = sorted(p.name for p in CORPUS.glob("openai_chat_*.sse")) if HAVE_CORPUS else ["corpus-missing"]


def all_results() -> list[dict]:
    bodies = [p.read_bytes() for p in sorted(DATA.glob("*.sse"))] + HOSTILE
    return [analyze(b, "openai-chat", request=REQUEST) for b in bodies]


@pytest.mark.parametrize("result", all_results())
def test_result_is_json_safe_and_matches_the_schema(result):
    assert_json_safe_and_in_the_schema(result)


@pytest.mark.needs(HAVE_CORPUS, NO_CORPUS)
@pytest.mark.parametrize("name", RECORDED)
def test_a_recorded_result_is_json_safe_and_matches_the_schema(name):
    assert_json_safe_and_in_the_schema(analyze((CORPUS / name).read_bytes(), "openai-chat", request=REQUEST))


def assert_json_safe_and_in_the_schema(result: dict) -> None:
    assert json.loads(json.dumps(result, allow_nan=False)) == result
    check_result(result)
    for w in result["warnings"]:
        assert w["code"] in CATALOGUE and w["severity"] == CATALOGUE[w["code"]][0]


def test_every_code_the_core_can_raise_is_in_the_catalogue():
    source = "\n".join(p.read_text() for p in (ROOT / "accumulator").rglob("*.py"))
    raised = set(re.findall(r'(?:_warn|warnings)\.add\(\s*"([a-z0-9-]+)"', source))
    raised |= set(re.findall(r'code = "([a-z0-9-]+)"', source))
    assert raised and raised <= set(CATALOGUE), raised - set(CATALOGUE)


DOCS = ROOT / "docs"
CATALOGUE_ROW = re.compile(r"^\| `([^`]+)` \| ([a-z]+) \| (.*) \|$", re.MULTILINE)


def test_warnings_doc_documents_exactly_the_catalogue():
    doc = (DOCS / "warnings.md").read_text()
    for code, (severity, meaning) in CATALOGUE.items():
        assert f"| `{code}` | {severity} | {meaning} |" in doc, code
    rows = CATALOGUE_ROW.findall(doc)
    documented = [code for code, _, _ in rows]
    assert len(documented) == len(set(documented)), "a code documented twice"
    assert set(documented) == set(CATALOGUE), set(documented) ^ set(CATALOGUE)
    # The details list names codes too: none that the catalogue lacks.
    details = doc[doc.index("## Details by code") :]
    named = set(re.findall(r"^- `([a-z0-9-]+)`", details, re.MULTILINE))
    assert named and named <= set(CATALOGUE), named - set(CATALOGUE)


def test_result_doc_lists_every_result_field():
    doc = (DOCS / "result.md").read_text()
    fields = doc[doc.index("| field | type | meaning |") : doc.index("## An example")]
    documented = {f for f in re.findall(r"^\| `([^`]+)` \|", fields, re.MULTILINE) if "." not in f}
    assert documented == set(RESULT_SCHEMA["properties"]), documented ^ set(RESULT_SCHEMA["properties"])


@pytest.mark.live  # a fresh interpreter, to see what importing the core pulls in
def test_core_imports_no_mitmproxy():
    code = "import sys, accumulator, accumulator.cli; print(sorted(m for m in sys.modules if m.startswith('mitmproxy')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_core_modules_do_no_io():
    # Only the CLI (a front door) may touch files and streams.
    pattern = re.compile(r"\b(open\(|print\(|sys\.std|logging|socket|os\.)")
    for path in (ROOT / "accumulator").rglob("*.py"):
        if path.name == "cli.py":
            continue
        assert not pattern.search(path.read_text()), path


def test_only_the_cli_front_door_mentions_mitmproxy():
    for path in (ROOT / "accumulator").rglob("*.py"):
        if path.name != "cli.py":
            assert not re.search(r"^\s*(from|import) mitmproxy", path.read_text(), re.MULTILINE), path


def test_the_result_dict_is_spelled_in_one_place():
    # The typed model (accumulator.result.Result) turns into the dict; nothing else spells its shape.
    sources = [
        *(ROOT / "accumulator").rglob("*.py"),
        *(ROOT / "toolcall_lens").rglob("*.py"),
        ROOT / "addon.py",
    ]
    spelled = [p.name for p in sources if '"warnings_suppressed":' in p.read_text()]
    assert spelled == ["result.py"]
    extended = [
        p.name for p in sources if re.search(r"\[\"warnings\"\]\s*\.(extend|append)\(", p.read_text())
    ]
    assert extended == []


def test_warnings_added_to_a_finished_result_go_through_the_log_and_its_cap():
    from accumulator.result import add_warnings
    from accumulator.warnings import MAX_PER_CODE

    result = analyze((DATA / "production_interleaved.sse").read_bytes())
    before = len(result["warnings"])
    echo = {"code": "client-misassembled", "severity": "warning", "message": "m", "id": "call_x"}
    add_warnings(result, [dict(echo, id=f"call_{n}") for n in range(MAX_PER_CODE + 5)])
    found = [w for w in result["warnings"] if w["code"] == "client-misassembled"]
    assert len(found) == MAX_PER_CODE and found[0]["id"] == "call_0" and found[0]["severity"] == "warning"
    assert len(result["warnings"]) == before + MAX_PER_CODE
    assert result["stats"]["warnings_suppressed"] == 5
    check_result(result)


@pytest.mark.parametrize("format", ["openai-chat", "openai-responses", "anthropic-messages"])
def test_a_model_or_response_id_that_is_not_a_string_is_left_out(format):
    # A provider's mistake (a number, an object) never reaches the result's string fields: the schema holds.
    if format == "openai-chat":
        body = sse(chunk(choice(0, "stop", content="hi"), id=1.5, model={"name": "m"}))
    elif format == "openai-responses":
        response = {"id": 7, "model": ["m"], "status": "completed", "output": []}
        body = sse(
            {"type": "response.created", "response": response},
            {"type": "response.completed", "response": response},
            done=False,
        )
    else:
        message = {"id": 7, "model": 1.5, "role": "assistant", "content": []}
        body = sse(
            {"type": "message_start", "message": message},
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
            {"type": "message_stop"},
            done=False,
        )
    result = analyze(body, format)
    check_result(result)
    assert (result["model"], result["response_id"]) == (None, None)


def test_a_finish_reason_that_is_not_a_string_falls_back_to_the_formats_own():
    # Ollama's done_reason and a Responses response's status, sent as numbers: the compiled core raised on
    # them (a finish reason is a string), the pure one put the number in the result, against the schema.
    ollama = b'{"model":"m","message":{"role":"assistant","content":"hi"},"done":true,"done_reason":5}\n'
    response = {"id": "r", "model": "m", "status": 7, "output": []}
    responses = sse({"type": "response.completed", "response": response}, done=False)
    for body, format, reason in (
        (ollama, "ollama-chat", "stop"),
        (responses, "openai-responses", "completed"),
    ):
        result = analyze(body, format)
        check_result(result)
        assert result["choices"][0]["finish_reason"] == reason
        assert "internal-error" not in [w["code"] for w in result["warnings"]]
