"""A gateway in view on both of its sides: a response whose calls a gateway relayed, paired with the response
it got from its provider, and where the two differ.

One proxy (or one dump) in front of a gateway and behind it sees each call twice: on the gateway's flow to
its provider, then on the client's flow from the gateway, under the same id (gateways hand on the
provider's call ids). ``Relays.check`` pairs a response with the one it relayed: a response with a call id
in common, from another server (host and port), sent after this response's request and ended before this
response did. The client's side then says where its calls differ from what the provider sent
(``gateway-altered``: a name, arguments, a call dropped or added), and ``relayed_from`` names the
provider's flow. Arguments are compared as JSON (gateways write them again: spacing, key order), an empty
text as ``{}``. Calls without ids (Gemini's) are not paired.

Sans-IO: the front doors hand over each finished response's result with its flow's facts, in the order
the responses ended; bounded (the least recently seen ids go beyond ``size``).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import NamedTuple

from .echo import same_arguments
from .result import add_warnings

DEFAULT_SIZE = 4096  # call ids remembered, each with the response it came in
_SHOWN = 200  # characters of arguments a warning's message shows


class Response(NamedTuple):
    """A response's calls with ids, where it came from and when."""

    flow_id: str
    server: str
    started: float
    ended: float
    # (id, name, arguments), in order; arguments None where cut at the argument cap: not compared
    calls: tuple[tuple[str, str | None, str | None], ...]


class Relays:
    def __init__(self, size: int = DEFAULT_SIZE) -> None:
        self.size = size
        self._by_id: OrderedDict[str, Response] = OrderedDict()

    def __len__(self) -> int:
        return len(self._by_id)

    def check(
        self, result: dict, flow_id: str, server: str, started: float | None, ended: float | None
    ) -> None:
        """Pair this finished response with the one it relayed, if this proxy saw it: ``relayed_from`` and,
        where the calls differ, ``gateway-altered`` on ``result``; then remember its calls (a gateway
        behind another relays them on). ``server``: its request's host and port; ``started``: when its
        request began; ``ended``: when its response ended (epoch seconds)."""
        if started is None or ended is None:
            return
        calls = tuple(
            (call["id"], call["name"], None if call.get("arguments_truncated") else call["arguments"])
            for choice in result.get("choices") or ()
            for call in choice["tool_calls"]
            if call["id"] and isinstance(call["arguments"], str)
        )
        if not calls:
            return
        source = self._source(calls, flow_id, server, started, ended)
        if source is not None:
            differences = _differences(source.calls, calls)
            result["relayed_from"] = {"flow_id": source.flow_id, "calls_same": not differences}
            if differences:
                add_warnings(
                    result,
                    [
                        {
                            "code": "gateway-altered",
                            "severity": "warning",
                            "message": (
                                f"the gateway handed on different calls than its provider sent it in flow "
                                f"{source.flow_id}: " + "; ".join(differences)
                            ),
                            "relayed_from": source.flow_id,
                            "sent": [{"id": i, "name": n, "arguments": a} for i, n, a in source.calls],
                        }
                    ],
                )
        response = Response(flow_id, server, started, ended, calls)
        for call_id, _, _ in calls:
            self._by_id[call_id] = response
            self._by_id.move_to_end(call_id)
        while len(self._by_id) > self.size:
            self._by_id.popitem(last=False)

    def _source(self, calls, flow_id: str, server: str, started: float, ended: float) -> Response | None:
        """The response these calls were relayed from: the one sharing the most of their ids among those of
        another server inside this response's time."""
        best, shared = None, 0
        seen: dict[str, int] = {}
        for call_id, _, _ in calls:
            earlier = self._by_id.get(call_id)
            if earlier is None or earlier.flow_id == flow_id or earlier.server == server:
                continue
            if not (started <= earlier.started and earlier.ended <= ended):
                continue
            count = seen[earlier.flow_id] = seen.get(earlier.flow_id, 0) + 1
            if count > shared:
                best, shared = earlier, count
        return best


def _differences(sent, got) -> list[str]:
    """What the client got that differs from what the provider sent, call by call (by id)."""
    out = []
    mine = {call_id: (name, arguments) for call_id, name, arguments in got}
    for call_id, name, arguments in sent:
        if call_id not in mine:
            out.append(f"call {call_id} ({name}) was dropped")
            continue
        their_name, their_arguments = mine[call_id]
        if their_name != name:
            out.append(f"call {call_id} is named {their_name!r}, sent as {name!r}")
        if arguments is None or their_arguments is None:  # cut at the cap on either side: not compared
            continue
        if not same_arguments(their_arguments, arguments):
            out.append(
                f"call {call_id} ({name}) has arguments {_shown(their_arguments)}, sent as {_shown(arguments)}"
            )
    sent_ids = {call_id for call_id, _, _ in sent}
    added = [f"{call_id} ({name})" for call_id, name, _ in got if call_id not in sent_ids]
    if added:
        out.append(f"{len(added)} call(s) the provider did not send: {', '.join(added)}")
    return out


def _shown(arguments: str) -> str:
    text = arguments or "''"
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."
