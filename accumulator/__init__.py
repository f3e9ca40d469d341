"""toolcall-lens core: a sans-IO, identity-routed accumulator for streamed LLM responses.

    acc = StreamAccumulator("openai-chat", request=request_body)
    for chunk in chunks:
        acc.feed(chunk)
    result = acc.finish()          # a JSON-safe dict, see RESULT_SCHEMA

No I/O, no mitmproxy, no global state: bytes in, a result out, the same however the bytes are cut.
"""

from .detect import classify_exchange, detect_format, sniff_format
from .dialects import DIALECTS
from .result import RESULT_SCHEMA, failure_result
from .strategies import DEFAULT_STRATEGIES, STRATEGIES
from .stream import StreamAccumulator, analyze, analyze_http_error, analyze_message
from .warnings import CATALOGUE

FORMATS = tuple(DIALECTS)

__all__ = [
    "CATALOGUE",
    "DEFAULT_STRATEGIES",
    "FORMATS",
    "RESULT_SCHEMA",
    "STRATEGIES",
    "StreamAccumulator",
    "analyze",
    "analyze_http_error",
    "analyze_message",
    "classify_exchange",
    "detect_format",
    "failure_result",
    "sniff_format",
]
