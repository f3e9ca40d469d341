"""A reference proxy of the benchmark: every response streamed through the core alone, as the addon feeds it
(a ``StreamAccumulator`` for Chat Completions, every chunk fed with a clock reading, finished at the end) and
nothing else of the addon: no body kept, no record, no log line. Beside the identity callable it tells
what the core costs inside mitmdump. At the end it prints what the garbage collector cost meanwhile.

    mitmdump -s scripts/bench/addons/core_stream.py --mode reverse:http://127.0.0.1:PORT
"""

import gc
import time

from mitmproxy import http

from accumulator import StreamAccumulator


class CoreStream:
    def __init__(self) -> None:
        self.chunks = 0
        self.collections = [0, 0, 0]  # by generation
        self.gc_seconds = 0.0
        self._gc_start = 0.0
        gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter()
        else:
            self.gc_seconds += time.perf_counter() - self._gc_start
            self.collections[info["generation"]] += 1

    def done(self) -> None:
        print(
            f"core_stream gc: {self.chunks} chunks, collections by generation {self.collections}, "
            f"{self.gc_seconds * 1e6 / max(self.chunks, 1):.2f} us per chunk",
            flush=True,
        )

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        accumulator = StreamAccumulator("openai-chat", started_at=flow.request.timestamp_start)
        feed = accumulator.feed

        def stream(chunk: bytes) -> bytes:
            self.chunks += 1
            if chunk:
                feed(chunk, time.time())
            else:
                accumulator.finish(time.time())
            return chunk

        flow.response.stream = stream


addons = [CoreStream()]
