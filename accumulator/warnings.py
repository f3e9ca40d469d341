"""The one catalogue of warning codes, and the log that collects them for one stream.

Every warning a result carries is ``{"code", "severity", "message", ...details}``; its code is defined
here once, with its severity and a one-line meaning (README's catalogue is this table).
"""

from __future__ import annotations

# code -> (severity, one-line meaning). Severity "warning" makes the CLI exit 1; "info" does not.
CATALOGUE: dict[str, tuple[str, str]] = {
    "recency-misroute": (
        "warning",
        "a client that appends each fragment to the most recent call would have built different calls",
    ),
    "index-only-misroute": (
        "warning",
        "a client that keys calls by index alone would have merged or lost calls",
    ),
    "id-then-index-misroute": (
        "warning",
        "a client that matches by id, then by index, would have merged a new call into an old one",
    ),
    "field-concat-misroute": (
        "warning",
        "a generic delta merger that concatenates every string field would have mangled names or ids",
    ),
    "last-wins-misroute": (
        "warning",
        "a client whose latest id and name overwrite the call's would have built different calls",
    ),
    "parse-early-misroute": (
        "warning",
        "a client that finishes a call as soon as its arguments parse as JSON would have run it with part of them",
    ),
    "index-collision": (
        "warning",
        "a new call id arrived with an index another call already holds; index-keyed clients merge the two",
    ),
    "name-repeated": (
        "info",
        "the function name was sent again on a later delta; clients that concatenate names double it",
    ),
    "name-split": (
        "info",
        "the function name arrived in several pieces; clients that keep only one piece get it wrong",
    ),
    "orphan-delta": (
        "warning",
        "a fragment named no known call (or several were possible) and carried no name; it belongs to no call",
    ),
    "invalid-arguments": (
        "warning",
        "a call's final arguments are not valid JSON",
    ),
    "truncated-stream": (
        "warning",
        "the stream ended without its end marker and before every choice finished",
    ),
    "provider-error": (
        "warning",
        "the provider sent an error object in the middle of the stream",
    ),
    "malformed-event": (
        "warning",
        "an event's payload is not valid JSON (or not the expected shape); the stream went on without it",
    ),
    "oversized-event": (
        "warning",
        "an event exceeded the size cap and was dropped; decoding resumed at the next event",
    ),
    "invalid-utf8": (
        "warning",
        "an event held bytes that are not UTF-8; they were read as replacement characters",
    ),
    "unterminated-event": (
        "info",
        "the input ended inside an event (no closing blank line); that last event was read anyway",
    ),
    "undeclared-tool": (
        "warning",
        "a call names a tool the request did not declare",
    ),
    "schema-mismatch": (
        "warning",
        "a call's arguments do not validate against the JSON schema the request declared for its tool",
    ),
    "parallel-disabled": (
        "warning",
        "several tool calls although the request turned parallel tool calls off",
    ),
    "tool-choice-ignored": (
        "warning",
        "the request forced a tool that the response did not call",
    ),
    "tool-calls-missing": (
        "warning",
        "the response ended for its tool calls (finish_reason tool_calls, stop_reason tool_use) but carried none to read",
    ),
    "client-misassembled": (
        "warning",
        "the client's next request echoes a call differently from how the stream sent it",
    ),
    "unknown-tool-call-id": (
        "info",
        "the client's request names a tool call id no response carried, in a conversation whose calls were seen",
    ),
    "unanswered-call": (
        "warning",
        "the client answered some of a response's calls but never this one: a dropped call",
    ),
    "tool-call-loop": (
        "warning",
        "an agent session made the same call (same name, same arguments) again and again: a loop",
    ),
    "gateway-altered": (
        "warning",
        "a gateway handed its client different calls than its provider sent it (both sides seen by this proxy)",
    ),
    "cancelled-call-answered": (
        "warning",
        "the client answered a call the provider had cancelled (Gemini Live toolCallCancellation)",
    ),
    "response-incomplete": (
        "info",
        "the provider ended the response early (cancelled, failed, incomplete, interrupted): its calls may be partial",
    ),
    "websocket-messages-trimmed": (
        "info",
        "messages already analysed were dropped from the stored WebSocket flow to bound its memory",
    ),
    "stalled": (
        "info",
        "the stream went silent mid-way for longer than the stall threshold",
    ),
    "arguments-mismatch": (
        "warning",
        "the stream restated a call's final arguments and they differ from what its deltas carried",
    ),
    "message-restart": (
        "warning",
        "a second message start arrived inside one stream (a duplicated frame or two generations spliced)",
    ),
    "decoding-failed": (
        "warning",
        "the body's Content-Encoding is unsupported or its compressed data is corrupt; analysis stopped",
    ),
    "decoded-size-cap": (
        "warning",
        "the (decompressed) body exceeded the analysis cap (a bomb, a stream that never ends?); analysis stopped there",
    ),
    "calls-cap": (
        "warning",
        "more tool calls than the per-stream cap; the later ones are counted in stats, not rebuilt",
    ),
    "arguments-cap": (
        "info",
        "a call's arguments exceeded the per-call cap; the rest was not kept (the call says arguments_truncated)",
    ),
    "http-error": (
        "warning",
        "the upstream answered with an HTTP error status instead of a response (an HTML error page, a JSON error)",
    ),
    "body-truncated": (
        "info",
        "the body kept on the flow stops at the size cap; the analysis still saw every byte",
    ),
    "body-not-kept": (
        "info",
        "mitmproxy streamed this message itself and no body was kept (its stream_large_bodies, or toolcall_lens_body_cap 0): nothing was read",
    ),
    "stream-not-seen": (
        "warning",
        "another addon replaced toolcall-lens's stream callable on this flow after it was set: the stream passed unseen; load addon.py after that addon, or have it call the callable it finds",
    ),
    "internal-error": (
        "warning",
        "toolcall-lens failed on this stream and stopped analysing it; the traffic was not affected",
    ),
}

# Per code, at most this many warnings are kept in a result; the rest are counted in stats.
MAX_PER_CODE = 20


class WarningLog:
    """Collects the warnings of one stream, in order, capped per code."""

    __slots__ = ("_items", "_per_code", "suppressed")

    def __init__(self) -> None:
        self._items: list[dict] = []
        self._per_code: dict[str, int] = {}
        self.suppressed = 0

    def add(self, code: str, message: str, **details) -> None:
        severity = CATALOGUE[code][0]
        seen = self._per_code.get(code, 0)
        if seen >= MAX_PER_CODE:
            self.suppressed += 1
            return
        self._per_code[code] = seen + 1
        item = {"code": code, "severity": severity, "message": message}
        item.update(details)
        self._items.append(item)

    @classmethod
    def of(cls, items: list[dict], suppressed: int = 0) -> WarningLog:
        """A log holding the warnings of a result already built (to add more to it, under the same cap)."""
        log = cls()
        log.extend(items)
        log.suppressed += suppressed
        return log

    def extend(self, items: list[dict]) -> None:
        """Add warnings already shaped as a result carries them (``{"code", "severity", "message", ...}``)."""
        for item in items:
            details = {k: v for k, v in item.items() if k not in ("code", "severity", "message")}
            self.add(item["code"], item["message"], **details)

    def to_list(self) -> list[dict]:
        return list(self._items)


def severity_of(code: str) -> str:
    return CATALOGUE[code][0]
