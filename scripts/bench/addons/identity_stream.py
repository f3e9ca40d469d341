"""The comparison proxy of the benchmark: every response streamed through a callable that returns each chunk
as it is, the least a streaming addon can do.

    mitmdump -s scripts/bench/addons/identity_stream.py --mode reverse:http://127.0.0.1:PORT
"""

from mitmproxy import http


class IdentityStream:
    def responseheaders(self, flow: http.HTTPFlow) -> None:
        flow.response.stream = lambda chunk: chunk


addons = [IdentityStream()]
