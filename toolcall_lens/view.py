"""The "toolcall-lens" content view (mitmweb, ``mitmdump --flow-detail 3``): the calls by identity, the
warnings, the verdicts, and each failing strategy's calls beside the right ones. On a WebSocket message:
the connection in one line, and the response the message belongs to."""

from __future__ import annotations

from collections import OrderedDict

import orjson
from mitmproxy import contentviews, ctx, http

from accumulator import analyze_exchange, classify, websocket_format
from accumulator.report import connection_summary_line, format_view, results_of, summary_line
from accumulator.sessions import format_session
from accumulator.websocket import connection_result, replay

METADATA_KEY = "toolcall_lens"
# Connections rebuilt from a flow's stored messages (flows the addon did not record), by flow id, with the
# number of messages they were rebuilt from: mitmweb renders every message of a flow, one view call each.
_REPLAYED: OrderedDict[str, tuple[int, dict]] = OrderedDict()
_REPLAYED_FLOWS = 16
_MESSAGE_SHOWN = 2000  # characters of the message itself shown above the response


class ToolcallLensView(contentviews.Contentview):
    """It shows the addon's result when the flow has one (which also brings the clock and the client's
    echoes); else it reads the body itself, as the CLI would (flows from a dump made without the addon), as
    it does, saying so, for a response edited in the proxy since it passed."""

    name = "toolcall-lens"

    def prettify(self, data: bytes, metadata: contentviews.Metadata) -> str:
        flow = metadata.flow
        if metadata.websocket_message is not None or _is_websocket(flow):
            return _websocket_view(flow, metadata.websocket_message)
        stored = results_of(flow.metadata.get(METADATA_KEY)) if flow is not None else []
        if stored and not _response_edited(flow):
            return format_view(stored[0]) + _session_section(stored[0])
        result = _read(data, metadata)
        if stored:  # the stored result is of the response that passed; this one is of what the flow holds now
            return EDITED + "\n\n" + (format_view(result) if result is not None else NOT_READ + ".")
        if result is None:
            raise ValueError(NOT_READ)
        return format_view(result)

    def render_priority(self, data: bytes, metadata: contentviews.Metadata) -> float:
        if metadata.websocket_message is not None:
            flow = metadata.flow
            llm = _is_websocket(flow) and (
                websocket_format(flow.request.path) is not None or _is_record(flow.metadata.get(METADATA_KEY))
            )
            return 3 if llm else -1
        if isinstance(metadata.http_message, http.Request) or _is_websocket(metadata.flow):
            return -1
        return 3 if _exchange(data, metadata) is not None else -1


EDITED = (
    "(edited since it passed: read from the response as the flow holds it now; the flow's comment, marker,"
    " report and export describe the response as it passed, until the edit is reverted)"
)


def _response_edited(flow) -> bool:
    """Whether the response's body or content type was changed in the proxy (mitmweb's or the console's
    editor, a file put in its place) since the addon read it. mitmproxy keeps the flow as it was before its
    first change (``backup``) until the change is reverted; that keeps a replayed flow's response from
    before its replay too (another response, another start time: no edit of this one), and a body only
    decoded or encoded reads the same. A change to the comment or the marker is no edit of the response."""
    if not isinstance(flow, http.HTTPFlow) or flow.response is None or not flow.modified():
        return False
    before = (flow._backup or {}).get("response")
    if not before or before.get("timestamp_start") != flow.response.timestamp_start:
        return False
    was = http.Response.from_state(before)
    now = flow.response
    if was.headers.get("content-type") != now.headers.get("content-type"):
        return True
    return was.get_content(strict=False) != now.get_content(strict=False)


NOT_READ = "not an LLM response toolcall-lens reads"


def _read(data: bytes, metadata: contentviews.Metadata) -> dict | None:
    """The result of the body itself, as the CLI would read it (flows from a dump made without the addon,
    an edited response): None where it is no LLM response."""
    exchange = _exchange(data, metadata)
    if exchange is None:
        return None
    # The view is given the decoded body: a stream's encoding is already undone.
    flow = metadata.flow
    response = flow.response if isinstance(flow, http.HTTPFlow) else None
    return analyze_exchange(
        exchange,
        data,
        request=flow.request.get_content(strict=False) if isinstance(flow, http.HTTPFlow) else None,
        status=response.status_code if response is not None else None,
        reason=response.reason if response is not None else "",
        content_type=response.headers.get("content-type", "") if response is not None else "",
    )


def _exchange(data: bytes, metadata: contentviews.Metadata):
    flow = metadata.flow
    if isinstance(flow, http.HTTPFlow) and flow.response is not None:
        response = flow.response
        exchange = classify(
            path=flow.request.path,
            status=response.status_code,
            content_type=response.headers.get("content-type"),
            request=lambda: flow.request.get_content(strict=False),
            head=data,
        )
        if exchange is not None and exchange.format is not None:
            return exchange
    return classify(head=data)  # no flow, or a stream on a path we do not know: its bytes tell


# -- WebSocket flows ---------------------------------------------------------------------------------------


def _is_websocket(flow) -> bool:
    return isinstance(flow, http.HTTPFlow) and flow.websocket is not None


def _is_record(value) -> bool:
    return type(value) is dict and value.get("transport") == "websocket"


def connection_record(flow: http.HTTPFlow) -> dict | None:
    """The connection of a WebSocket flow: the addon's record, else rebuilt from the flow's stored messages
    (a dump made without the addon); None when they are no LLM connection toolcall-lens reads."""
    recorded = flow.metadata.get(METADATA_KEY)
    if _is_record(recorded):
        return recorded
    messages = flow.websocket.messages
    cached = _REPLAYED.get(flow.id)
    if cached is None or cached[0] != len(messages):
        connection = replay(
            ((m.from_client, m.content, m.is_text, m.timestamp) for m in messages),
            websocket_format(flow.request.path),
            path=flow.request.path,
        )
        cached = (len(messages), connection_result(connection) if connection.format is not None else None)
        _REPLAYED[flow.id] = cached
        while len(_REPLAYED) > _REPLAYED_FLOWS:
            _REPLAYED.popitem(last=False)
    _REPLAYED.move_to_end(flow.id)
    return cached[1]


def _trimmed(flow: http.HTTPFlow) -> int:
    """Messages the addon dropped from the front of the stored flow (numbers start after them)."""
    recorded = flow.metadata.get(METADATA_KEY)
    trimmed = (recorded.get("connection") or {}).get("trimmed") if _is_record(recorded) else 0
    return trimmed if type(trimmed) is int and trimmed > 0 else 0


def message_number(flow: http.HTTPFlow, message) -> int | None:
    """A stored message's number on its connection (1-based, both directions, trimmed ones counted)."""
    messages = flow.websocket.messages
    for index in range(len(messages) - 1, -1, -1):
        if messages[index] is message:
            return _trimmed(flow) + index + 1
    return None


def message_time(flow: http.HTTPFlow, number: int) -> float | None:
    """When the message of this number passed, if it is still stored."""
    index = number - _trimmed(flow) - 1
    messages = flow.websocket.messages if _is_websocket(flow) else []
    return messages[index].timestamp if 0 <= index < len(messages) else None


def response_of(record: dict, number: int) -> dict | None:
    """The response a message belongs to: the last one whose span of messages holds it."""
    return next(
        (
            result
            for result in reversed(results_of(record))
            if result["websocket"]["first_message"] <= number <= result["websocket"]["last_message"]
        ),
        None,
    )


def _websocket_view(flow, message) -> str:
    if not _is_websocket(flow):
        raise ValueError("not a WebSocket flow")
    record = connection_record(flow)
    if record is None:
        raise ValueError("not an LLM WebSocket connection toolcall-lens reads")
    results = results_of(record)
    lines = [connection_summary_line(record)]
    if message is None:  # the upgrade's response: the whole connection
        lines += [f"\n-- response {r['websocket']['position']} --\n{format_view(r)}" for r in results]
        return "\n".join(lines) + (_session_section(results[-1]) if results else "")
    number = message_number(flow, message)
    side = "client → server" if message.from_client else "server → client"
    result = response_of(record, number) if number is not None else None
    if result is None:
        lines.append(f"message {number or '?'} ({side}): part of no response")
    else:
        websocket = result["websocket"]
        span = f"messages {websocket['first_message']} to {websocket['last_message']}"
        lines.append(f"message {number} ({side}): response {websocket['position']} ({span})")
    lines += ["", _shown(message.content)]
    if result is not None:
        if number == result["websocket"]["last_message"]:
            lines += ["", format_view(result)]
        else:
            last = result["websocket"]["last_message"]
            lines += ["", summary_line(result), f"(the whole response under message {last}, its last)"]
    return "\n".join(lines)


def _session_section(result: dict) -> str:
    """The agent session this response belongs to, turn by turn, as the running addon knows it now
    (later turns say whether its calls were answered); nothing where no addon placed it."""
    session = result.get("session")
    lens = ctx.master.addons.get("toolcalllens") if session and hasattr(ctx, "master") else None
    found = lens.sessions.get(session["id"]) if lens is not None and hasattr(lens, "sessions") else None
    if found is None:
        return ""
    return "\n\n-- agent session --\n" + format_session(lens.sessions.record(found))


def _shown(content: bytes) -> str:
    """The message itself, its JSON indented, capped."""
    try:
        text = orjson.dumps(orjson.loads(content), option=orjson.OPT_INDENT_2).decode()
    except orjson.JSONDecodeError:
        text = content.decode("utf-8", "replace")
    return text if len(text) <= _MESSAGE_SHOWN else text[:_MESSAGE_SHOWN] + "…"
