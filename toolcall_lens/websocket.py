"""The watch the addon keeps on an LLM WebSocket flow: every message fed to the core's ``Connection`` as
mitmproxy hands it (whole, inflated, before it is forwarded), and the flow's stored messages trimmed so
that a long connection holds bounded memory. One error boundary: whatever fails inside, the messages
keep flowing unchanged and the failure is recorded on the flow."""

from __future__ import annotations

from accumulator import Connection, connection_result

from .watch import describe


class WebSocketWatch:
    """``message(msg)`` per message (returns the results it settled); ``finish(...)`` at the end."""

    __slots__ = ("closed", "connection", "failure", "keep", "next_progress", "trimmed")

    def __init__(self, connection: Connection, keep: int) -> None:
        self.connection = connection
        self.keep = keep  # messages kept on the flow (0: all); the older ones are dropped once analysed
        self.trimmed = 0
        self.failure: str | None = None
        self.closed: dict | None = None
        self.next_progress = 0.0

    @property
    def ours(self) -> bool:
        """Whether the connection speaks a format we read (known from its path or its first messages)."""
        return self.connection.format is not None

    def message(self, msg) -> list[dict]:
        if self.failure is not None:
            return []
        try:
            return self.connection.message(msg.from_client, msg.content, msg.is_text, msg.timestamp)
        except Exception as exc:  # noqa: BLE001 - the message must pass whatever happened
            self._failed(exc)
            return []

    def trim(self, messages: list) -> None:
        """Drop analysed messages beyond ``keep`` from the flow, oldest first, in batches (a deletion at
        the front costs the whole list: doing it once per ``keep`` messages keeps it O(1) per message).
        The last message always stays (mitmproxy forwards it after the hook)."""
        keep = self.keep
        if keep and len(messages) >= 2 * keep:
            dropped = len(messages) - keep
            del messages[:dropped]
            if not self.trimmed:
                self.connection.warnings.add(
                    "websocket-messages-trimmed",
                    f"messages already analysed are dropped from this flow beyond the last {keep} "
                    "(toolcall_lens_websocket_keep); the analysis saw every one",
                    dropped=dropped,
                    kept=keep,
                )
            self.trimmed += dropped

    def finish(self, now: float | None, closed: dict | None) -> list[dict]:
        self.closed = closed
        if self.failure is not None:
            return []
        try:
            return self.connection.finish(now)
        except Exception as exc:  # noqa: BLE001
            self._failed(exc)
            return []

    def record(self) -> dict:
        """What the flow stores (``CONNECTION_SCHEMA``)."""
        record = connection_result(self.connection)
        record["connection"]["trimmed"] = self.trimmed
        record["connection"]["closed"] = self.closed
        return record

    def _failed(self, exc: BaseException) -> None:
        self.failure = describe(exc)
        self.connection.warnings.add(
            "internal-error",
            f"toolcall-lens failed on this connection and stopped analysing it: {self.failure}",
            error=self.failure,
        )
