"""A result as text a person reads: calls with pretty-printed arguments, text, warnings, usage."""

from __future__ import annotations

import orjson

from .assembly import error_text
from .strategies import STRATEGIES


def format_report(result: dict, title: str | None = None) -> str:
    lines: list[str] = []
    head = f"{result['format']}{'' if result.get('streamed', True) else ' (not streamed)'}, model {result['model'] or '?'}, "
    head += "complete" if result["complete"] else "INCOMPLETE"
    lines.append(f"== {title} ({head}) ==" if title else f"== {head} ==")
    for choice in result["choices"]:
        calls = choice["tool_calls"]
        lines.append(
            f"choice {choice['index']}: {len(calls)} tool call(s), finish_reason {choice['finish_reason'] or '-'}"
        )
        for n, call in enumerate(calls):
            index = "-" if call["index"] is None else call["index"]
            kind = "  custom tool (its input as written, no JSON)" if call.get("custom") else ""
            if call.get("namespace"):
                kind += f"  namespace={call['namespace']}"
            if call.get("builtin"):
                kind += f"  built-in {call['builtin']}, run by the client"
            lines.append(
                f"  [{n}] {call['name'] or '(no name)'}  id={call['id'] or '-'}  index={index}{kind}"
            )
            if "deltas" in call:
                when = (
                    f", {call['first_at']:.3f}s to {call['last_at']:.3f}s"
                    if call.get("first_at") is not None
                    else ""
                )
                lines.append(
                    f"      {call['deltas']} delta(s), events {call['first_event']} to {call['last_event']}{when}"
                    + (", INTERLEAVED with another call" if call["interleaved"] else "")
                )
            shown = (call["arguments"] or "(no input)") if call.get("custom") else _pretty(call["arguments"])
            lines.extend("      " + line for line in shown.splitlines())
        for kind in ("reasoning", "text", "refusal"):
            value = choice[kind]
            if value:
                lines.append(f"  {kind}: {_one_line(value)}")
    if result.get("error") is not None:
        lines.append(f"error: {orjson.dumps(result['error']).decode()}")
    warnings = result["warnings"]
    if warnings:
        lines.append(f"warnings ({len(warnings)}):")
        for warning in warnings:
            lines.append(f"  {warning['severity'].upper():7} {warning['code']}: {warning['message']}")
            for call in warning.get("would_build", ()):
                lines.append(f"          would build {call['name']}({_one_line(call['arguments'], 200)})")
    else:
        lines.append("warnings: none")
    compatibility = result.get("compatibility") or {}
    if compatibility:
        lines.append("compatibility (would a client following this rule rebuild the stream?):")
        width = max(map(len, compatibility))
        for name, verdict in _in_order(compatibility):
            lines.append(f"  {name:{width}}  {verdict['verdict']:6}  {verdict['reason']}")
            if verdict["verdict"] == "breaks" and _clients(name):
                lines.append(f"  {'':{width}}          who follows it: {_clients(name)}")
    lines.append(tokens_line(result["usage"]))
    if "cost" in result:
        lines.append(cost_line(result))
    if result.get("session"):
        lines.append(session_line(result["session"]))
    read = (result.get("source") or {}).get("read")
    if read:  # the addon's, for a stream it did not watch pass: loaded from a file, or a replay's
        lines.append(f"read {read}, from its stored body")
    timing = result.get("timing")
    if timing and timing["clock"]:
        facts = [
            f"{label} {timing[key]:.3f}s"
            for label, key in (
                ("first byte", "time_to_first_byte"),
                ("first event", "time_to_first_event"),
                ("first token", "time_to_first_token"),
                ("total", "duration"),
                ("longest gap", "longest_gap"),
            )
            if timing[key] is not None
        ]
        if timing["events_per_second"] is not None:
            facts.append(f"{timing['events_per_second']:.1f} events/s")
        whence = (result.get("source") or {}).get("timing")
        lines.append(("timing: " if not whence else f"timing ({whence}): ") + ", ".join(facts))
    websocket = result.get("websocket")
    if websocket:
        lines.append(_websocket_line(websocket))
    if result.get("evidence"):
        lines.append(evidence_line(result["evidence"]))
    relayed = result.get("relayed_from")
    if relayed:
        same = "the same calls" if relayed["calls_same"] else "DIFFERENT calls (gateway-altered)"
        lines.append(f"relayed by a gateway from flow {relayed['flow_id']}: {same}")
    stats = result["stats"]
    lines.append(f"stats: {stats['events']} events, {stats['bytes']} bytes")
    rewrite = result.get("rewrite")
    if rewrite:
        lines.append(
            f"rewritten: injected {', '.join(rewrite.get('inject', ())) or '-'}, "
            f"repaired {', '.join(rewrite.get('repair', ())) or '-'}"
            + "".join(f"; skipped {s['name']}: {s['reason']}" for s in rewrite.get("skipped", ()))
            + "".join(f"; {part}" for part in _rewrite_trouble(rewrite))
        )
        upstream = rewrite.get("upstream")
        if upstream:
            lines.append(
                "the upstream sent: "
                + ("the same calls" if upstream["calls_same"] else "DIFFERENT calls")
                + f", warnings {', '.join(upstream['warnings']) or '-'}; the report above is what the client got"
            )
    return "\n".join(lines)


def _rewrite_trouble(rewrite: dict) -> list[str]:
    """Where a rewrite did not run to the end: it stopped (a cap, a body it could not decode) or failed,
    and the rest of the stream passed as it came; or only the upstream's own analysis failed."""
    out = []
    stopped = rewrite.get("stopped")
    if stopped:
        out.append(f"STOPPED after {stopped.get('after_events')} events: {stopped.get('reason')}")
    if rewrite.get("failure"):
        out.append(f"FAILED: {rewrite['failure']} (the rest passed as it came)")
    if rewrite.get("upstream_failure"):
        out.append(f"the upstream's own stream could not be analysed: {rewrite['upstream_failure']}")
    return out


def tokens_line(usage: dict) -> str:
    """A result's normalised token counts, and why any is missing."""
    known = usage["input"] is not None or usage["output"] is not None
    if not known:
        return "tokens: unknown" + (f" ({'; '.join(usage['notes'])})" if usage["notes"] else "")
    parts = []
    if usage["input"] is not None:
        cached = [
            f"{usage[key]} {label}"
            for key, label in (("cache_read", "cached"), ("cache_write", "written to cache"))
            if usage[key]
        ]
        parts.append(f"input {usage['input']}" + (f" ({', '.join(cached)})" if cached else ""))
    if usage["output"] is not None:
        reasoning = f" (reasoning {usage['reasoning']})" if usage["reasoning"] else ""
        parts.append(f"output {usage['output']}{reasoning}")
    return "tokens: " + ", ".join(parts) + "".join(f"; {note}" for note in usage["notes"])


def cost_line(result: dict) -> str:
    """A result's cost (the addon and the CLI add it), or why there is none."""
    cost = result.get("cost")
    if cost is None:
        return f"cost: unknown ({result.get('cost_note') or 'not priced'})"
    price = cost["price"]
    return (
        f"cost: ${cost['total']:.6f} (input ${cost['input']:.6f}, output ${cost['output']:.6f}"
        + (f", cache read ${cost['cache_read']:.6f}" if cost["cache_read"] else "")
        + (f", cache write ${cost['cache_write']:.6f}" if cost["cache_write"] else "")
        + f"; {price['source']}: {price['provider'] or '-'} {price['model']})"
    )


def session_line(session: dict) -> str:
    """Which agent session a result belongs to, its turn, and how it was told."""
    return f"session: {session['id']}, turn {session['turn']} ({session['by']})"


def evidence_line(evidence: dict) -> str:
    """What checking the request's echoes did, in one line (a result's ``evidence``)."""
    if evidence.get("reason"):
        return f"evidence: not checked: {evidence['reason']}"
    line = (
        f"evidence: {evidence['checked']} echoed call(s) and result(s) read, {evidence['matched']} echo(es) "
        f"matched what flow {', '.join(evidence['earlier_flows']) or '?'} streamed"
    )
    if evidence["unanswered"]:
        line += f"; UNANSWERED {', '.join(evidence['unanswered'])}"
    if evidence["unknown"]:
        line += f"; unknown ids {', '.join(evidence['unknown'])}"
    return line


def _websocket_line(websocket: dict) -> str:
    """Where a response sat on its WebSocket connection, and what the client's later messages said."""
    facts = [
        f"response {websocket['position']}, messages {websocket['first_message']} to {websocket['last_message']}"
    ]
    if websocket.get("lane") is not None:
        facts.append(f"lane {websocket['lane']}")
    if websocket.get("prewarm"):
        facts.append("prewarm")
    if websocket.get("status"):
        facts.append(f"ended {websocket['status']}")
    if websocket.get("audio_bytes"):
        facts.append(f"{websocket['audio_bytes']} bytes of audio")
    evidence = websocket.get("evidence")
    if evidence:
        said = [f"{kind} {', '.join(ids)}" for kind, ids in evidence.items() if ids]
        facts.append("the client: " + ("; ".join(said) or "nothing"))
    return "websocket: " + ", ".join(facts)


def _said(result: dict, error: dict) -> str:
    """What the provider said in an error response: its message, else what kind of body it sent."""
    provider = result.get("error")
    if type(provider) is dict and "status" not in provider:
        return _one_line(error_text(provider), 200)
    kind = (error.get("content_type") or "no content type").split(";", 1)[0]
    return f"{kind} body: {_one_line(error.get('body') or '', 120)}"


def _clients(strategy: str) -> str:
    """The well-known clients that follow a hazard strategy's rule ("" for one the core does not know)."""
    known = STRATEGIES.get(strategy)
    return known.clients if known is not None else ""


def _pretty(arguments: str) -> str:
    if arguments == "":
        return "(no arguments)"
    try:
        value = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return arguments + "\n(not valid JSON, shown as is)"
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()


def _one_line(text: str, limit: int = 300) -> str:
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[:limit] + "…"


def summary_line(result: dict) -> str:
    """One line for a flow's comment and the proxy log: format, model, calls by name, warnings."""
    head = f"{result['format']} {result['model'] or '?'}"
    if not result.get("streamed", True):
        head += " (not streamed)"
    names = [call["name"] or "?" for choice in result["choices"] for call in choice["tool_calls"]]
    error = next((w for w in result["warnings"] if w["code"] == "http-error"), None)
    if error is not None:
        # The status and what the provider said, first: the rest of the line has nothing to add.
        head = result["format"] + (" (stream asked for)" if result.get("streamed") else "")
        body = (
            f"HTTP {error.get('status')} {error.get('reason') or ''}".rstrip() + f": {_said(result, error)}"
        )
    elif names:
        body = f"{len(names)} call{'s' if len(names) != 1 else ''}: {', '.join(names)}"
    else:
        chars = sum(len(choice["text"] or "") for choice in result["choices"])
        body = f"no calls, {chars} chars of text"
    unread = next((w for w in result["warnings"] if w["code"] in ("body-not-kept", "stream-not-seen")), None)
    if unread is not None:  # nothing was read: nothing to say of calls or completeness
        head = result["format"] + ("" if result.get("streamed", True) else " (not streamed)")
        if unread["code"] == "stream-not-seen":
            body = "not seen, its stream callable replaced by another addon"
        else:
            body = f"not read, no body kept ({unread.get('option')}={unread.get('limit')})"
    parts = [f"{head}: {body}"]
    for severity in ("warning", "info"):
        codes = list(dict.fromkeys(w["code"] for w in result["warnings"] if w["severity"] == severity))
        if codes:
            parts.append(f"{severity}: {', '.join(codes)}")
    if not result["complete"] and unread is None:
        parts.append("incomplete")
    rewrite = result.get("rewrite")
    if rewrite:
        done = [*rewrite.get("inject", ()), *rewrite.get("repair", ())]
        trouble = " (FAILED)" if rewrite.get("failure") else " (STOPPED)" if rewrite.get("stopped") else ""
        parts.append(f"rewritten: {', '.join(done) or 'nothing applied'}{trouble}")
    return " | ".join(parts)


# The client rules in one order wherever a result is shown: a result read back from a mitmproxy dump has
# its keys in reverse order (mitmproxy's tnetstring hands dicts back so).
_RULE_ORDER = {name: rank for rank, name in enumerate(STRATEGIES)}


def _in_order(compatibility: dict) -> list:
    """A result's verdicts, the client rules in their order (``STRATEGIES``), any other name after them."""
    return sorted(compatibility.items(), key=lambda item: _RULE_ORDER.get(item[0], len(_RULE_ORDER)))


def format_view(result: dict) -> str:
    """The full picture of one response, for mitmproxy's content view: the report, then for every
    strategy that breaks, its calls beside the ones the stream really carried."""
    lines = [format_report(result)]
    for name, verdict in _in_order(result.get("compatibility") or {}):
        if verdict["verdict"] != "breaks":
            continue
        for warning in result["warnings"]:
            if warning.get("strategy") != name:
                continue
            choice = next((c for c in result["choices"] if c["index"] == warning.get("choice")), None)
            truth = choice["tool_calls"] if choice else []
            lines.append("")
            if _clients(name):
                lines.append(f"{name}: {_clients(name)}")
            lines.extend(
                _side_by_side(f"{name} would build", warning["would_build"], "the stream carried", truth)
            )
    for warning in result["warnings"]:  # a gateway seen on both sides: what it got beside what it handed on
        if warning["code"] == "gateway-altered":
            handed_on = [call for choice in result["choices"] for call in choice["tool_calls"]]
            lines.append("")
            lines.extend(
                _side_by_side("its provider sent", warning["sent"], "the gateway handed on", handed_on)
            )
    return "\n".join(lines)


def _side_by_side(
    left_title: str, left: list[dict], right_title: str, right: list[dict], width: int = 58
) -> list:
    inner = width - 6  # room left of the "≠ [n] " prefix

    def cell(call: dict | None, size: int) -> list[str]:
        if call is None:
            return ["(no call)"]
        text = f"{call['name'] or '(no name)'} {call['arguments'] or ''}".strip()
        return [text[i : i + size] for i in range(0, max(len(text), 1), size)][:6]

    out = [f"{left_title:<{width}} | {right_title}", f"{'-' * width}-+-{'-' * width}"]
    for n in range(max(len(left), len(right))):
        a = cell(left[n] if n < len(left) else None, inner)
        b = cell(right[n] if n < len(right) else None, width)
        mark = "  " if n < len(left) and n < len(right) and _same_call(left[n], right[n]) else "≠ "
        for k in range(max(len(a), len(b))):
            prefix = f"{mark}[{n}] " if k == 0 else " " * (len(mark) + 4)
            out.append(f"{prefix + (a[k] if k < len(a) else ''):<{width}} | {b[k] if k < len(b) else ''}")
    return out


def _same_call(a: dict, b: dict) -> bool:
    return (a["name"], a["arguments"]) == (b["name"], b["arguments"])


def results_of(value) -> list[dict]:
    """The results a front door stored for one flow (``flow.metadata["toolcall_lens"]``): an HTTP flow's
    one result, or each response of a WebSocket connection's record; [] for anything else."""
    if type(value) is not dict:
        return []
    if value.get("transport") == "websocket":
        return [r for r in value.get("responses") or () if type(r) is dict]
    return [value]


class ConnectionTally:
    """What a WebSocket connection's one-line summary says of its responses, kept up to date one settled
    response at a time: the addon's comment costs the same per response however many came before."""

    __slots__ = ("codes", "incomplete", "loud", "names", "prewarm")

    def __init__(self) -> None:
        self.names: dict[str, int] = {}  # call name -> calls
        self.codes: dict[str, dict[str, None]] = {"warning": {}, "info": {}}  # by severity, in order
        self.prewarm = 0
        self.incomplete = 0
        self.loud = False  # a warning of severity "warning" came

    def add(self, result: dict) -> None:
        self.prewarm += bool((result.get("websocket") or {}).get("prewarm"))
        self.incomplete += not result["complete"]
        for choice in result["choices"]:
            for call in choice["tool_calls"]:
                name = call["name"] or "?"
                self.names[name] = self.names.get(name, 0) + 1
        self.add_warnings(result["warnings"])

    def add_warnings(self, warnings) -> None:
        for warning in warnings:
            severity = warning.get("severity")
            if severity in self.codes:
                self.codes[severity][warning["code"]] = None
                self.loud = self.loud or severity == "warning"

    def line(self, connection: dict) -> str:
        """The line, with what the connection itself says (its count, its own warnings, its close)."""
        started = connection.get("responses", 0)
        head = f"{connection.get('format') or '?'} websocket: {started} response{'s' if started != 1 else ''}"
        notes = [
            f"{count} {label}"
            for count, label in (
                (self.prewarm, "prewarm"),
                (self.incomplete, "incomplete"),
                (connection.get("results_dropped") or 0, "dropped"),
            )
            if count
        ]
        if notes:
            head += f" ({', '.join(notes)})"
        calls = ", ".join(name if n == 1 else f"{name} ×{n}" for name, n in self.names.items())
        parts = [f"{head}, calls: {calls or '-'}"]
        own = connection.get("warnings") or ()
        for severity, codes in self.codes.items():
            found = list(dict.fromkeys([*(w["code"] for w in own if w.get("severity") == severity), *codes]))
            if found:
                parts.append(f"{severity}: {', '.join(found)}")
        closed = connection.get("closed")
        if type(closed) is dict and closed.get("code") not in (None, 1000, 1005):  # not a normal closure
            parts.append(
                f"closed {closed.get('code')} by {'client' if closed.get('by_client') else 'server'}"
            )
        return " | ".join(parts)


def connection_summary_line(record: dict) -> str:
    """One line for a WebSocket flow's comment: format, responses, calls by name (counted), warnings."""
    tally = ConnectionTally()
    for result in results_of(record):
        tally.add(result)
    return tally.line(record.get("connection") or {})
