"""What a response cost (accumulator/cost.py): the genai-prices library's own figure for the same tokens,
split into uncached input, cache reads and writes and output that add up to it; priced per response (tiers
apply per request); the provider by the request's URL, else by the format; as of the request's time; a
price file first; no cost, and a note saying why, where no price or no count is known. Every cost fits
the result schema."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from decimal import Decimal

import genai_prices
import pytest
from jsonschema import ValidationError
from jsonschema.validators import validator_for
from schemas import check_result
from streams import DATA, choice, chunk, named_sse, sse

from accumulator import RESULT_SCHEMA, analyze
from accumulator.cost import PriceFileError, Prices, parse_price_file

LIBRARY = f"genai-prices {genai_prices.__version__}"
_COST_SCHEMA = RESULT_SCHEMA["properties"]["cost"]
check_cost = validator_for(_COST_SCHEMA)(_COST_SCHEMA).validate

# One real stream of each format (tests/data), analysed once; each test takes a copy and sets its figures.
_STREAMS = {
    "openai-chat": "openai_chat_parallel.sse",
    "anthropic-messages": "anthropic_messages_parallel.sse",
    "gemini": "gemini_parallel.sse",
    "bedrock-converse": "bedrock_converse_parallel.bin",
    "cohere-v2": "cohere_v2_parallel.sse",
    "ollama-chat": "ollama_chat_parallel.ndjson",
}
_ANALYSED: dict[str, dict] = {}


def result_of(format: str, model=..., **figures) -> dict:
    """A real stream's result in this format, its model (``...``: as streamed) and usage figures set."""
    if format not in _ANALYSED:
        _ANALYSED[format] = analyze((DATA / _STREAMS[format]).read_bytes(), format)
    result = copy.deepcopy(_ANALYSED[format])
    if model is not ...:
        result["model"] = model
    result["usage"].update(figures)
    return result


def priced(result: dict, prices: Prices | None = None, **options) -> dict:
    """The result's cost, which must be known; it fits the schema, alone and in the whole result."""
    cost, note = (prices or Prices()).cost(result, **options)
    assert note is None and cost is not None
    check_cost(cost)
    check_result({**result, "cost": cost, "cost_note": ""})
    return cost


def unpriced(result: dict, prices: Prices | None = None, **options) -> str:
    """Why the result has no cost (a null cost, which fits the schema too)."""
    cost, note = (prices or Prices()).cost(result, **options)
    assert cost is None and isinstance(note, str) and note
    check_cost(cost)
    check_result({**result, "cost": None, "cost_note": note})
    return note


def library(model: str, *, when=None, **usage) -> genai_prices.types.PriceCalculation:
    """The library's own price for one request, by ``provider_id`` or ``provider_api_url`` in ``usage``."""
    where = {key: usage.pop(key) for key in ("provider_id", "provider_api_url") if key in usage}
    return genai_prices.calc_price(genai_prices.Usage(**usage), model, genai_request_timestamp=when, **where)


def usd(amount: Decimal) -> float:
    return pytest.approx(float(amount), rel=1e-12, abs=1e-15)


# (format, the model as the response names it, the model the library is asked for, provider, usage)
CASES = {
    "gpt-4o, cache read": (
        "openai-chat",
        "gpt-4o",
        "gpt-4o",
        "openai",
        {"input": 12_000, "output": 900, "cache_read": 4_096, "cache_write": None},
    ),
    "claude sonnet 4.5, cache read and write": (
        "anthropic-messages",
        "claude-sonnet-4-5-20250929",
        "claude-sonnet-4-5-20250929",
        "anthropic",
        {"input": 30_000, "output": 1_200, "cache_read": 20_000, "cache_write": 5_000},
    ),
    "gemini 2.5 pro named models/, a cache read past the tier": (
        "gemini",
        "models/gemini-2.5-pro",
        "gemini-2.5-pro",
        "google",
        {"input": 250_000, "output": 3_000, "cache_read": 50_000, "cache_write": None},
    ),
    "bedrock converse, a regional claude id": (
        "bedrock-converse",
        "us.anthropic.claude-sonnet-4-20250514-v1:0",
        "us.anthropic.claude-sonnet-4-20250514-v1:0",
        "aws",
        {"input": 8_000, "output": 600, "cache_read": 2_000, "cache_write": 1_000},
    ),
    "cohere command a": (
        "cohere-v2",
        "command-a-03-2025",
        "command-a-03-2025",
        "cohere",
        {"input": 61, "output": 33, "cache_read": 0, "cache_write": None},
    ),
}


def _library_for(case) -> genai_prices.types.PriceCalculation:
    _, _, model, provider, usage = case
    return library(
        model,
        provider_id=provider,
        input_tokens=usage["input"],
        output_tokens=usage["output"],
        cache_read_tokens=usage["cache_read"] or None,
        cache_write_tokens=usage["cache_write"] or None,
    )


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_the_cost_is_the_librarys_own_figure_for_the_same_tokens(case):
    format, named, _, provider, usage = case
    expected = _library_for(case)
    cost = priced(result_of(format, named, **usage))
    assert cost["total"] == usd(expected.total_price)
    assert cost["output"] == usd(expected.output_price)
    assert cost["input"] + cost["cache_read"] + cost["cache_write"] == usd(expected.input_price)
    assert cost["currency"] == "USD"
    assert cost["price"]["source"] == LIBRARY
    assert (cost["price"]["provider"], cost["price"]["model"]) == (expected.provider.id, expected.model.id)
    assert cost["price"]["provider"] == provider


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_the_parts_add_up_to_the_librarys_input_price_and_to_the_total(case):
    format, named, _, _, usage = case
    expected = _library_for(case)
    cost = priced(result_of(format, named, **usage))
    parts = (cost["input"], cost["cache_read"], cost["cache_write"], cost["output"])
    assert all(part >= 0 for part in parts)
    assert cost["input"] + cost["cache_read"] + cost["cache_write"] == usd(expected.input_price)
    assert cost["total"] == pytest.approx(sum(parts), rel=1e-12)
    # A count of cached tokens is priced as such, never as uncached input too.
    if usage["cache_read"]:
        assert cost["cache_read"] > 0 and cost["input"] < float(expected.input_price)
    if usage["cache_write"]:
        assert cost["cache_write"] > 0


def test_the_parts_are_the_tokens_times_the_price_per_million():
    """Figured by hand from the published prices: gpt-4o $2.50 input, $1.25 cached, $10 output; Claude
    Sonnet 4.5 $3 input, $0.30 cache read, $3.75 cache write, $15 output (below its 200,000-token tier)."""
    gpt = priced(
        result_of("openai-chat", "gpt-4o", input=1_000, output=500, cache_read=200, cache_write=None)
    )
    assert gpt["input"] == pytest.approx(800 * 2.5 / 1e6)
    assert gpt["cache_read"] == pytest.approx(200 * 1.25 / 1e6)
    assert gpt["cache_write"] == 0.0
    assert gpt["output"] == pytest.approx(500 * 10 / 1e6)
    assert gpt["total"] == pytest.approx(0.00725)
    assert gpt["price"]["per_million"] == {
        "input": 2.5,
        "output": 10.0,
        "cache_read": 1.25,
        "cache_write": None,
    }

    claude = priced(
        result_of(
            "anthropic-messages",
            "claude-sonnet-4-5-20250929",
            input=1_000,
            output=500,
            cache_read=100,
            cache_write=50,
        )
    )
    assert claude["input"] == pytest.approx(850 * 3 / 1e6)
    assert claude["cache_read"] == pytest.approx(100 * 0.3 / 1e6)
    assert claude["cache_write"] == pytest.approx(50 * 3.75 / 1e6)
    assert claude["output"] == pytest.approx(500 * 15 / 1e6)
    assert claude["total"] == pytest.approx(0.0102675)
    # Tiered by the request's input: the base price and where each tier starts.
    assert claude["price"]["per_million"]["input"] == {
        "base": 3.0,
        "tiers": [{"start": 200_000, "price": 6.0}],
    }


def test_tiers_apply_per_request_so_a_session_is_the_sum_of_its_responses_costs():
    """Gemini 2.5 Pro: $1.25 per million input tokens up to 200,000 in one request, $2.50 past it. One
    request of 300,000 costs $0.78; two of 150,000 cost $0.395 together, for the same tokens."""
    big = result_of("gemini", "models/gemini-2.5-pro", input=300_000, output=2_000, cache_read=None)
    small = result_of("gemini", "models/gemini-2.5-pro", input=150_000, output=1_000, cache_read=None)
    one = priced(big)
    each = priced(small)
    assert one["total"] == usd(
        library("gemini-2.5-pro", provider_id="google", input_tokens=300_000, output_tokens=2_000).total_price
    )
    assert each["total"] == usd(
        library("gemini-2.5-pro", provider_id="google", input_tokens=150_000, output_tokens=1_000).total_price
    )
    assert one["total"] == pytest.approx(0.78)
    assert each["total"] * 2 == pytest.approx(0.395)
    # The same tokens: the summed usage of the two small requests is the big one's.
    summed = genai_prices.Usage(input_tokens=150_000, output_tokens=1_000) + genai_prices.Usage(
        input_tokens=150_000, output_tokens=1_000
    )
    assert (summed.input_tokens, summed.output_tokens) == (300_000, 2_000)
    price_of_summed = float(
        genai_prices.calc_price(summed, "gemini-2.5-pro", provider_id="google").total_price
    )
    assert price_of_summed == pytest.approx(one["total"])
    assert each["total"] + each["total"] != pytest.approx(price_of_summed)
    assert one["total"] / 302_000 > each["total"] / 151_000  # more per token in the one big request


def test_a_price_tiered_by_input_prices_the_cache_read_by_the_whole_input():
    """Past 200,000 input tokens every Gemini 2.5 Pro price doubles, the cache read's too: the tier is set
    by the request's whole input, not by the cached part alone."""
    cost = priced(result_of("gemini", "models/gemini-2.5-pro", input=250_000, output=0, cache_read=50_000))
    assert cost["cache_read"] == pytest.approx(50_000 * 0.25 / 1e6)
    assert cost["input"] == pytest.approx(200_000 * 2.5 / 1e6)


def test_the_url_chooses_the_provider_else_the_format_does():
    result = result_of("openai-chat", "gpt-4o", input=1_000, output=500, cache_read=200)
    azure = "https://x.openai.azure.com/openai/deployments/d/chat/completions?api-version=2024-10-21"
    on_azure = priced(result, url=azure)
    assert on_azure["price"]["provider"] == "azure"
    expected = library(
        "gpt-4o",
        provider_api_url="https://x.openai.azure.com/openai/deployments/d/chat/completions",
        input_tokens=1_000,
        output_tokens=500,
        cache_read_tokens=200,
    )
    assert expected.provider.id == "azure" and on_azure["total"] == usd(expected.total_price)
    # A host the library does not know (a local gateway): the format's provider.
    local = priced(result, url="http://127.0.0.1:8080/v1/chat/completions")
    assert local["price"]["provider"] == "openai"
    assert priced(result)["price"]["provider"] == "openai"
    # OpenRouter speaks OpenAI's format and names other providers' models.
    routed = result_of("openai-chat", "anthropic/claude-sonnet-4.5", input=1_000, output=500, cache_read=0)
    assert (
        priced(routed, url="https://openrouter.ai/api/v1/chat/completions")["price"]["provider"]
        == "openrouter"
    )
    assert "knows no price for model 'anthropic/claude-sonnet-4.5' (openai)" in unpriced(routed)


def test_the_price_is_the_one_of_the_requests_time():
    """o3's price fell in 2025: 1M input and 1M output tokens cost $50 on 2025-01-01 and $10 on 2025-07-01."""
    result = result_of("openai-chat", "o3", input=1_000_000, output=1_000_000, cache_read=0)
    totals = {}
    for when in (datetime(2025, 1, 1, tzinfo=UTC), datetime(2025, 7, 1, tzinfo=UTC)):
        cost = priced(result, when=when)
        expected = library(
            "o3", when=when, provider_id="openai", input_tokens=1_000_000, output_tokens=1_000_000
        )
        assert cost["total"] == usd(expected.total_price)
        assert cost["price"]["as_of"] == when.isoformat()
        totals[when.month] = cost["total"]
    assert totals == {1: pytest.approx(50.0), 7: pytest.approx(10.0)}
    # No time given: now, with its offset.
    now = datetime.fromisoformat(priced(result)["price"]["as_of"])
    assert now.tzinfo is not None and abs((now - datetime.now(UTC)).total_seconds()) < 60


def test_a_model_the_library_does_not_know_has_no_cost_and_a_note_saying_a_price_file_can_give_one():
    note = unpriced(result_of("openai-chat", "my-finetune-7", input=10, output=5))
    assert note == f"{LIBRARY} knows no price for model 'my-finetune-7' (openai); a price file can give one"


def test_a_model_the_library_does_not_know_is_looked_up_once_per_url_and_provider(monkeypatch):
    # The library's search for a model it lacks walks every model of the provider (~70-90 us): a proxy
    # of a local or custom model would pay it on every response. The answer depends on the model, where
    # the request went and the provider alone, so each Prices asks once (a bounded memory of them).
    from accumulator import cost as cost_module

    asked = []
    real = cost_module.calc_price
    monkeypatch.setattr(
        cost_module, "calc_price", lambda *args, **kwargs: asked.append(args[1]) or real(*args, **kwargs)
    )
    prices = Prices()
    custom = result_of("openai-chat", "my-finetune-7", input=10, output=5)
    gateway = "http://127.0.0.1:8080/v1/chat/completions"
    first = unpriced(custom, prices, url=gateway + "?key=one")
    assert len(asked) == 2  # by the URL's host (unknown), then by the format's provider
    assert unpriced(custom, prices, url=gateway + "?key=two") == first and len(asked) == 2
    unpriced(custom, prices)  # no URL: another question (by the format's provider alone)
    unpriced(custom, Prices(), url=gateway)  # another Prices: asks for itself
    assert len(asked) == 5
    # A model it knows is priced each time, tokens and all.
    known = result_of("openai-chat", "gpt-4o", input=1_000, output=500, cache_read=0)
    assert priced(known, prices, url=gateway)["total"] > 0 and priced(known, prices, url=gateway)
    assert asked[5:] == ["gpt-4o"] * 4  # twice each: the gateway's host is unknown, then the provider
    # Bounded: the oldest is asked about again once UNKNOWN_KEPT newer ones came.
    for n in range(cost_module.UNKNOWN_KEPT):
        unpriced(result_of("openai-chat", f"my-model-{n}", input=1, output=1), prices)
    before = len(asked)
    unpriced(custom, prices, url=gateway)
    assert len(asked) == before + 2


def test_a_local_ollama_model_has_no_cost_and_a_note_saying_so():
    result = result_of("ollama-chat")
    assert result["model"] == "qwen3:8b" and result["usage"]["input"] == 152
    note = unpriced(result)
    assert "'qwen3:8b'" in note and "ollama-chat serves local models" in note and "a price file" in note


def test_a_response_without_counts_has_no_cost_and_the_note_says_why():
    # A Chat Completions stream without a usage chunk (the client did not ask for it).
    no_usage = analyze(sse(chunk(choice(0, "stop", content="hi"), model="gpt-4o")), "openai-chat")
    assert no_usage["model"] == "gpt-4o" and no_usage["usage"]["output"] is None
    assert unpriced(no_usage) == "no input or output token count (the provider sent no usage)"
    # A Responses stream whose usage has an input count and no output count.
    response = {"id": "resp_1", "model": "gpt-4o", "status": "completed", "usage": {"input_tokens": 9}}
    no_output = analyze(named_sse(("response.completed", {"response": response})), "openai-responses")
    assert no_output["usage"]["input"] == 9 and no_output["usage"]["output"] is None
    assert unpriced(no_output) == "no output token count (no output count in the provider's usage)"
    # Counts only: an output of 0 is a count, and priced.
    assert priced(result_of("openai-chat", "gpt-4o", input=10, output=0, cache_read=0))["output"] == 0.0


def test_counts_the_library_refuses_give_no_cost_and_its_reason():
    note = unpriced(result_of("openai-chat", "gpt-4o", input=10, output=5, cache_read=100))
    assert note.startswith(f"{LIBRARY} refused the counts: ") and "cannot exceed input_tokens" in note


def test_the_model_comes_from_the_response_else_from_the_request_and_loses_geminis_prefix():
    # Cohere's stream names no model: the requested one is priced.
    cohere = result_of("cohere-v2")
    assert cohere["model"] is None
    assert unpriced(cohere) == "the response names no model"
    assert priced(cohere, model="command-a-03-2025")["price"]["model"] == "command-a"
    assert unpriced(result_of("cohere-v2", "  ")) == "the response names no model"
    # The response's model wins over the requested one (it is the billed model).
    openai = result_of("openai-chat")
    assert openai["model"] == "gpt-4.1-2025-04-14"
    assert priced(openai, model="gpt-4o")["price"]["model"] == "gpt-4.1"
    # Gemini's models/ prefix goes, from the response's model and from the requested one.
    gemini = result_of("gemini", "models/gemini-2.5-pro")
    assert priced(gemini)["price"]["model"] == "gemini-2.5-pro"
    assert (
        priced(result_of("gemini", None), model="models/gemini-2.5-pro")["price"]["model"] == "gemini-2.5-pro"
    )
    assert priced(result_of("gemini"))["price"]["model"] == "gemini-3-flash-preview"  # as streamed


# --- a price file ---------------------------------------------------------------------------------------


def test_a_price_file_overrides_the_library_for_the_models_it_names():
    overrides = parse_price_file(
        b'{"gpt-4o": {"input_mtok": 1, "output_mtok": 2, "cache_read_mtok": 0.5}}', "/etc/prices.json"
    )
    prices = Prices(overrides, source="/etc/prices.json")
    result = result_of("openai-chat", "gpt-4o", input=1_000, output=500, cache_read=200)
    cost = priced(result, prices, url="https://x.openai.azure.com/openai/deployments/d/chat/completions")
    assert cost["input"] == pytest.approx(800 * 1 / 1e6)
    assert cost["cache_read"] == pytest.approx(200 * 0.5 / 1e6)
    assert cost["output"] == pytest.approx(500 * 2 / 1e6)
    assert cost["total"] == pytest.approx(0.0019)
    assert cost["price"] == {
        "source": "price file /etc/prices.json",
        "provider": None,
        "model": "gpt-4o",
        "as_of": None,
        "per_million": {"input": 1.0, "output": 2.0, "cache_read": 0.5, "cache_write": None},
    }
    assert cost["total"] != pytest.approx(priced(result)["total"])  # the library's differs
    # A model the file does not name: the library's price.
    other = priced(result_of("openai-chat", "gpt-4.1", input=1_000, output=500, cache_read=0), prices)
    assert other["price"]["source"] == LIBRARY


def test_a_price_file_prices_local_and_unknown_models_and_matches_geminis_name_without_prefix():
    prices = Prices(
        parse_price_file(
            b'{"qwen3:8b": {"input_mtok": 0, "output_mtok": 0},'
            b' "gemini-x": {"input_mtok": 2, "output_mtok": 4, "cache_read_mtok": 1, "cache_write_mtok": 3}}',
            "p.json",
        ),
        source="p.json",
    )
    local = priced(result_of("ollama-chat"), prices)
    assert (local["total"], local["price"]["model"], local["price"]["source"]) == (
        0.0,
        "qwen3:8b",
        "price file p.json",
    )
    gemini = priced(result_of("gemini", "models/gemini-x", input=1_000, output=100, cache_read=300), prices)
    assert gemini["price"]["model"] == "gemini-x"
    assert (gemini["input"], gemini["cache_read"], gemini["output"]) == pytest.approx(
        (0.0014, 0.0003, 0.0004)
    )
    claude = priced(
        result_of("anthropic-messages", "gemini-x", input=1_000, output=0, cache_read=100, cache_write=200),
        prices,
    )
    assert (claude["input"], claude["cache_read"], claude["cache_write"]) == pytest.approx(
        (0.0014, 0.0001, 0.0006)
    )
    assert claude["total"] == pytest.approx(0.0021)


def test_a_price_file_without_a_source_says_price_file():
    prices = Prices(parse_price_file(b'{"gpt-4o": {"input_mtok": 1, "output_mtok": 1}}', "x"))
    assert (
        priced(result_of("openai-chat", "gpt-4o", input=1, output=1), prices)["price"]["source"]
        == "price file"
    )


KNOWN = "input_mtok, output_mtok, cache_read_mtok, cache_write_mtok"


@pytest.mark.parametrize(
    "content, message",
    [
        (b'{"m": ', "prices.json is not JSON: "),
        (b"", "prices.json is not JSON: "),
        (b"[]", "prices.json: expected an object of model name -> prices"),
        (b'"gpt-4o"', "prices.json: expected an object of model name -> prices"),
        (b'{"m": 3}', f"prices.json: 'm': expected an object of {KNOWN}"),
        (b'{"m": [1, 2]}', f"prices.json: 'm': expected an object of {KNOWN}"),
        (
            b'{"m": {"input_mtok": 1, "output_mtok": 2, "per_request": 1, "audio_mtok": 3}}',
            f"prices.json: 'm': unknown key(s) audio_mtok, per_request; known: {KNOWN}",
        ),
        (b'{"m": {"input_mtok": 1}}', "prices.json: 'm': output_mtok missing"),
        (b'{"m": {"output_mtok": 1}}', "prices.json: 'm': input_mtok missing"),
        (b'{"m": {}}', "prices.json: 'm': input_mtok and output_mtok missing"),
        (
            b'{"m": {"input_mtok": -1, "output_mtok": 2}}',
            "prices.json: 'm': input_mtok is -1, not a price (a number of at least 0)",
        ),
        (
            b'{"m": {"input_mtok": 1, "output_mtok": 2, "cache_read_mtok": -0.5}}',
            "prices.json: 'm': cache_read_mtok is -0.5, not a price (a number of at least 0)",
        ),
        (
            b'{"m": {"input_mtok": "3", "output_mtok": 2}}',
            "prices.json: 'm': input_mtok is '3', not a price (a number of at least 0)",
        ),
        (
            b'{"m": {"input_mtok": 1, "output_mtok": true}}',
            "prices.json: 'm': output_mtok is True, not a price (a number of at least 0)",
        ),
        (
            b'{"m": {"input_mtok": 1, "output_mtok": null}}',
            "prices.json: 'm': output_mtok is None, not a price (a number of at least 0)",
        ),
    ],
    ids=[
        "truncated",
        "empty",
        "a list",
        "a string",
        "prices a number",
        "prices a list",
        "unknown keys",
        "no output",
        "no input",
        "neither",
        "negative",
        "negative cache read",
        "a string price",
        "a boolean price",
        "a null price",
    ],
)
def test_a_wrong_price_file_raises_a_message_naming_the_file_and_the_problem(content, message):
    with pytest.raises(PriceFileError) as raised:
        parse_price_file(content, "prices.json")
    if message.endswith(": "):  # the JSON decoder's own words follow
        assert str(raised.value).startswith(message)
    else:
        assert str(raised.value) == message
    assert isinstance(raised.value, ValueError)


def test_a_price_file_takes_whole_and_decimal_numbers_and_zero():
    parsed = parse_price_file(
        b'{"a": {"input_mtok": 0, "output_mtok": 15, "cache_read_mtok": 0.3, "cache_write_mtok": 3.75}, "b":'
        b' {"input_mtok": 1e-3, "output_mtok": 2}}',
        "p.json",
    )
    assert set(parsed) == {"a", "b"}
    assert (parsed["a"].input_mtok, parsed["a"].output_mtok) == (Decimal(0), Decimal(15))
    assert (parsed["a"].cache_read_mtok, parsed["a"].cache_write_mtok) == (Decimal("0.3"), Decimal("3.75"))
    assert parsed["b"].input_mtok == Decimal("0.001") and parsed["b"].cache_read_mtok is None
    assert parse_price_file(b"{}", "p.json") == {}


# --- the schema -----------------------------------------------------------------------------------------


def test_every_cost_fits_the_result_schemas_cost():
    """``priced`` and ``unpriced`` check every cost the tests above make; these are the shapes at once:
    a flat and a tiered price, a price file's, no cost. And the schema is strict: a cost with a part
    missing, a negative part or another currency does not fit."""
    costs = [priced(result_of(format, named, **usage)) for format, named, _, _, usage in CASES.values()]
    costs.append(
        priced(
            result_of("openai-chat", "gpt-4o", input=1, output=1),
            Prices(parse_price_file(b'{"gpt-4o": {"input_mtok": 1, "output_mtok": 1}}', "p.json"), "p.json"),
        )
    )
    for cost in [*costs, None]:
        check_cost(cost)
    assert isinstance(costs[2]["price"]["per_million"]["input"], dict)  # gemini 2.5 pro: tiered
    assert isinstance(costs[0]["price"]["per_million"]["input"], float)  # gpt-4o: flat
    cost = costs[0]
    for broken in (
        {k: v for k, v in cost.items() if k != "cache_write"},
        {**cost, "input": -0.1},
        {**cost, "currency": "EUR"},
        {**cost, "extra": 1},
        {**cost, "price": {k: v for k, v in cost["price"].items() if k != "as_of"}},
    ):
        with pytest.raises(ValidationError):
            check_cost(broken)
