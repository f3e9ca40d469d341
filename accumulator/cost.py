"""What a response cost, from its normalised token counts (``result["usage"]``) and the model's price: a
price file's where it names the model, else the `genai-prices` library's (pinned; its bundled data
only, never updated behind the user's back).

Each response is priced on its own: some prices are tiered by the input of one request, so the cost of a
session is the sum of its responses' costs, never the price of their summed tokens. A model no price is
known for gets no cost, and a note says why (a missing price is not a free response).
"""

from __future__ import annotations

import math
from datetime import datetime
from decimal import Decimal, InvalidOperation
from importlib.metadata import version
from urllib.parse import urlsplit

import orjson
from genai_prices import Usage, calc_price
from genai_prices.types import ModelPrice, calc_unit_price

from . import formats

LIBRARY = f"genai-prices {version('genai-prices')}"
_MILLION = 1_000_000
UNKNOWN_KEPT = 256  # (model, URL, provider) remembered as unpriced, per ``Prices``
# A price file's keys: USD per million tokens of each kind.
PRICE_KEYS = ("input_mtok", "output_mtok", "cache_read_mtok", "cache_write_mtok")


class PriceFileError(ValueError):
    pass


def parse_price_file(content: bytes, path: str) -> dict[str, ModelPrice]:
    """A price file's content: a JSON object, model name -> ``{"input_mtok": 3, "output_mtok": 15,
    "cache_read_mtok": 0.3, "cache_write_mtok": 3.75}`` (USD per million tokens; input and output
    required). PriceFileError says what is wrong (``path`` names the file in it)."""
    try:
        data = orjson.loads(content)
    except orjson.JSONDecodeError as exc:
        raise PriceFileError(f"{path} is not JSON: {exc}") from None
    if type(data) is not dict:
        raise PriceFileError(f"{path}: expected an object of model name -> prices")
    return {model: _model_price(path, model, prices) for model, prices in data.items()}


def _model_price(path: str, model: str, prices) -> ModelPrice:
    if type(prices) is not dict:
        raise PriceFileError(f"{path}: {model!r}: expected an object of {', '.join(PRICE_KEYS)}")
    unknown = sorted(set(prices) - set(PRICE_KEYS))
    if unknown:
        raise PriceFileError(
            f"{path}: {model!r}: unknown key(s) {', '.join(unknown)}; known: {', '.join(PRICE_KEYS)}"
        )
    missing = [key for key in ("input_mtok", "output_mtok") if key not in prices]
    if missing:
        raise PriceFileError(f"{path}: {model!r}: {' and '.join(missing)} missing")
    values = {}
    for key, value in prices.items():
        try:
            number = Decimal(str(value)) if type(value) in (int, float) else None
        except InvalidOperation:
            number = None
        if number is None or not number.is_finite() or number < 0:
            raise PriceFileError(
                f"{path}: {model!r}: {key} is {value!r}, not a price (a number of at least 0)"
            )
        values[key] = number
    return ModelPrice(**values)


class Prices:
    """Prices responses: ``cost(result, ...)`` -> (the result's ``cost`` or None, why not)."""

    def __init__(
        self, overrides: dict[str, ModelPrice] | None = None, source: str = "", content: bytes | None = None
    ) -> None:
        self.overrides = overrides or {}
        self.source = source  # where the overrides came from (a path), for the result's price
        self.content = content  # the price file as read (an analysis worker parses it again)
        # (model, API URL, provider) the library knows no price for, newest last, at most UNKNOWN_KEPT: its
        # search for a model it lacks walks every model of the provider (~70-90 us a response, for every
        # response of a local or custom model), and its answer depends on nothing else.
        self._unknown: dict[tuple[str, str | None, str], None] = {}

    def cost(
        self,
        result: dict,
        *,
        url: str | None = None,
        when: datetime | None = None,
        model: str | None = None,
    ) -> tuple[dict | None, str | None]:
        """``url``: where the request went (the library knows providers by their API's host); ``when``:
        the request's time (prices change: a dump is priced as of its day); ``model``: the requested
        model, for a response that names none (Realtime, Cohere)."""
        try:
            return self._priced(result, url, when, model)
        except OverflowError:
            return None, "the cost of these counts at this price is too large to show"

    def _priced(
        self, result: dict, url: str | None, when: datetime | None, model: str | None
    ) -> tuple[dict | None, str | None]:
        name = _model_name(result.get("model") or model)
        if name is None:
            return None, "the response names no model"
        usage = result["usage"]
        missing = [key for key in ("input", "output") if usage[key] is None]
        if missing:
            return (
                None,
                f"no {' or '.join(missing)} token count ({'; '.join(usage['notes']) or 'not in the usage'})",
            )
        tokens = Usage(
            input_tokens=usage["input"],
            output_tokens=usage["output"],
            cache_read_tokens=usage["cache_read"] or None,
            cache_write_tokens=usage["cache_write"] or None,
        )
        override = self.overrides.get(name)
        if override is not None:
            price = {
                "source": f"price file {self.source}".strip(),
                "provider": None,
                "model": name,
                "as_of": None,
            }
            return _cost(override, override.calc_price(tokens), tokens, price), None
        provider = formats.get(result["format"]).provider  # where the URL names none the library knows
        if provider is None:
            return (
                None,
                f"no price for {name!r}: {result['format']} serves local models ({LIBRARY} has none); a price file can give one",
            )
        api_url = _api_url(url)
        unknown = (name, api_url, provider)
        try:
            if unknown in self._unknown:
                raise LookupError(name)
            found = _lookup(tokens, name, api_url, provider, when)
        except LookupError:
            self._unknown[unknown] = None
            if len(self._unknown) > UNKNOWN_KEPT:
                del self._unknown[next(iter(self._unknown))]
            return (
                None,
                f"{LIBRARY} knows no price for model {name!r} ({provider}); a price file can give one",
            )
        except ValueError as exc:
            return None, f"{LIBRARY} refused the counts: {exc}"
        price = {
            "source": LIBRARY,
            "provider": found.provider.id,
            "model": found.model.id,
            "as_of": (when or datetime.now().astimezone()).isoformat(),
        }
        amounts = {
            "input_price": found.input_price,
            "output_price": found.output_price,
            "total_price": found.total_price,
        }
        return _cost(found.model_price, amounts, tokens, price), None


def _api_url(url: str | None) -> str | None:
    """Where a request went, as the library knows providers by it: no query (an API key may be in it)."""
    if not url:
        return None
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path}"


def _lookup(tokens: Usage, name: str, api_url: str | None, provider: str, when: datetime | None):
    """The library's price calculation: by the URL's host first (OpenRouter, Azure, Groq speak the
    formats of others), else by the format's provider."""
    if api_url:
        try:
            return calc_price(
                tokens,
                name,
                provider_api_url=api_url,
                genai_request_timestamp=when,
            )
        except LookupError:
            pass  # a host it does not know (a local gateway): the format's provider
    return calc_price(tokens, name, provider_id=provider, genai_request_timestamp=when)


def _cost(model_price: ModelPrice, amounts, tokens: Usage, price: dict) -> dict:
    given = tokens.input_tokens or 0
    cache_read = calc_unit_price(
        getattr(model_price, "cache_read_mtok", None), tokens.cache_read_tokens, given, _MILLION
    )
    cache_write = calc_unit_price(
        getattr(model_price, "cache_write_mtok", None), tokens.cache_write_tokens, given, _MILLION
    )
    price["per_million"] = {
        key.removesuffix("_mtok"): _per_million(getattr(model_price, key, None)) for key in PRICE_KEYS
    }
    return {
        "total": _usd(amounts["total_price"]),
        "currency": "USD",
        "input": _usd(amounts["input_price"] - cache_read - cache_write),
        "output": _usd(amounts["output_price"]),
        "cache_read": _usd(cache_read),
        "cache_write": _usd(cache_write),
        "price": price,
    }


def _per_million(value) -> float | dict | None:
    if value is None:
        return None
    if isinstance(value, Decimal):
        return _usd(value)
    # Tiered by the request's input: the base price and where each tier starts.
    return {
        "base": _usd(value.base),
        "tiers": [{"start": t.start, "price": _usd(t.price)} for t in value.tiers],
    }


def _usd(amount: Decimal) -> float:
    value = float(amount)
    if not math.isfinite(value):  # not 0: a cost not shown is never a free response
        raise OverflowError("an amount too large for a number")
    return value


def _model_name(model) -> str | None:
    """The model as the price tables name it: Gemini's ``models/`` prefix goes."""
    if type(model) is not str or not model.strip():
        return None
    return model.strip().removeprefix("models/")
