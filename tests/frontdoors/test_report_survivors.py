"""The reports a person reads (the CLI's report, the content view, the one-line summaries): what a mutation
run found untested (the logic survivors of ``accumulator/report.py``; see docs/mutation.md). Each test was
checked by applying the mutation it guards against to the source by hand and seeing it fail."""

from __future__ import annotations

import copy

import pytest
from streams import DATA, call, chat_message, choice, chunk, sse, tool_chunk
from test_websocket_presentation import _recorded
from websocket_messages import websocket_flow

from accumulator import StreamAccumulator, analyze, analyze_http_error, analyze_message
from accumulator.cli import main
from accumulator.report import (
    connection_summary_line,
    evidence_line,
    format_report,
    format_view,
    summary_line,
)


def cli_report(name: str, capsys) -> list[str]:
    main([str(DATA / name)])
    return capsys.readouterr().out.splitlines()


def message(content: str | None = "hello", tool_calls: list | None = None) -> bytes:
    """A whole (non-streamed) Chat Completions response saying ``content``, calling ``tool_calls``."""
    return chat_message(
        [(f"call_{n}", name, "{}") for n, name in enumerate(tool_calls or ())], content=content
    )


def lines_of(result: dict) -> list[str]:
    return format_report(result).splitlines()


# --- format_report: the head, the calls, the text, the error, the facts the front doors add -----------------


def test_the_head_says_not_streamed_and_has_no_title_unless_given():
    # mutants 6, 8 ("(not streamed)" never said), 33 (a title of None)
    result = analyze_message(message(), "openai-chat")
    assert lines_of(result)[0] == "== openai-chat (not streamed), model gpt-test, complete =="
    streamed = analyze((DATA / "production_interleaved.sse").read_bytes())
    assert lines_of(streamed)[0] == "== openai-chat, model gpt-test, complete =="
    assert (
        format_report(streamed, "t.sse").splitlines()[0]
        == "== t.sse (openai-chat, model gpt-test, complete) =="
    )


def test_the_clis_report_of_a_stream_a_provider_error_cut(capsys):
    # mutants 24 (INCOMPLETE), 90 (INTERLEAVED on every call), 109 (no text), 112, 116, 117 (the error line)
    lines = cli_report("anthropic_messages_midstream_error.sse", capsys)
    assert lines[0].endswith("(anthropic-messages, model claude-sonnet-4-5-20250929, INCOMPLETE) ==")
    assert "      3 delta(s), events 11 to 13" in lines
    assert "  reasoning: Two independent lookups; call both tools at once." in lines
    assert "  text: Checking both now." in lines
    assert 'error: {"type":"overloaded_error","message":"Overloaded"}' in lines


def test_a_call_without_an_index_shows_a_dash(capsys):
    # mutant 48 ("index=None")
    lines = cli_report("mistral_parallel.sse", capsys)
    assert "  [0] get_weather  id=gSIMJiOkT  index=-" in lines


def test_a_calls_times_and_the_timings_source_are_shown_when_a_clock_was_read():
    # mutants 70, 76 (a call's times never shown), 237 (where the timing came from not said)
    accumulator = StreamAccumulator("openai-chat", started_at=100.0)
    accumulator.feed(sse(tool_chunk(call(0, "call_1", "f", '{"a": ')), done=False), now=100.5)
    accumulator.feed(sse(tool_chunk(call(0, None, None, "1}")), chunk(choice(0, "tool_calls"))), now=101.0)
    result = accumulator.finish(now=101.25)
    result["source"] = {"file": "dump.mitm", "timing": "the flow's timestamps"}
    lines = lines_of(result)
    assert "      2 delta(s), events 1 to 2, 0.000s to 0.500s" in lines
    assert "timing (the flow's timestamps): first byte 0.500s, first event 0.500s, first token 0.500s, " in (
        "\n".join(lines) + "\n"
    )


@pytest.mark.parametrize("length", [300, 301])
def test_a_text_of_300_characters_is_shown_whole_and_a_longer_one_cut(length):
    # _one_line: mutants 10 (never cut), 11 (300 characters cut), 12 (the cut raises)
    result = analyze_message(message("x" * length), "openai-chat")
    shown = "x" * length if length <= 300 else "x" * 300 + "…"
    assert f"  text: {shown}" in lines_of(result)


def test_the_websocket_line_says_every_fact_it_has():
    # format_report 250 (no websocket line); _websocket_line 8, 12, 15, 21, 24, 27, 30 (a fact left out or
    # None joined)
    result = analyze_message(message(), "openai-chat")
    result["websocket"] = {
        "position": 2,
        "lane": "s1",
        "prewarm": True,
        "status": "cancelled",
        "first_message": 3,
        "last_message": 9,
        "audio_bytes": 480,
        "evidence": {"answered": ["call_1"], "unanswered": [], "cancelled": ["call_2"]},
    }
    assert (
        "websocket: response 2, messages 3 to 9, lane s1, prewarm, ended cancelled, 480 bytes of audio, "
        "the client: answered call_1; cancelled call_2"
    ) in lines_of(result)


@pytest.mark.parametrize(
    "rewrite,expected",
    [
        (
            {
                "inject": ["interleave", "split-names"],
                "repair": [],
                "skipped": [{"name": "collide-index", "reason": "no two calls"}],
                "upstream": {"calls_same": False, "warnings": ["recency-misroute"]},
            },
            [
                "rewritten: injected interleave, split-names, repaired -; skipped collide-index: no two calls",
                "the upstream sent: DIFFERENT calls, warnings recency-misroute; the report above is what the "
                + "client got",
            ],
        ),
        (
            {
                "inject": [],
                "repair": ["serialize", "reindex"],
                "skipped": [],
                "upstream": {"calls_same": True, "warnings": []},
            },
            [
                "rewritten: injected -, repaired serialize, reindex",
                "the upstream sent: the same calls, warnings -; the report above is what the client got",
            ],
        ),
    ],
)
def test_the_rewrite_lines_say_what_was_applied_skipped_and_what_the_upstream_sent(rewrite, expected):
    # mutants 275, 277, 285, 287 (the lists joined or defaulted wrong), 297, 298, 300 (a skip's name and
    # reason), 313, 321 (the upstream's line raises)
    result = analyze((DATA / "openai_chat_parallel.sse").read_bytes())
    result["rewrite"] = rewrite
    lines = lines_of(result)
    assert lines[-2:] == expected


def test_a_breaking_rule_this_version_does_not_know_is_shown_without_its_clients():
    # _clients 4: a stored result (a dump from another version) naming a rule the core does not know
    result = analyze((DATA / "openai_chat_parallel.sse").read_bytes())
    result["compatibility"] = {"older-rule": {"verdict": "breaks", "reason": "builds different calls"}}
    lines = lines_of(result)
    assert "  older-rule  breaks  builds different calls" in lines
    assert not any("who follows it" in line for line in lines)


# --- evidence_line -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "evidence,expected",
    [
        ({"reason": "no echo"}, "evidence: not checked: no echo"),
        (
            {
                "reason": None,
                "checked": 3,
                "matched": 2,
                "earlier_flows": ["f1", "f2"],
                "unanswered": ["call_b"],
                "unknown": ["call_y", "call_z"],
            },
            "evidence: 3 echoed call(s) and result(s) read, 2 echo(es) matched what flow f1, f2 streamed"
            + "; UNANSWERED call_b; unknown ids call_y, call_z",
        ),
        (
            {
                "reason": None,
                "checked": 0,
                "matched": 0,
                "earlier_flows": [],
                "unanswered": [],
                "unknown": [],
            },
            "evidence: 0 echoed call(s) and result(s) read, 0 echo(es) matched what flow ? streamed",
        ),
    ],
)
def test_the_evidence_line(evidence, expected):
    # mutants 1 (the reason not read), 6, 11, 12 (the flows), 19, 20, 21, 27, 28, 29 (the ids appended)
    assert evidence_line(evidence) == expected


# --- summary_line and _said: an HTTP error's status and what the provider said ------------------------------


@pytest.mark.parametrize(
    "body,kwargs,expected",
    [
        (
            b'{"error": {"message": "Rate limit reached", "type": "requests"}}',
            {"reason": "Too Many Requests", "content_type": "application/json", "streamed": True},
            "openai-chat (stream asked for): HTTP 429 Too Many Requests: Rate limit reached",
        ),
        (
            b"<html>\n<h1>502 Bad Gateway</h1>\n</html>",
            {"content_type": "text/html; charset=utf-8; q=1"},
            "openai-chat: HTTP 502: text/html body: <html>\\n<h1>502 Bad Gateway</h1>\\n</html>",
        ),
        (
            b"upstream gone",
            {"reason": "Service Unavailable"},
            "openai-chat: HTTP 503 Service Unavailable: no content type body: upstream gone",
        ),
    ],
    ids=["json", "html", "no-type"],
)
def test_an_http_errors_summary_says_its_status_and_what_came(body, kwargs, expected):
    # summary_line 29, 41, 45, 46, 49, 53, 55, 56, 59, 60, 65; _said 1, 2, 5, 6, 7, 10, 15, 17 to 24, 32 to 37
    status = int(expected.split("HTTP ")[1][:3])
    result = analyze_http_error(body, "openai-chat", status=status, **kwargs)
    assert summary_line(result) == expected + " | warning: http-error | incomplete"


def test_a_summary_counts_one_call_or_the_text_and_names_the_repairs():
    # mutants 70 ("1 calls"), 78, 82 (the text's length), 118 (the repairs left out)
    one = analyze_message(message(None, ["lookup"]), "openai-chat")
    assert summary_line(one) == "openai-chat gpt-test (not streamed): 1 call: lookup"
    text = analyze_message(message("hello"), "openai-chat")
    assert summary_line(text) == "openai-chat gpt-test (not streamed): no calls, 5 chars of text"
    streamed = analyze((DATA / "openai_chat_parallel.sse").read_bytes())
    streamed["rewrite"] = {"inject": ["interleave"], "repair": ["serialize"], "skipped": []}
    assert summary_line(streamed).endswith(" | rewritten: interleave, serialize")


# --- format_view and _side_by_side: a rule's calls beside the stream's -------------------------------------


def test_the_side_by_side_shows_same_and_different_calls_wrapped_and_the_stream_carried_more():
    # format_view 20, 28, 29, 33 (the stream's calls not shown); _side_by_side 3, 23, 24 (the cells cut
    # wrong), 48, 49, 64, 88, 89 (a shorter side raises), 51, 55, 91 (the right side blank), 59 (a same call
    # marked), 78, 83 (a cell's second line prefixed wrong)
    a, b = '{"path": "' + "a" * 60 + '"}', '{"path": "' + "b" * 60 + '"}'
    body = sse(
        tool_chunk(call(0, "call_a", "ls", "{}")),
        tool_chunk(call(1, "call_b", "read_file", a)),
        tool_chunk(call(1, "call_c", "stat", b)),  # the same index: index-only merges it into read_file
        chunk(choice(0, "tool_calls")),
    )
    view = format_view(analyze(body, strategies=["index-only"])).splitlines()
    start = view.index(f"{'index-only would build':58} | the stream carried")
    assert view[start + 1 :] == [
        f"{'-' * 58}-+-{'-' * 58}",
        f"{'  [0] ls {}':58} | ls {{}}",
        '≠ [1] read_file {"path": "' + "a" * 32 + ' | read_file {"path": "' + "a" * 38,
        "      " + "a" * 28 + '"}{"path": "' + "b" * 12 + " | " + "a" * 22 + '"}',
        "      " + "b" * 48 + '"}   | ',
        f"{'≠ [2] (no call)':58} | " + 'stat {"path": "' + "b" * 43,
        " " * 58 + " | " + "b" * 17 + '"}',
    ]


# --- ConnectionTally.line: a WebSocket connection's summary ------------------------------------------------


def test_a_connection_of_one_response_with_results_dropped_closed_by_the_client():
    # mutants 16 ("1 responses"), 27, 28 (the results dropped), 82, 86 (closed by the client said server)
    record = copy.deepcopy(_recorded(websocket_flow()))
    del record["responses"][1:]
    record["connection"].update(
        responses=1, results_dropped=2, closed={"code": 1011, "reason": "", "by_client": True}
    )
    assert connection_summary_line(record) == (
        "openai-responses websocket: 1 response (1 prewarm, 2 dropped), calls: - | closed 1011 by client"
    )
