"""toolcall-lens core: a sans-IO, identity-routed accumulator for streamed LLM responses.

    acc = StreamAccumulator("openai-chat", request=request_body)
    for chunk in chunks:
        acc.feed(chunk)
    result = acc.finish()          # a JSON-safe dict, see RESULT_SCHEMA

    exchange = classify(path=..., status=..., content_type=..., request=..., head=...)
    result = analyze_exchange(exchange, body, request=...)     # any front door, the same answer

    connection = Connection(websocket_format(path))   # one WebSocket connection (accumulator.websocket)
    for message in messages:
        settled = connection.message(from_client, content, is_text)   # results, one per response
    settled += connection.finish()

No I/O, no mitmproxy, no global state: bytes in, a result out, the same however the bytes are cut.
"""

from . import formats, stream
from .exchange import Exchange, analyze_exchange, classify, detect_format
from .formats import sniff_format, websocket_format
from .limits import DEFAULT_LIMITS, Limits
from .result import CONNECTION_SCHEMA, RESULT_SCHEMA, Result, add_warnings, failure_result
from .strategies import DEFAULT_STRATEGIES, STRATEGIES
from .stream import StreamAccumulator, analyze, analyze_http_error, analyze_message
from .warnings import CATALOGUE
from .websocket import Connection, connection_result

FORMATS = tuple(formats.FORMATS)
# Whether the compiled core runs (setup.py builds it with mypyc where it can): a compiled module is an
# extension module, not a source file. The results are the same either way.
COMPILED = not (stream.__file__ or "").endswith(".py")

__all__ = [
    "CATALOGUE",
    "COMPILED",
    "CONNECTION_SCHEMA",
    "DEFAULT_LIMITS",
    "DEFAULT_STRATEGIES",
    "FORMATS",
    "RESULT_SCHEMA",
    "STRATEGIES",
    "Connection",
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
    "connection_result",
    "detect_format",
    "failure_result",
    "sniff_format",
    "websocket_format",
]
