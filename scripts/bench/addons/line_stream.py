"""A reference proxy of the benchmark: the identity callable, and at each response what the addon shows of
every flow, without an analysis: a result in the flow's metadata, a comment, and one log line as the addon
writes it (``toolcall_lens.loglines``: a record each at a human pace, shared records under load; the URL
built as the addon builds it, its beginning kept by host). The least
any addon that tells each flow in mitmproxy's log costs (mitmproxy hands each record to its terminal log
and, as a hook, to every addon).

    mitmdump -s scripts/bench/addons/line_stream.py --mode reverse:http://127.0.0.1:PORT
"""

import logging

from mitmproxy import http

from toolcall_lens.loglines import LogLines, pretty_url

logger = logging.getLogger("line_stream")
LINE = "2 calls: get_weather({...}), get_time({...}); ok"


class LineStream:
    def __init__(self) -> None:
        self.lines = LogLines(logger)
        self.url_starts: dict[tuple[str, str], str] = {}

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        flow.response.stream = lambda chunk: chunk

    def response(self, flow: http.HTTPFlow) -> None:
        flow.metadata["line_stream"] = {"summary": LINE}
        flow.comment = LINE
        self.lines.say(
            [
                (
                    logging.INFO,
                    f"toolcall-lens {flow.request.method} {pretty_url(flow.request, self.url_starts)}: {LINE}",
                )
            ]
        )

    def done(self) -> None:
        self.lines.close()  # as the addon: what waits is written, later lines at once


addons = [LineStream()]
