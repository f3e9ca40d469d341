"""The test bench over WebSockets: the injections and repairs on the server's messages of one connection.

A WebSocket message is one whole event, so the stream rewriter does the work unchanged: each message goes
in as one SSE event (its lines as ``data:`` lines), and each event that comes out is one message. What
applies is what the format's HTTP twin allows (``WebSocketSupport.rewrite_as``: Realtime's call events
have the Responses shape) less ``rechunk``: mitmproxy hands over and forwards messages whole, so there is
no boundary to cut. A new rewriter starts with each response, so held events never cross responses.
"""

from __future__ import annotations

from typing import Any

from .. import formats
from ..framing.sse import SseDecoder
from .rewriter import StreamRewriter

# What cannot apply to a WebSocket message, whatever the format: (name, reason).
_WHOLE_MESSAGES = {"rechunk": "a WebSocket message arrives and leaves whole: there is no boundary to cut"}


def message_skip_reason(format: str, name: str) -> str | None:
    """Why ``name`` does not apply to ``format``'s WebSocket messages (one line), or None when it does."""
    from .formats import skip_reason

    if name in _WHOLE_MESSAGES:
        return _WHOLE_MESSAGES[name]
    support = formats.get(format).websocket
    if support is None or support.rewrite_as is None:
        return f"{format} sends every call whole in one message: nothing to rewrite"
    return skip_reason(support.rewrite_as, name)


class MessageRewriter:
    """``feed(content)`` per server message returns the messages to send now (maybe none: held, or
    several: released); ``finish()`` the rest. ``start_response()`` before a new response's first event
    releases what is held and starts afresh. Never raises once built."""

    def __init__(self, format: str, *, inject=(), repair=(), max_calls: int | None = None) -> None:
        support = formats.get(format).websocket
        self.format = format
        self._as = support.rewrite_as if support is not None else None
        asked = [*inject, *repair]
        self._skipped = [
            {"name": name, "reason": reason}
            for name in asked
            if (reason := message_skip_reason(format, name)) is not None
        ]
        self._inject = [name for name in inject if message_skip_reason(format, name) is None]
        self._repair = [name for name in repair if message_skip_reason(format, name) is None]
        self._max_calls = max_calls
        self._rewriter: StreamRewriter | None = None
        self._decoder = SseDecoder()
        self.responses = 0
        self.messages_in = self.messages_out = 0
        self.calls_reordered = 0

    @property
    def applies(self) -> bool:
        return bool(self._inject or self._repair)

    def start_response(self) -> list[bytes]:
        out = self._close()
        # It applies only where the format has an HTTP twin (``_as``): names are skipped otherwise.
        if self.applies and self._as is not None:
            options: dict[str, Any] = {} if self._max_calls is None else {"max_calls": self._max_calls}
            self._rewriter = StreamRewriter(self._as, inject=self._inject, repair=self._repair, **options)
            self.responses += 1
        return out

    def feed(self, content: bytes) -> list[bytes]:
        self.messages_in += 1
        if self._rewriter is None or 0x0D in content:  # an int: see framing/lines.py
            # Nothing to rewrite (no response yet), or a line break SSE would not keep: as it came, after
            # whatever is held.
            out = [*self._close(), content]
        else:
            event = b"".join(b"data: " + line + b"\n" for line in content.split(b"\n")) + b"\n"
            out = self._messages(self._rewriter.feed(event))
        self.messages_out += len(out)
        return out

    def finish(self) -> list[bytes]:
        out = self._close()
        self.messages_out += len(out)
        return out

    def report(self) -> dict:
        """The ``rewrite`` entry of the connection's record."""
        return {
            "format": self.format,
            "inject": list(self._inject),
            "repair": list(self._repair),
            "skipped": [dict(entry) for entry in self._skipped],
            "responses": self.responses,
            "messages_in": self.messages_in,
            "messages_out": self.messages_out,
            "calls_reordered": self.calls_reordered,
        }

    def _close(self) -> list[bytes]:
        rewriter, self._rewriter = self._rewriter, None
        if rewriter is None:
            return []
        out = self._messages(rewriter.finish())
        self.calls_reordered += rewriter.report()["calls_reordered"]
        return out

    def _messages(self, pieces: list[bytes]) -> list[bytes]:
        out = []
        for piece in pieces:
            out += [event.data for event in self._decoder.feed(piece)]
        return out
