"""Agent sessions: the responses of one agent run, grouped, turn by turn.

A response joins a session, in this order of trust:

1. the session header its request carries (Claude Code's ``x-claude-code-session-id``, Codex's
   ``session-id``, opencode's ``x-session-id``; read from the agents' own requests);
2. its WebSocket connection: every response of one connection is one session (unless 1 said otherwise);
3. its request's ``previous_response_id`` (Responses), naming a response of the session;
4. the conversation its request carries: it echoes or answers the calls of an earlier response (the
   echo check's ``earlier_flows``, ``accumulator.echo``);

and otherwise opens a session of its own (the first turn of a run, or traffic of no agent). Each
response is a turn of its session, numbered in order of arrival. Across turns the session keeps what
repeats: the same call (same name, same arguments) made ``loop_after`` times is a ``tool-call-loop``.

Sans-IO: the front doors (the addon live, the CLI on dumps) hand over each response's result with its
flow's facts; ``place`` adds the result's ``session`` and its loop warnings. Bounded: the oldest session
goes beyond ``max_sessions``, the oldest turns of a session beyond ``max_turns``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import NamedTuple

import orjson

from .echo import tool_results
from .request import RequestFacts, request_facts
from .result import add_warnings

# Request headers that name an agent run, as the agents send them (lower case).
SESSION_HEADERS = ("x-claude-code-session-id", "session-id", "x-session-id")
DEFAULT_LOOP_AFTER = 3
MAX_SESSIONS = 1_000
MAX_TURNS = 1_000
MAX_RESPONSE_IDS = 10_000
_SHORT = 80  # a call's arguments as a turn shows them
_DISTINCT_CALLS = 10_000  # distinct calls a session counts for loops
LOOP_TURNS = 10  # the last turns of a repeated call a loop warning names


class Asked(NamedTuple):
    """What a request says of its turn: the tool results it sends back (``echo.tool_results``), the
    response it follows (Responses' ``previous_response_id``), the model it asks for (a response
    that names none, Cohere's, is priced by it) and what it declares of tools (``request_facts``: the
    stream's analysis takes them instead of the body, which is then parsed once)."""

    tool_results: list[dict]
    previous_response_id: str | None
    model: str | None
    request: RequestFacts | None = None
    # The body ``request`` was read from, as bytes (the addon's): one changed since, by another addon
    # before the request went out, is read again for the stream's analysis.
    read_from: bytes | None = None


def asked(body: dict | None, format: str | None) -> Asked:
    """The facts of a decoded request body (None: no JSON object, no facts)."""
    if body is None:
        return Asked([], None, None)
    previous = body.get("previous_response_id")
    model = body.get("model")
    return Asked(
        tool_results(body, format),
        previous if type(previous) is str else None,
        model if type(model) is str else None,
        request_facts(body, format),
    )


@dataclass(slots=True)
class Session:
    id: str
    by: str  # how its first turn was told: "header NAME", "websocket connection", "new"
    # Each turn's summary (``summary``) as JSON, oldest first: bytes, which the garbage collector does not
    # follow. As dicts and lists they were four objects or more a turn that the proxy's collections walked
    # and promoted, ~20 us of its CPU a short flow under load (docs/performance.md).
    turns: list[bytes] = field(default_factory=list)
    count: int = 0  # turns placed, the dropped ones included
    # (name, arguments) -> (how many times it was made, its last turns, LOOP_TURNS at most): tuples, not a
    # list, which the collector stops following once it sees only numbers in them (a list a call was an
    # object each call kept in every young collection), and bounded however often a call repeats.
    calls: dict[tuple, tuple[int, tuple[int, ...]]] = field(default_factory=dict)
    opened: int = 0  # in which order the sessions began


class Sessions:
    def __init__(
        self,
        loop_after: int = DEFAULT_LOOP_AFTER,
        max_sessions: int = MAX_SESSIONS,
        max_turns: int = MAX_TURNS,
    ) -> None:
        self.loop_after = loop_after
        self.max_sessions = max_sessions
        self.max_turns = max_turns
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._by_flow: OrderedDict[str, str] = OrderedDict()  # flow id -> session id
        self._by_response: OrderedDict[str, str] = OrderedDict()  # response id -> session id
        self._opened = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: str) -> Session | None:
        return self._sessions.get(session_id)

    def of_flow(self, flow_id: str) -> Session | None:
        session_id = self._by_flow.get(flow_id)
        return self._sessions.get(session_id) if session_id is not None else None

    def all(self) -> list[Session]:
        """The sessions kept, in the order they began."""
        return sorted(self._sessions.values(), key=lambda session: session.opened)

    def record(self, session: Session) -> dict:
        """The session as JSON (``session_record``), its loops by this registry's threshold, and the
        sessions its turns were relayed from (a gateway's own side, seen too: the same tokens again)."""
        record = session_record(session, self.loop_after)
        relayed = [turn["relayed_from"] for turn in record["turns"] if turn.get("relayed_from")]
        if relayed:
            found = (self.of_flow(flow_id) for flow_id in relayed)
            record["relayed_from_sessions"] = list(dict.fromkeys(s.id for s in found if s is not None))
        return record

    def place(
        self,
        result: dict,
        flow_id: str,
        *,
        headers: Mapping[str, str] | None = None,
        previous_response_id: str | None = None,
        tool_results: list[dict] | None = None,
        connection: bool = False,
        time: float | None = None,
        replay: bool = False,
    ) -> dict:
        """Put one response in its session, as its next turn: sets ``result["session"]`` and adds a
        ``tool-call-loop`` warning per call the session has now made ``loop_after`` times or more.
        ``headers``: its request's (mitmproxy's Headers: any case); ``previous_response_id``: the response
        its request follows (Responses); ``tool_results``: what the request sent back
        (``accumulator.echo.tool_results``); ``connection``: the flow is a WebSocket connection (its
        responses share a session); ``time``: when it was asked (epoch seconds); ``replay``: its request was
        replayed in mitmproxy (a person asking again, not the agent's next turn: a session of its own)."""
        session, by = self._find(result, flow_id, headers, previous_response_id, connection, replay)
        session.count += 1
        turn = session.count
        self._sessions.move_to_end(session.id)
        self._by_flow[flow_id] = session.id
        self._by_flow.move_to_end(flow_id)
        while len(self._by_flow) > self.max_sessions * 4:
            self._by_flow.popitem(last=False)
        if type(result.get("response_id")) is str:
            self._by_response[result["response_id"]] = session.id
            while len(self._by_response) > MAX_RESPONSE_IDS:
                self._by_response.popitem(last=False)
        add_warnings(result, self._loops(session, result, turn))
        result["session"] = {"id": session.id, "turn": turn, "by": by, "tool_results": tool_results or []}
        session.turns.append(orjson.dumps(summary(result, flow_id, time)))
        if len(session.turns) > self.max_turns:
            del session.turns[0]
        return result["session"]

    def _find(self, result, flow_id, headers, previous, connection, replay=False) -> tuple[Session, str]:
        if replay:
            return self._session(f"{flow_id}#{self._opened}", "replay"), "replay"
        named = _header(headers)
        if named is not None:
            name, value = named
            return self._session(value, f"header {name}"), f"header {name}"
        if connection and flow_id in self._by_flow:
            found = self._sessions.get(self._by_flow[flow_id])
            if found is not None:
                return found, "websocket connection"
        if type(previous) is str and previous in self._by_response:
            found = self._sessions.get(self._by_response[previous])
            if found is not None:
                return found, "previous_response_id"
        evidence = result.get("evidence") or {}
        for earlier in reversed(evidence.get("earlier_flows") or ()):
            found = self.of_flow(earlier)
            if found is not None:
                return found, f"the conversation of flow {earlier}"
        # The first turn of a run (or of a connection): a session named after its first flow.
        session_id = flow_id if flow_id not in self._sessions else f"{flow_id}#{self._opened}"
        by = "websocket connection" if connection else "new"
        return self._session(session_id, by), by

    def _session(self, session_id: str, by: str) -> Session:
        found = self._sessions.get(session_id)
        if found is None:
            self._opened += 1
            found = self._sessions[session_id] = Session(session_id, by, opened=self._opened)
            while len(self._sessions) > self.max_sessions:
                self._sessions.popitem(last=False)
        return found

    def _loops(self, session: Session, result: dict, turn: int) -> list[dict]:
        warnings = []
        for choice in result.get("choices") or ():
            for call in choice["tool_calls"]:
                key = (call["name"], _canonical(call["arguments"]))
                earlier = session.calls.get(key)
                turns: tuple[int, ...]
                if earlier is None:
                    if len(session.calls) >= _DISTINCT_CALLS:
                        continue
                    times, turns = 1, (turn,)
                else:
                    times, turns = earlier[0] + 1, (*earlier[1][1 - LOOP_TURNS :], turn)
                session.calls[key] = (times, turns)
                if times >= self.loop_after:
                    shown = _short(call["arguments"], 200)
                    warnings.append(
                        {
                            "code": "tool-call-loop",
                            "message": f"{call['name']}({shown}) made {times} times in this session "
                            f"(turns {', '.join(map(str, turns))}): the agent may be looping",
                            "name": call["name"],
                            "arguments": shown,
                            "times": times,
                            "turns": list(turns),
                        }
                    )
        return warnings


def summary(result: dict, flow_id: str, time: float | None) -> dict:
    """What a session view shows of one turn."""
    usage = result["usage"]
    cost = result.get("cost")
    websocket = result.get("websocket") or {}
    return {
        "turn": result["session"]["turn"],
        "flow_id": flow_id,
        "position": websocket.get("position"),
        # Over a WebSocket the connection already said which calls the client answered (or null: it
        # said nothing, the connection ended first); over HTTP the next turn's request says it.
        "websocket_evidence": websocket.get("evidence") if websocket else None,
        "prewarm": bool(websocket.get("prewarm")),
        "time": time,
        "model": result.get("model"),
        "complete": result["complete"],
        "calls": [
            {"id": call["id"], "name": call["name"], "arguments": _short(call["arguments"], _SHORT)}
            for choice in result.get("choices") or ()
            for call in choice["tool_calls"]
        ],
        "tool_results": result["session"]["tool_results"],
        "input": usage["input"],
        "output": usage["output"],
        "cache_read": usage["cache_read"],
        "cost": cost["total"] if cost else None,
        "warnings": [w["code"] for w in result["warnings"]],
        # A gateway's response seen on both of its sides: its upstream flow (accumulator.relay).
        "relayed_from": (result.get("relayed_from") or {}).get("flow_id"),
    }


def _header(headers: Mapping[str, str] | None) -> tuple[str, str] | None:
    if not headers:
        return None
    for name in SESSION_HEADERS:
        value = headers.get(name)
        if isinstance(value, str) and value.strip():
            return name, value.strip()
    return None


def _canonical(arguments) -> str:
    """A call's arguments, the same for the same object however it was spaced or ordered."""
    text = arguments if type(arguments) is str else orjson.dumps(arguments).decode()
    try:
        return orjson.dumps(orjson.loads(text), option=orjson.OPT_SORT_KEYS).decode()
    except orjson.JSONDecodeError:
        return text


def _short(arguments, limit: int) -> str:
    """The arguments on one line (each run of whitespace one space), cut to ``limit`` characters. Only as
    much of the text is read as the cut needs (a call's arguments can be a MiB; each turn shows each call):
    the one-line form of a head of the text is a head of the whole's."""
    text = arguments if type(arguments) is str else orjson.dumps(arguments).decode()
    window = 2 * limit
    while True:
        shown = " ".join(text[:window].split())
        if len(shown) > limit or window >= len(text):
            break
        window *= 4
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


_BARS = "▁▂▃▄▅▆▇█"


def session_record(session: Session, loop_after: int = DEFAULT_LOOP_AFTER) -> dict:
    """A session as JSON: its turns (each call with what the later turns sent back for it), its totals,
    the calls it made ``loop_after`` times or more, and its calls never answered."""
    turns = [orjson.loads(turn) for turn in session.turns]
    unanswered = []
    used: set[tuple[int, int]] = set()  # (turn, position) of the results matched by name
    for n, turn in enumerate(turns):
        later = turns[n + 1 :]
        told = turn["websocket_evidence"]
        for call in turn["calls"]:
            if turn["position"] is not None:  # a WebSocket response: its connection's evidence
                answer = None
                if told is None or not call["id"]:
                    call["answered"] = None
                elif call["id"] in told["answered"]:
                    answer = {"id": call["id"], "size": None, "error": None, "turn": None}
                    call["answered"] = True
                else:
                    call["answered"] = None if call["id"] in told.get("cancelled", ()) else False
            else:
                answer = _answer_of(call, later, used)
                # Never answered: a later turn came and none sent a result for it (a call without an id is
                # told by its name, in the next turn only; one with neither cannot be told).
                told_apart = call["id"] or call["name"]
                call["answered"] = True if answer else (None if not later or not told_apart else False)
            call["result"] = answer
            if call["answered"] is False:
                unanswered.append({"turn": turn["turn"], "id": call["id"], "name": call["name"]})
    costs = [t["cost"] for t in turns if t["cost"] is not None]
    return {
        "id": session.id,
        "by": session.by,
        "turns": turns,
        "turns_dropped": session.count - len(turns),
        "totals": {
            "turns": session.count,
            "calls": sum(len(t["calls"]) for t in turns),
            "input": sum(t["input"] or 0 for t in turns),
            "output": sum(t["output"] or 0 for t in turns),
            "cache_read": sum(t["cache_read"] or 0 for t in turns),
            # Each response priced on its own, then added up (prices can be tiered per request).
            "cost": round(sum(costs), 10) if costs else None,
            "unpriced_turns": len(turns) - len(costs),
            "relayed_turns": sum(1 for t in turns if t.get("relayed_from")),
        },
        "loops": [
            {"name": name, "arguments": _short(arguments, _SHORT), "times": times, "turns": list(turns)}
            for (name, arguments), (times, turns) in session.calls.items()
            if times >= loop_after
        ],
        "unanswered": unanswered,
    }


def _answer_of(call: dict, later: list[dict], used: set) -> dict | None:
    """The result a later turn sent for this call: by id; else, in the next turn only, the first result of
    the call's name not yet taken: any, for a call without an id (Gemini's; Gemini CLI answers under ids
    of its own making), one without an id for a call with one (Ollama's libraries answer by the tool's
    name)."""
    if call["id"]:
        for turn in later:
            for sent in turn["tool_results"]:
                if sent["id"] == call["id"]:
                    return dict(sent, turn=turn["turn"])
    for turn in later[:1]:
        for position, sent in enumerate(turn["tool_results"]):
            if (
                sent.get("name") == call["name"]
                and (not call["id"] or sent["id"] is None)
                and (turn["turn"], position) not in used
            ):
                used.add((turn["turn"], position))
                return dict(sent, turn=turn["turn"])
    return None


def context_chart(values: list[int | None]) -> str:
    """Input tokens turn over turn (the context growing) as one line of bars; a gap where unknown."""
    known = [v for v in values if v is not None]
    if not known:
        return ""
    top = max(known) or 1
    return "".join(" " if v is None else _BARS[min(len(_BARS) - 1, v * len(_BARS) // top)] for v in values)


def format_session(record: dict) -> str:
    """A session (``session_record``) as text a person reads, turn by turn."""
    totals = record["totals"]
    cost = "cost unknown" if totals["cost"] is None else f"${totals['cost']:.6f}"
    if totals["cost"] is not None and totals["unpriced_turns"]:
        cost += f" ({totals['unpriced_turns']} turn(s) unpriced)"
    head = (
        f"== session {record['id']} ({record['by']}): {totals['turns']} turn(s), {totals['calls']} call(s), "
        f"tokens in {totals['input']} (cached {totals['cache_read']}), out {totals['output']}, {cost} =="
    )
    lines = [head]
    chart = context_chart([t["input"] for t in record["turns"]])
    if chart:
        lines.append(f"  context (input tokens per turn): {chart}")
    if record["turns_dropped"]:
        lines.append(f"  ({record['turns_dropped']} earliest turn(s) no longer kept)")
    if totals.get("relayed_turns"):
        sides = record.get("relayed_from_sessions") or []
        lines.append(
            f"  relayed: {totals['relayed_turns']} turn(s) passed through a gateway whose own requests were seen "
            + (f"too (session {', '.join(sides)})" if sides else "too")
            + ": their tokens and cost are counted on both sides, add up one"
        )
    for turn in record["turns"]:
        head = f"  turn {turn['turn']}"
        if turn["time"] is not None:
            head += f"  {_clock(turn['time'])}"
        head += f"  {turn['model'] or '?'}  flow {turn['flow_id'][:8]}"
        if turn.get("relayed_from"):
            head += f" (relayed from flow {turn['relayed_from'][:8]})"
        if turn["position"] is not None:
            head += f" response {turn['position']}"
        if turn["prewarm"]:
            head += " (prewarm)"
        if not turn["complete"]:
            head += " INCOMPLETE"
        lines.append(head)
        for call in turn["calls"]:
            lines.append(f"    call {call['name'] or '?'}({call['arguments']}) -> {_answer(call)}")
        tokens = "tokens: " + (
            "unknown"
            if turn["input"] is None and turn["output"] is None
            else f"in {_n(turn['input'])}"
            + (f" (cached {turn['cache_read']})" if turn["cache_read"] else "")
            + f", out {_n(turn['output'])}"
        )
        tokens += "; cost " + ("unknown" if turn["cost"] is None else f"${turn['cost']:.6f}")
        lines.append(f"    {tokens}")
        if turn["warnings"]:
            lines.append(f"    warnings: {', '.join(dict.fromkeys(turn['warnings']))}")
    for loop in record["loops"]:
        lines.append(
            f"  LOOP: {loop['name']}({loop['arguments']}) made {loop['times']} times "
            f"(turns {', '.join(map(str, loop['turns']))})"
        )
    for call in record["unanswered"]:
        lines.append(f"  NEVER ANSWERED: {call['name']} (id {call['id']}) of turn {call['turn']}")
    return "\n".join(lines)


def _answer(call: dict) -> str:
    if call["answered"] is None:
        return "not answered yet"  # no later turn yet (a call without an id is matched by its name)
    if call["answered"] is False:
        return "NEVER ANSWERED"
    result = call["result"]
    if result["size"] is None:
        return "answered"
    state = {True: "ERROR", False: "ok", None: "sent"}[result["error"]]
    return f"result {_size(result['size'])} {state} (turn {result['turn']})"


def _size(n: int) -> str:
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} KiB"


def _n(value: int | None) -> str:
    return "?" if value is None else str(value)


def _clock(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%H:%M:%S")
