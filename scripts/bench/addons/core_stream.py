"""A reference proxy of the benchmark: every response streamed through the core alone, as the addon feeds it
(a ``StreamAccumulator`` for Chat Completions, every chunk fed with a clock reading, finished at the end) and
nothing else of the addon: no body kept, no record, no log line. Beside the identity callable it tells
what the core costs inside mitmdump.

    mitmdump -s scripts/bench/addons/core_stream.py --mode reverse:http://127.0.0.1:PORT
"""

import time

from mitmproxy import http

from accumulator import StreamAccumulator


class CoreStream:
    def responseheaders(self, flow: http.HTTPFlow) -> None:
        accumulator = StreamAccumulator("openai-chat", started_at=flow.request.timestamp_start)
        feed = accumulator.feed

        def stream(chunk: bytes) -> bytes:
            if chunk:
                feed(chunk, time.time())
            else:
                accumulator.finish(time.time())
            return chunk

        flow.response.stream = stream


addons = [CoreStream()]
