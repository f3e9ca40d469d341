"""The addon's line a flow in mitmproxy's log, and the URL it names (``pretty_url``).

While flows end at a human pace, each flow's line is a log record of its own, written as the flow is
annotated. When they end faster (more than ``BURST`` records within ``WINDOW`` seconds), the lines that
come later in the window wait for its end and go together: a line each, one record per level (the
warnings', the others'), each in the order its lines came. A line waits ``WINDOW`` at most; ``close`` (the addon's ``done``) writes what waits,
and every line at once from then on (the proxy's loop may stop before a window's end).

Why: mitmproxy hands every record to its terminal log and, as the deprecated ``add_log`` hook, to every
addon of the proxy. Under load that costs the proxy more than the rest of telling a short flow
(docs/performance.md, "The analysis worker").
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Callable

from mitmproxy import http
from mitmproxy.net.http import url as urls

WINDOW = 0.1  # seconds
BURST = 4  # records a window before lines wait for its end
URL_HOSTS = 256  # (scheme, Host header) pairs whose URL beginning a proxy remembers (``pretty_url``)


class LogLines:
    def __init__(
        self,
        logger: logging.Logger,
        burst: int = BURST,
        window: float = WINDOW,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.burst = burst
        self.window = window
        self.clock = clock
        self._start = float("-inf")  # when the current window began
        self._written = 0  # records written in it
        self._waiting: list[tuple[int, str]] = []
        self._timer: asyncio.TimerHandle | None = None

    def say(self, lines: list[tuple[int, str]]) -> None:
        """Log ``lines``, each ``(level, text)`` (one flow's, or the responses a connection settled
        together): now, in one record per level, or with the others at the window's end."""
        now = self.clock()
        if now - self._start >= self.window:
            self._start, self._written = now, 0
        if not self._waiting and self._written < self.burst:
            self._written += self._write(lines)
            return
        self._waiting += lines
        if self._timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # no event loop runs (hooks called by a script of one's own): now
                self.flush()
                return
            self._timer = loop.call_later(self._start + self.window - now, self.flush)

    def flush(self) -> None:
        """Write the lines that wait, and begin a window."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        waiting, self._waiting = self._waiting, []
        self._start = self.clock()
        self._written = self._write(waiting)

    def close(self) -> None:
        """The proxy stops: what waits is written now, and every line from now on as it comes."""
        self.flush()
        self.burst = sys.maxsize

    def _write(self, lines: list[tuple[int, str]]) -> int:
        """One record per level, its lines in order; returns how many were written."""
        if len(lines) == 1:
            self.logger.log(*lines[0])
            return 1
        by_level: dict[int, list[str]] = {}
        for level, text in lines:
            by_level.setdefault(level, []).append(text)
        for level, texts in by_level.items():
            self.logger.log(level, "\n".join(texts))
        return len(by_level)


def pretty_url(request: http.Request, known: dict[tuple[str, str], str]) -> str:
    """``request.pretty_url``, built as mitmproxy builds it, with the part before the path kept in
    ``known`` by (scheme, Host header): mitmproxy parses and checks the header on every read (~25 us of
    a busy proxy's thread), and a proxy sees few hosts. A CONNECT, or a request with no Host header,
    is mitmproxy's own reading."""
    host_header = request.host_header
    if not host_header or request.method == "CONNECT":
        return request.pretty_url
    scheme = request.scheme
    start = known.get((scheme, host_header))
    if start is None:
        host, port = urls.parse_authority(host_header, check=False)
        start = urls.unparse(scheme, host, port or urls.default_port(scheme) or 443, "")
        if len(known) >= URL_HOSTS:
            del known[next(iter(known))]
        known[(scheme, host_header)] = start
    path = request.path
    return start + path if path != "*" else start
