"""toolcall-lens core: a sans-IO, identity-routed accumulator for streamed LLM responses.

    acc = StreamAccumulator("openai-chat", request=request_body)
    for chunk in chunks:
        acc.feed(chunk)
    result = acc.finish()          # a JSON-safe dict, see RESULT_SCHEMA

No I/O, no mitmproxy, no global state: bytes in, a result out, the same however the bytes are cut.
"""

from .detect import detect_format
from .dialects import DIALECTS
from .result import RESULT_SCHEMA
from .strategies import DEFAULT_STRATEGIES, STRATEGIES
from .stream import StreamAccumulator, analyze
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
    "detect_format",
]
