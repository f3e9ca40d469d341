"""The seed-args injection: each function call opens with ``{}`` as its arguments in a delta of its own,
then its real arguments follow, as a translator that seeds Anthropic's empty input into Chat Completions
sends them (FORMATS.md: "do not seed the argument buffer with {}"). Unlike the other injections it breaks
the stream on purpose: the arguments a correct client rebuilds are no JSON any more; a client that
finishes a call as soon as its arguments parse runs it with ``{}``. What a client does with that is the
question it asks."""

from __future__ import annotations

import json

import fake_provider
from rewriting import rewrite
from streams import codes

from accumulator import analyze

CHAT = "openai-chat"


def chunks(body: bytes) -> list[dict]:
    return [json.loads(line[6:]) for line in body.split(b"\n") if line.startswith(b"data: {")]


def tool_entries(body: bytes) -> list[dict]:
    return [e for c in chunks(body) for ch in c.get("choices", []) for e in ch["delta"].get("tool_calls", [])]


def test_each_call_opens_with_an_empty_object_of_its_own_then_its_arguments():
    body = fake_provider.body(CHAT, "sequential")
    out, report = rewrite(CHAT, body, ["seed-args"])
    new = b"".join(out)
    entries = tool_entries(new)
    openings = [e for e in entries if e.get("function", {}).get("name")]
    assert [(e["id"], e["function"]["name"], e["function"]["arguments"]) for e in openings] == [
        ("call_w1", "get_weather", "{}"),
        ("call_t1", "get_time", "{}"),
    ]
    # The delta that opened the call before goes on as a continuation: no id, no name.
    assert all("id" not in e and "name" not in e.get("function", {}) for e in entries if e not in openings)
    assert report["edits"] == {"seed-args": 2}
    before, after = analyze(body, CHAT), analyze(new, CHAT)
    assert [c["arguments"] for c in after["choices"][0]["tool_calls"]] == [
        "{}" + c["arguments"] for c in before["choices"][0]["tool_calls"]
    ]
    assert codes(after).count("invalid-arguments") == 2
    # A parse-early client runs both with {}; the clients that route differently rebuild what identity does.
    (cut,) = [w for w in after["warnings"] if w["code"] == "parse-early-misroute"]
    assert [c["arguments"] for c in cut["would_build"]] == ["{}", "{}"]
    assert {n for n, v in after["compatibility"].items() if v["verdict"] == "breaks"} == {"parse-early"}


def test_with_split_names_the_seed_comes_with_the_names_first_piece():
    body = fake_provider.body(CHAT, "sequential")
    new = b"".join(rewrite(CHAT, body, ["split-names", "seed-args"])[0])
    heads = [e for e in tool_entries(new) if e.get("function", {}).get("arguments") == "{}"]
    assert [e["function"]["name"] for e in heads] == ["get_w", "get_"]  # a piece each, then the rest
    after = analyze(new, CHAT)
    assert [c["name"] for c in after["choices"][0]["tool_calls"]] == ["get_weather", "get_time"]
    assert all(c["arguments"].startswith("{}{") for c in after["choices"][0]["tool_calls"])


def test_a_custom_tools_call_is_not_seeded():
    body = fake_provider.body(CHAT, "custom-interleaved")
    new = b"".join(rewrite(CHAT, body, ["seed-args"])[0])
    calls = {c["name"]: c["arguments"] for c in analyze(new, CHAT)["choices"][0]["tool_calls"]}
    assert calls["apply_patch"].startswith("*** Begin Patch") and calls["read_file"] == '{}{"path": "a.py"}'


def test_other_formats_say_why_it_is_not_sent():
    for fmt in ("anthropic-messages", "openai-responses", "gemini"):
        report = rewrite(fmt, fake_provider.body(fmt, "sequential"), ["seed-args"])[1]
        (skipped,) = report["skipped"]
        assert skipped["name"] == "seed-args" and skipped["reason"]
