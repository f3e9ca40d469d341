"""toolcall-lens core: a sans-IO, identity-routed accumulator for streamed LLM responses.

    acc = StreamAccumulator("openai-chat", request=request_body)
    for chunk in chunks:
        acc.feed(chunk)
    result = acc.finish()          # a JSON-safe dict, see RESULT_SCHEMA

    exchange = classify(path=..., status=..., content_type=..., request=..., head=...)
    result = analyze_exchange(exchange, body, request=...)     # any front door, the same answer

No I/O, no mitmproxy, no global state: bytes in, a result out, the same however the bytes are cut.
"""

from . import formats
from .exchange import Exchange, analyze_exchange, classify, detect_format
from .formats import sniff_format
from .limits import DEFAULT_LIMITS, Limits
from .result import RESULT_SCHEMA, Result, add_warnings, failure_result
from .strategies import DEFAULT_STRATEGIES, STRATEGIES
from .stream import StreamAccumulator, analyze, analyze_http_error, analyze_message
from .warnings import CATALOGUE

FORMATS = tuple(formats.FORMATS)

__all__ = [
    "CATALOGUE",
    "DEFAULT_LIMITS",
    "DEFAULT_STRATEGIES",
    "FORMATS",
    "RESULT_SCHEMA",
    "STRATEGIES",
    "Exchange",
    "Limits",
    "Result",
    "StreamAccumulator",
    "add_warnings",
    "analyze",
    "analyze_exchange",
    "analyze_http_error",
    "analyze_message",
    "classify",
    "detect_format",
    "failure_result",
    "sniff_format",
]
