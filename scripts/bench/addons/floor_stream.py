"""A reference proxy of the benchmark: every response streamed through the floor's work (cut lines,
orjson.loads each data line), the least any analysis of the events must add.

    mitmdump -s scripts/bench/addons/floor_stream.py --mode reverse:http://127.0.0.1:PORT
"""

import orjson
from mitmproxy import http


class FloorStream:
    def responseheaders(self, flow: http.HTTPFlow) -> None:
        carry = [b""]

        def stream(chunk: bytes) -> bytes:
            lines = (carry[0] + chunk).split(b"\n")
            carry[0] = lines.pop()
            for line in lines:
                if line.startswith(b"data: ") and line != b"data: [DONE]":
                    orjson.loads(line[6:])
            return chunk

        flow.response.stream = stream


addons = [FloorStream()]
