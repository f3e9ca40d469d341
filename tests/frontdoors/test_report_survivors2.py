"""The CLI's report and the content view: what a mutation run found untested (the logic survivors of
``accumulator/report.py`` that ``test_report_survivors.py`` left: the session, evidence, timing and rewrite
lines, the tokens and the cost; see docs/mutation.md). Each test was checked by applying the mutation it
guards against to the source by hand and seeing it fail."""

from __future__ import annotations

import json

import pytest
from chat_flows import chat_stream, follow_up, through_addon
from mitmproxy import contentviews
from streams import named_sse
from test_report_survivors import lines_of

from accumulator import StreamAccumulator, analyze
from accumulator.cli import main
from accumulator.report import summary_line

SEARCH = ("call_1", "search", '{"q": "rbi"}')


def report_of(path, capsys, *options: str) -> list[str]:
    main([str(path), *options])
    return capsys.readouterr().out.splitlines()


def line(lines: list[str], start: str) -> str:
    (found,) = [text for text in lines if text.startswith(start)]
    return found


# --- format_report: the session, the evidence, the timing, a rewrite that failed ----------------------------


def test_the_content_view_of_a_follow_up_turn_names_its_session_and_the_echoes_it_checked(lens):
    # format_report 189 (the session line never shown), 254 (the evidence line never shown)
    headers = {"x-session-id": "ses_1"}
    first = through_addon(lens, chat_stream([SEARCH]), follow_up([]), headers)
    second = through_addon(lens, chat_stream([]), follow_up([[SEARCH]]), headers)
    shown = contentviews.prettify_message(second.response, second).text.splitlines()
    assert "session: ses_1, turn 2 (header x-session-id)" in shown
    assert (
        f"evidence: 2 echoed call(s) and result(s) read, 1 echo(es) matched what flow {first.id} streamed"
    ) in shown


def test_the_timing_of_a_result_that_names_no_source_has_no_parenthesis():
    # format_report 241 ("timing (None): ")
    accumulator = StreamAccumulator("openai-chat", started_at=100.0)
    accumulator.feed(chat_stream([]), now=100.5)
    lines = lines_of(accumulator.finish(now=101.0))
    assert "timing: first byte 0.500s, first event 0.500s, total 1.000s" in lines


def test_a_rewrite_that_failed_says_so_and_a_rewrite_entry_of_an_older_version_does_not_break_the_report():
    # format_report 279, 281, 289, 291, 302, 304 (no default for a missing list: the report raises). An
    # earlier addon recorded only {"failure": ...} when the rewriter's report itself failed.
    result = analyze(chat_stream([SEARCH]))
    result["rewrite"] = {"failure": "RuntimeError: boom"}
    assert lines_of(result)[-1] == (
        "rewritten: injected -, repaired -; FAILED: RuntimeError: boom (the rest passed as it came)"
    )
    assert summary_line(result).endswith("| rewritten: nothing applied (FAILED)")


# --- tokens_line ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "usage,expected",
    [
        (None, "tokens: unknown (the provider sent no usage)"),
        ({"prompt_tokens": 12}, "tokens: input 12; no output count in the provider's usage"),
        ({"prompt_tokens": 12, "completion_tokens": 5}, "tokens: input 12, output 5"),
        (
            {
                "prompt_tokens": 12,
                "completion_tokens": 80,
                "completion_tokens_details": {"reasoning_tokens": 64},
            },
            "tokens: input 12, output 80 (reasoning 64)",
        ),
    ],
    ids=["no-usage", "input-only", "no-cache-no-reasoning", "reasoning"],
)
def test_the_tokens_line_says_what_is_known_and_why_the_rest_is_not(usage, expected):
    # tokens_line 2, 5 (an input alone taken for unknown), 8 (nothing known taken for known), 13 (the notes
    # left out), 40 (" ()" for no cached tokens), 47, 49 (a reasoning of None or 0 shown), 48 (never shown)
    assert line(lines_of(analyze(chat_stream([], usage=usage))), "tokens: ") == expected


# --- cost_line --------------------------------------------------------------------------------------------


def test_an_unpriced_model_says_why_it_has_no_cost(tmp_path, capsys):
    # cost_line 6, 7 (the note replaced by "not priced" or None)
    capture = tmp_path / "body.sse"
    capture.write_bytes(chat_stream([], model="house-model-7"))
    main([str(capture), "--json"])
    note = json.loads(capsys.readouterr().out)["results"][0]["cost_note"]
    assert "house-model-7" in note
    assert line(report_of(capture, capsys), "cost: ") == f"cost: unknown ({note})"


def anthropic_stream(usage: dict) -> bytes:
    start = {"id": "msg_1", "model": "claude-test", "content": [], "usage": usage}
    return named_sse(
        ("message_start", {"type": "message_start", "message": start}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}}),
        ("message_stop", {"type": "message_stop"}),
    )


@pytest.mark.parametrize(
    "usage,expected",
    [
        (
            {"input_tokens": 1000, "output_tokens": 100},
            "cost: $0.004500 (input $0.003000, output $0.001500",
        ),
        (
            {"input_tokens": 1000, "cache_read_input_tokens": 10000, "output_tokens": 100},
            "cost: $0.007500 (input $0.003000, output $0.001500, cache read $0.003000",
        ),
        (
            {"input_tokens": 1000, "cache_creation_input_tokens": 1000, "output_tokens": 100},
            "cost: $0.008250 (input $0.003000, output $0.001500, cache write $0.003750",
        ),
    ],
    ids=["no-cache", "cache-read", "cache-write"],
)
def test_the_cost_line_shows_the_cache_parts_that_cost_something_and_a_price_files_missing_provider(
    usage, expected, tmp_path, capsys
):
    # cost_line 24, 25, 31, 32 (a cache part never or always shown), 40 (the price file's provider not "-")
    prices = tmp_path / "prices.json"
    prices.write_text(
        '{"claude-test": {"input_mtok": 3, "output_mtok": 15, "cache_read_mtok": 0.3, "cache_write_mtok": 3.75}}'
    )
    capture = tmp_path / "body.sse"
    capture.write_bytes(anthropic_stream(usage))
    shown = line(report_of(capture, capsys, "--prices", str(prices)), "cost: ")
    assert shown == f"{expected}; price file {prices}: - claude-test)"
