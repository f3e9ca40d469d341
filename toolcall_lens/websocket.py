"""The watch the addon keeps on an LLM WebSocket flow: every message fed to the core's ``Connection`` as
mitmproxy hands it (whole, inflated, before it is forwarded), and the flow's stored messages trimmed so
that a long connection holds bounded memory. One error boundary: whatever fails inside, the messages
keep flowing unchanged and the failure is recorded on the flow."""

from __future__ import annotations

from accumulator import Connection
from accumulator.report import ConnectionTally

from .watch import describe


class WebSocketWatch:
    """``message(msg)`` per message (returns the results it settled); ``finish(...)`` at the end."""

    __slots__ = ("closed", "connection", "failure", "keep", "next_progress", "record", "tally", "trimmed")

    def __init__(self, connection: Connection, keep: int) -> None:
        self.connection = connection
        self.keep = keep  # messages kept on the flow (0: all); the older ones are dropped once analysed
        self.trimmed = 0
        self.failure: str | None = None
        self.closed: dict | None = None
        self.next_progress = 0.0
        self.tally = ConnectionTally()  # the comment's figures, one settled response at a time
        # What the flow stores (CONNECTION_SCHEMA): the connection's own list of results, shared, not
        # copied; the summary is refreshed by ``refresh``.
        self.record = {"transport": "websocket", "connection": {}, "responses": connection.results}

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

    def refresh(self, settled: list[dict]) -> None:
        """The record and the tally brought up to date with these newly settled results."""
        for result in settled:
            self.tally.add(result)
        summary = self.connection.summary()
        summary["trimmed"] = self.trimmed
        summary["closed"] = self.closed
        self.record["connection"] = summary

    def comment(self) -> str:
        return self.tally.line(self.record["connection"])

    @property
    def loud(self) -> bool:
        return self.tally.loud or any(
            w["severity"] == "warning" for w in self.record["connection"]["warnings"]
        )

    def _failed(self, exc: BaseException) -> None:
        self.failure = describe(exc)
        self.connection.warnings.add(
            "internal-error",
            f"toolcall-lens failed on this connection and stopped analysing it: {self.failure}",
            error=self.failure,
        )
