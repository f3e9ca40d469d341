"""Evidence from the client's next request: the tool calls it echoes back, checked against the calls
reconstructed from the responses it got.

``ObservedCalls`` is a bounded index of reconstructed calls by id, least recently used out (a call the
client echoes back is used again). ``check`` reads a request body in any format's shape (the echoed
assistant calls and the tool results), and says where the client's version differs from the stream's: a
different name (a concatenation of observed names, the production incident's
``search_circularsearch_circular``), different arguments (a splice of several calls' arguments, as recency
routing builds), an id glued from several observed ids, or ids never seen in a conversation whose other
calls were.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass

import orjson

from . import formats
from .assembly import first_value
from .request import decoded
from .result import add_warnings
from .warnings import WarningLog

DEFAULT_INDEX_SIZE = 10_000
# Argument characters the index holds, for the calls with ids and again for those without: a bound in calls
# alone let 10,000 calls of file-writing arguments (tens of KiB each, up to the argument cap's MiB) hold
# hundreds of MiB in the proxy and as much in its worker.
DEFAULT_INDEX_BYTES = 64 * 1024 * 1024
ANONYMOUS_RESPONSES = 256  # recent responses whose calls carry no id, kept for matching by position and name
# Earlier calls kept under one id that comes again (the turns of a conversation an echo check can pair)
EARLIER_CALLS = 32
_SPLICE_CAP = 4096  # longest arguments the splice check looks at (its work is quadratic)


@dataclass(slots=True, frozen=True)
class ObservedCall:
    id: str
    name: str | None
    arguments: str
    flow_id: str
    format: str
    arguments_cut: bool = False  # cut at the argument cap: the client's whole arguments cannot be compared
    choice: int = 0  # the choice of its response (Chat's n): a client answers the calls of one


@dataclass(slots=True, frozen=True)
class EchoedCall:
    id: str | None
    name: str | None
    arguments: str  # as text: an object the client sent is serialised
    turn: int  # which assistant message of the conversation it was in


class ObservedCalls:
    """The calls reconstructed from recent responses, by id, at most ``size`` of them holding at most
    ``max_bytes`` characters of arguments: when over either, the call least recently recorded or echoed
    back goes. An id that comes again (a provider that numbers each response's calls: ``call_0``,
    kimi-k3's ``list_dir:0``) keeps its earlier calls too, within both bounds: a conversation echoes each
    turn's. The responses whose calls carry no id are kept apart, the newest ``ANONYMOUS_RESPONSES``
    holding at most ``max_bytes`` more, with those of the formats whose clients echo calls without their
    ids (``formats.ECHOED_WITHOUT_IDS``): both are matched by turn, position and name."""

    def __init__(self, size: int = DEFAULT_INDEX_SIZE, max_bytes: int = DEFAULT_INDEX_BYTES) -> None:
        self.size = size
        self.max_bytes = max_bytes
        self._calls: OrderedDict[str, ObservedCall] = OrderedDict()  # each id's newest call
        self._by_flow: dict[str, list[str]] = {}
        # An id's calls before its newest, oldest first (ids that came again only), and how many in all.
        self._earlier: dict[str, list[ObservedCall]] = {}
        self._versions = 0
        self._bytes = 0  # the argument characters of every call in _calls and _earlier
        # Responses whose calls carry no id (Gemini), or whose clients echo none (Ollama): their calls in
        # order, newest last, matched to a request's echoes by turn, position and name; with when each
        # ended (None: not known).
        self._anonymous: deque[tuple[str, str, list[ObservedCall], float | None]] = deque(
            maxlen=ANONYMOUS_RESPONSES
        )
        self._anonymous_bytes = 0  # the argument characters of the calls in _anonymous

    def __len__(self) -> int:
        return len(self._calls)

    def get(self, call_id: str) -> ObservedCall | None:
        return self._calls.get(call_id)

    def record(self, result: dict, flow_id: str, ended: float | None = None) -> None:
        """Remember the calls of one reconstructed response; ``ended``: when it ended (epoch seconds), for
        the requests checked after they were sent (``examine``'s ``sent``)."""
        ids = []
        anonymous: list[ObservedCall] = []
        # Calls with ids whose clients echo them without (Ollama's): kept for matching by position too.
        by_position = result["format"] in formats.ECHOED_WITHOUT_IDS
        for choice in result.get("choices") or ():
            for call in choice["tool_calls"]:
                if not call["id"] or by_position:
                    anonymous.append(
                        ObservedCall(
                            call["id"] or "",
                            call["name"],
                            call["arguments"],
                            flow_id,
                            result["format"],
                            bool(call.get("arguments_truncated")),
                        )
                    )
                # A call whose arguments were cut at the cap is known by its id (its echo is no unknown id)
                # but its arguments are not compared with the echo's.
                if call["id"]:
                    observed = ObservedCall(
                        call["id"],
                        call["name"],
                        call["arguments"],
                        flow_id,
                        result["format"],
                        bool(call.get("arguments_truncated")),
                        choice.get("index", 0),
                    )
                    earlier = self._calls.get(call["id"])
                    self._bytes += len(observed.arguments)
                    if earlier is not None and earlier == observed:  # the same call told again: kept once
                        self._bytes -= len(earlier.arguments)
                    elif earlier is not None:
                        # An id the provider used again: the newest call is this one, the earlier is kept
                        # for the echoes of its turn, and its flow's list of calls lets the id go (the list
                        # stayed for ever, and named the later flow's call among the earlier's).
                        if earlier.flow_id != flow_id:
                            self._forget_sibling(earlier.flow_id, call["id"])
                        versions = self._earlier.setdefault(call["id"], [])
                        versions.append(earlier)
                        if len(versions) > EARLIER_CALLS:
                            self._bytes -= len(versions.pop(0).arguments)
                        else:
                            self._versions += 1
                    self._calls[call["id"]] = observed
                    self._calls.move_to_end(call["id"])
                    ids.append(call["id"])
        if ids:
            self._by_flow[flow_id] = ids
        if anonymous:
            if len(self._anonymous) == self._anonymous.maxlen:  # the oldest leaves as this one comes
                self._anonymous_bytes -= _arguments_size(self._anonymous[0][2])
            self._anonymous.append((flow_id, result["format"], anonymous, ended))
            self._anonymous_bytes += _arguments_size(anonymous)
            while self._anonymous_bytes > self.max_bytes:
                self._anonymous_bytes -= _arguments_size(self._anonymous.popleft()[2])
        while len(self._calls) + self._versions > self.size or self._bytes > self.max_bytes:
            if len(self._calls) > 1 or not self._versions:  # the least recently used id goes, whole
                old_id, old = self._calls.popitem(last=False)
                self._forget_sibling(old.flow_id, old_id)
                gone = self._earlier.pop(old_id, [])
                self._versions -= len(gone)
                self._bytes -= len(old.arguments) + _arguments_size(gone)
            else:  # one id over a bound alone: its oldest calls go
                call_id, versions = next(iter(self._earlier.items()))
                excess = max(1, min(len(versions), len(self._calls) + self._versions - self.size))
                self._bytes -= _arguments_size(versions[:excess])
                del versions[:excess]
                self._versions -= excess
                if not versions:
                    del self._earlier[call_id]

    def _forget_sibling(self, flow_id: str, call_id: str) -> None:
        siblings = self._by_flow.get(flow_id)
        if siblings is not None and call_id in siblings:
            siblings.remove(call_id)
            if not siblings:
                del self._by_flow[flow_id]

    def siblings(self, flow_id: str) -> list[ObservedCall]:
        return [self._calls[i] for i in self._by_flow.get(flow_id, ()) if i in self._calls]

    def check(self, request, format: str | None = None) -> list[dict]:
        """The warnings a request's echoes earn (empty when it echoes nothing we observed); ``format``: the
        shape it is read in (None: any)."""
        return self.examine(request, format)[0]

    def examine(
        self, request, format: str | None = None, sent: float | None = None
    ) -> tuple[list[dict], dict]:
        """The warnings a request's echoes earn, and what the check did (a result's ``evidence``):
        ``checked`` (echoed calls and results read), ``matched`` (echoed calls that agree with what was
        streamed), ``unanswered`` (calls of an earlier response the request answers in part, left out),
        ``unknown`` (ids never streamed, in a conversation whose calls were), ``earlier_flows``; or, when
        nothing could be checked, ``reason``. ``sent``: when the request was sent (epoch seconds), for a
        check made later (the addon's worker checks it as its response begins): echoes matched by
        position and name are matched to responses that ended before it only (an id names its call
        whenever it is checked)."""
        echoed, results = extract_echoes(request, format)
        if not echoed and not results:
            return [], no_evidence("the request echoes no tool call and answers none")
        warnings = WarningLog()
        known_turns = set()
        matched: list[tuple[EchoedCall, ObservedCall]] = []
        glued: list[tuple[EchoedCall, list[ObservedCall]]] = []
        ranks = self._ranks(echoed) if self._earlier else {}
        for n, call in enumerate(echoed):
            if call.id is None:
                continue
            found = self._calls.get(call.id)
            if found is not None:
                self._calls.move_to_end(call.id)  # used again: a conversation still going keeps its calls
                known_turns.add(call.turn)
                observed = self._version(call, ranks[n]) if n in ranks else found
                if observed is not None:  # None: an echo of a call of that id no longer kept
                    matched.append((call, observed))
            elif (parts := self._glued_ids(call.id)) is not None:
                glued.append((call, parts))
                known_turns.add(call.turn)
        agreeing = sum(1 for call, observed in matched if self._compare(call, observed, warnings))
        for call, parts in glued:
            first = parts[0]
            warnings.add(
                "client-misassembled",
                f"the client echoed call id {call.id!r}, glued from the observed ids "
                f"{', '.join(p.id for p in parts)} (flow {first.flow_id})",
                id=call.id,
                earlier_flow=first.flow_id,
                glued_ids=[p.id for p in parts],
                observed={"name": first.name, "arguments": first.arguments},
                echoed={"name": call.name, "arguments": call.arguments},
            )
        by_position = self._match_anonymous(
            [c for c in echoed if (c.id is None or c.id not in self._calls) and c not in glued_calls(glued)],
            format,
            warnings,
            sent,
        )
        agreeing += by_position[0]
        answered = [self._calls[i] for i in results if i in self._calls]
        for observed in answered:
            self._calls.move_to_end(observed.id)
        unknown: list[str] = []
        if known_turns or answered:  # ids never seen in a conversation whose other calls were
            echoed_ids = {c.id for c in echoed}
            unknown = [c.id for c in echoed if c.turn in known_turns and c.id and self._unseen(c.id)]
            unknown += [i for i in results if i not in echoed_ids and self._unseen(i)]
            unknown = list(dict.fromkeys(unknown))
            for call_id in unknown:
                warnings.add(
                    "unknown-tool-call-id",
                    f"the client's request names tool call id {call_id!r}, never seen in a response",
                    id=call_id,
                )
        unanswered = self._unanswered(echoed, results, matched, answered, warnings) + by_position[2]
        earlier = list(
            dict.fromkeys([*(o.flow_id for o in [*(o for _, o in matched), *answered]), *by_position[1]])
        )
        if not earlier and not glued and not unknown:
            reason = "the calls it echoes or answers were never streamed through this proxy (a conversation begun elsewhere)"
            return warnings.to_list(), no_evidence(reason, checked=len(echoed) + len(results))
        return warnings.to_list(), {
            "checked": len(echoed) + len(results),
            "matched": agreeing,
            "unanswered": unanswered,
            "unknown": unknown,
            "earlier_flows": earlier,
            "reason": None,
        }

    def _match_anonymous(
        self, echoed: list[EchoedCall], format, warnings: WarningLog, sent: float | None = None
    ) -> tuple[int, list[str], list[str]]:
        """Echoed calls that no id ties to a stream (Gemini streams carry none; Gemini CLI makes its own;
        Ollama's libraries echo none, of calls streamed with ids): each model turn of them is matched to the
        newest response without ids (or of a format whose clients echo none) whose call names hold the
        echoed names in order (each echo is then compared with the call of its name, and each call left
        out is a dropped call), or else whose names the echoed ones are glued from (then compared position
        by position). Returns (calls that agree, the earlier flows matched, the calls left out as
        FLOW#POSITION)."""
        if not echoed or not self._anonymous:
            return 0, [], []
        turns: dict[int, list[EchoedCall]] = {}
        for call in echoed:
            turns.setdefault(call.turn, []).append(call)
        agreeing, flows, missing = 0, [], []
        used: set[str] = set()
        for turn in sorted(turns, reverse=True):  # the newest turn first: it answers the newest response
            calls = turns[turn]
            found = self._anonymous_response(calls, format, used, sent)
            if found is None:
                continue
            flow_id, observed, positions = found
            used.add(flow_id)
            flows.append(flow_id)
            if positions is not None:
                for call, position in zip(calls, positions, strict=True):
                    agreeing += self._compare(call, observed[position], warnings, position=position)
                left = sorted(set(range(len(observed))) - set(positions))
                missing += _dropped(flow_id, observed, left, len(calls), warnings)
                continue
            names = {o.name for o in observed if o.name}
            position = 0  # the streamed call an echo stands for; a glued echo stands for those it joins
            for call in calls:
                twin = observed[position] if position < len(observed) else None
                if twin is not None and call.name == twin.name:
                    agreeing += self._compare(call, twin, warnings, position=position)
                    position += 1
                    continue
                pieces = _segment(call.name or "", names)
                glued = pieces if pieces is not None and len(pieces) > 1 else None  # the names it joins
                warnings.add(
                    "client-misassembled",
                    f"call {position} of flow {flow_id} (matched by position and name, the stream named no "
                    f"ids): the client echoed it as {call.name!r}"
                    + (f", a concatenation of {' + '.join(glued)}" if glued else ""),
                    id=call.id,
                    position=position,
                    earlier_flow=flow_id,
                    observed={"name": twin.name, "arguments": twin.arguments} if twin else None,
                    echoed={"name": call.name, "arguments": call.arguments},
                    **({"name_concatenation": glued} if glued else {}),
                )
                position += len(glued) if glued else 1
            # None of the echoes stands for the calls after the last one matched.
            missing += _dropped(flow_id, observed, range(position, len(observed)), len(calls), warnings)
        return agreeing, flows, missing

    def _anonymous_response(
        self, calls: list[EchoedCall], format, used, sent: float | None = None
    ) -> tuple[str, list, list[int] | None] | None:
        """The newest response without ids whose call names hold the echoed ones in order, with the
        position of each echo; else the newest whose names they are glued from (positions None). Only
        the responses that ended before ``sent``, when both times are known: a client cannot echo a
        response it had not had."""
        names = [c.name for c in calls]
        glued_from = None
        for flow_id, wire, observed, ended in reversed(self._anonymous):
            if flow_id in used or (format is not None and wire != format):
                continue
            if sent is not None and ended is not None and ended > sent:
                continue
            streamed = [o.name for o in observed]
            if (positions := _in_order(names, streamed)) is not None:
                return flow_id, observed, positions
            if glued_from is None and all(n in streamed or _glued_name(n, streamed) for n in names):
                glued_from = (flow_id, observed, None)
        return glued_from

    def _unanswered(self, echoed, results, matched, answered, warnings: WarningLog) -> list[str]:
        """The calls of each earlier response this request answers in part that it leaves out: a client
        that dropped a call (it ran and answered its siblings, never it)."""
        result_ids = set(results)
        # In the order the request names them: the warnings come out the same on every run.
        referenced = dict.fromkeys([*(o.flow_id for _, o in matched), *(o.flow_id for o in answered)])
        missing: list[str] = []
        for flow_id in referenced:
            siblings = self.siblings(flow_id)
            ids = {o.id for o in siblings}
            # Formats with result ids say which calls were answered; else the echoes are all there is.
            answered_here = (result_ids & ids) or ({c.id for c in echoed} & ids)
            # A client carries one choice on (Chat's n): the calls of the others are not its to answer.
            chosen = {o.choice for o in siblings if o.id in answered_here}
            for observed in siblings:
                if observed.id in answered_here or observed.choice not in chosen:
                    continue
                missing.append(observed.id)
                warnings.add(
                    "unanswered-call",
                    f"the client answered {len(answered_here)} of the calls flow {flow_id} streamed but never "
                    f"call {observed.id} ({observed.name}): a dropped call",
                    id=observed.id,
                    name=observed.name,
                    earlier_flow=flow_id,
                )
        return missing

    def _ranks(self, echoed: list[EchoedCall]) -> dict[int, int]:
        """For each echo (by its position) of an id that came again: how many echoes of that id come in
        later turns of the request (0: its newest turn), which pairs it with that id's newest calls."""
        ranks: dict[int, int] = {}
        later: dict[str, int] = {}
        for n in sorted(range(len(echoed)), key=lambda n: -echoed[n].turn):  # the newest turn first
            call_id = echoed[n].id
            if call_id is not None and call_id in self._earlier:
                ranks[n] = later.get(call_id, 0)
                later[call_id] = ranks[n] + 1
        return ranks

    def _version(self, call: EchoedCall, rank: int) -> ObservedCall | None:
        """The call an echo of an id that came again stands for: the one of its turn counted from the
        newest (``rank``) if it agrees, else any of that id's calls that agrees, else the one of its turn
        (compared, and warned about), or None when that one is no longer kept."""
        call_id = call.id
        assert call_id is not None
        versions = [self._calls[call_id], *reversed(self._earlier[call_id])]  # the newest first
        paired = versions[rank] if rank < len(versions) else None
        if paired is not None and _agrees(call, paired):
            return paired
        for version in versions:
            if _agrees(call, version):
                return version
        return paired

    def _unseen(self, call_id: str) -> bool:
        return call_id not in self._calls and self._glued_ids(call_id) is None

    def _compare(
        self, call: EchoedCall, observed: ObservedCall, warnings: WarningLog, position: int | None = None
    ) -> bool:
        """Whether the echo agrees with what was streamed; a warning when it does not."""
        name_ok, arguments_ok = _agreement(call, observed)
        if name_ok and arguments_ok:
            return True
        siblings = (
            self.siblings(observed.flow_id) if observed.id else self._anonymous_siblings(observed.flow_id)
        )
        details: dict = {} if position is None else {"position": position}
        problems = []
        if not name_ok:
            problems.append(f"name {call.name!r} instead of {observed.name!r}")
            pieces = _segment(call.name or "", {s.name for s in siblings if s.name})
            if pieces and len(pieces) > 1:
                details["name_concatenation"] = pieces
                problems[-1] += f" (a concatenation of {' + '.join(pieces)})"
        if not arguments_ok:
            problems.append("different arguments")
            spliced = _splice_of(call.arguments, siblings)
            if spliced:
                details["arguments_splice"] = spliced
                problems[-1] += f" (a splice of the arguments of {', '.join(spliced)})"
            elif _first_value_of(call.arguments, observed.arguments):
                details["arguments_first_value"] = True
                problems[-1] += (
                    " (the first JSON value of the arguments streamed, which are no JSON whole: what a client "
                    "that finishes a call as soon as its arguments parse, or parses them leniently, keeps)"
                )
        if call.id is None:  # matched by position and name: the client echoed no id
            label = f"call {position} ({observed.id or 'no id'}, the client echoed none)"
        else:
            label = f"call {call.id}"
        warnings.add(
            "client-misassembled",
            f"{label}: the client's echo differs from what flow {observed.flow_id} streamed: "
            + "; ".join(problems),
            id=call.id,
            earlier_flow=observed.flow_id,
            observed={"name": observed.name, "arguments": observed.arguments},
            echoed={"name": call.name, "arguments": call.arguments},
            **details,
        )
        return False

    def _anonymous_siblings(self, flow_id: str) -> list[ObservedCall]:
        return next((calls for f, _, calls, _ in self._anonymous if f == flow_id), [])

    def _glued_ids(self, call_id: str) -> list[ObservedCall] | None:
        """The observed calls whose ids, concatenated, make ``call_id`` (two or more), or None."""
        pieces = _segment(call_id, self._calls, min_parts=2)
        return [self._calls[p] for p in pieces] if pieces else None


def _dropped(flow_id: str, observed: list, positions, echoed: int, warnings: WarningLog) -> list[str]:
    """``unanswered-call`` for each of these calls of a response matched by position that no echo stands
    for; returns their ids, or FLOW#POSITION for a call streamed without one."""
    out = []
    for position in positions:
        call_id = observed[position].id or None
        out.append(call_id or f"{flow_id}#{position}")
        named = f" {call_id}" if call_id else ""
        warnings.add(
            "unanswered-call",
            f"the client echoed {echoed} call(s) for the {len(observed)} flow {flow_id} streamed, none of them "
            f"call {position}{named} ({observed[position].name}): a dropped call",
            id=call_id,
            position=position,
            name=observed[position].name,
            earlier_flow=flow_id,
        )
    return out


def _in_order(names: list, streamed: list) -> list[int] | None:
    """The position in `streamed` of each of `names`, in order (each name the next call of that name), or
    None when they are not all there in that order."""
    positions, start = [], 0
    for name in names:
        try:
            start = streamed.index(name, start) + 1
        except ValueError:
            return None
        positions.append(start - 1)
    return positions


def _glued_name(name: str | None, names) -> bool:
    """Whether ``name`` is two or more of ``names`` glued together."""
    pieces = _segment(name or "", set(names))
    return pieces is not None and len(pieces) > 1


def _arguments_size(calls: list[ObservedCall]) -> int:
    """The argument characters of these calls, as the index counts them."""
    return sum(len(call.arguments) for call in calls)


def glued_calls(glued: list) -> list:
    return [call for call, _ in glued]


def add_evidence(result: dict, warnings: list[dict], evidence: dict) -> None:
    """Put what a request's echo check found on the result of the response it got: its warnings (through
    the result's warning log) and ``evidence``, the summary of the check."""
    add_warnings(result, warnings)
    result["evidence"] = evidence


def no_evidence(reason: str, checked: int = 0) -> dict:
    return {
        "checked": checked,
        "matched": 0,
        "unanswered": [],
        "unknown": [],
        "earlier_flows": [],
        "reason": reason,
    }


def same_arguments(echoed: str, observed: str) -> bool:
    """Whether two arguments texts are the same arguments: as JSON values where both parse (spacing and key
    order aside), an empty text as ``{}``."""
    if echoed == observed:
        return True
    try:
        return orjson.loads(echoed or "{}") == orjson.loads(observed or "{}")
    except orjson.JSONDecodeError:
        return False


def _segment(text: str, words, min_parts: int = 1) -> list[str] | None:
    """``text`` cut into a sequence of ``words`` (a container), or None."""
    if not text:
        return None
    best: list[list[str] | None] = [None] * (len(text) + 1)
    best[0] = []
    for end in range(1, len(text) + 1):
        for start in range(end):
            before = best[start]
            if before is not None and text[start:end] in words:
                best[end] = before + [text[start:end]]
                break
    found = best[len(text)]
    return found if found is not None and len(found) >= min_parts else None


def _agreement(call: EchoedCall, observed: ObservedCall) -> tuple[bool, bool]:
    """Whether an echo's name, and its arguments, are the call streamed's (arguments cut when recorded
    agree with any)."""
    return call.name == observed.name, observed.arguments_cut or same_arguments(
        call.arguments, observed.arguments
    )


def _agrees(call: EchoedCall, observed: ObservedCall) -> bool:
    """Whether an echo is the call streamed (``ObservedCalls._compare``'s test, without its warning)."""
    name_ok, arguments_ok = _agreement(call, observed)
    return name_ok and arguments_ok


def _first_value_of(echoed: str, observed: str) -> bool:
    """Whether a differing echo is the JSON value the streamed arguments begin with (the parse-early
    rule's call: the arguments were no JSON whole, or the echo would not differ)."""
    first = first_value(observed)
    if first is None:
        return False
    try:
        return orjson.loads(echoed or "{}") == first[0]
    except orjson.JSONDecodeError:
        return False


def _splice_of(echoed: str, siblings: list[ObservedCall]) -> list[str] | None:
    """The ids of two observed calls of one response whose arguments, interleaved, give ``echoed`` (a call
    without an id as FLOW#POSITION, its place among its response's calls, as ``unanswered`` names it)."""
    if len(echoed) > _SPLICE_CAP:
        return None
    for i, a in enumerate(siblings):
        for j, b in enumerate(siblings[i + 1 :], i + 1):
            if (
                a.arguments
                and b.arguments
                and not (a.arguments_cut or b.arguments_cut)
                and len(a.arguments) + len(b.arguments) == len(echoed)
                and _interleaves(a.arguments, b.arguments, echoed)
            ):
                return [a.id or f"{a.flow_id}#{i}", b.id or f"{b.flow_id}#{j}"]
    return None


def _interleaves(a: str, b: str, text: str) -> bool:
    # Can ``text`` be cut into pieces of ``a`` and ``b`` kept in order? (dynamic programming over a)
    reachable = [False] * (len(a) + 1)
    reachable[0] = True
    for j in range(1, len(a) + 1):
        reachable[j] = reachable[j - 1] and a[j - 1] == text[j - 1]
    for i in range(1, len(b) + 1):
        reachable[0] = reachable[0] and b[i - 1] == text[i - 1]
        for j in range(1, len(a) + 1):
            c = text[i + j - 1]
            reachable[j] = (reachable[j] and b[i - 1] == c) or (reachable[j - 1] and a[j - 1] == c)
    return reachable[len(a)]


def extract_echoes(request, format: str | None = None) -> tuple[list[EchoedCall], list[str]]:
    """The assistant tool calls a request echoes and the ids its tool results answer, read by the format
    modules in their own shape (``format`` None: every shape)."""
    request = decoded(request)
    if request is None:
        return [], []
    calls: list[EchoedCall] = []
    results: list[str] = []
    formats.request_echoes(
        request,
        lambda *call: calls.append(_echo(*call)),
        lambda call_id, *_: _add_id(results, call_id),
        format,
    )
    return calls, results


def _add_id(results: list[str], call_id) -> None:
    if type(call_id) is str:
        results.append(call_id)


def tool_results(request, format: str | None = None) -> list[dict]:
    """The tool results a request sends back, in order: ``{"id", "size", "error"}``: the call id it
    answers, the result's size in bytes (as text; an object serialised), and whether the tool failed (null
    where the format has no way to say: Chat, Responses but an applied patch's); with ``name`` where the result names its tool
    (Gemini, whose calls may carry no id: ``id`` null then)."""
    request = decoded(request)
    if request is None:
        return []
    out: list[dict] = []

    def add(call_id, content=None, error: bool | None = None, name=None) -> None:
        found = {"id": call_id if type(call_id) is str else None, "size": _size(content), "error": error}
        if type(name) is str:
            found["name"] = name
        if found["id"] is not None or "name" in found:
            out.append(found)

    formats.request_echoes(request, lambda *_: None, add, format)
    return out


def _size(content) -> int:
    if content is None:
        return 0
    if type(content) is str:
        return len(content.encode("utf-8", "surrogatepass"))
    try:
        return len(orjson.dumps(content))
    except (TypeError, orjson.JSONEncodeError):
        return 0


def _echo(call_id, name, arguments, turn: int) -> EchoedCall:
    if arguments is None:
        text = ""
    elif type(arguments) is str:
        text = arguments
    else:
        text = orjson.dumps(arguments).decode()
    return EchoedCall(call_id if type(call_id) is str and call_id else None, name, text, turn)
