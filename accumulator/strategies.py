"""Hazard strategies: the naive routing rules real clients use, replayed on the same operations.

Each strategy keeps its own call table per choice. It sees every tool-call delta together with where
identity routing put it, remembers the first event where it put a fragment somewhere else, and at the
end its calls are compared with the identity result. A strategy is a small class: a ``name``, the
warning ``code`` it raises, and ``route()``; the next issues add more of them.
"""

from __future__ import annotations

from .assembly import fragment_text
from .ops import ToolCallDelta


class SimulatedCall:
    __slots__ = ("fragments", "name")

    def __init__(self, name: str | None) -> None:
        self.name = name
        self.fragments: list[str] = []

    def final(self) -> dict:
        return {"name": self.name, "arguments": "".join(self.fragments)}


class Strategy:
    """Base: divergence bookkeeping and the final comparison; subclasses decide ``route``."""

    name = ""
    code = ""
    rule = ""  # one line: what the strategy does, for reports

    def __init__(self) -> None:
        self.tables: dict[int, list[SimulatedCall]] = {}
        self.first_divergence: int | None = None

    def route(self, op: ToolCallDelta, table: list[SimulatedCall]) -> tuple[int | None, bool]:
        """Apply the delta to this strategy's table; return (ordinal it went to or None, created)."""
        raise NotImplementedError

    def observe(self, op: ToolCallDelta, identity_ordinal: int | None, identity_created: bool) -> None:
        table = self.tables.get(op.choice)
        if table is None:
            table = self.tables[op.choice] = []
        ordinal, created = self.route(op, table)
        # Only a difference that moves content (or makes or skips a call) counts.
        if (
            self.first_divergence is None
            and (ordinal != identity_ordinal or created != identity_created)
            and (created or identity_created or op.name or (op.arguments is not None and op.arguments != ""))
        ):
            self.first_divergence = op.event

    def calls(self, choice: int) -> list[dict]:
        return [call.final() for call in self.tables.get(choice, ())]


class RecencyStrategy(Strategy):
    """A delta carrying a function name starts a new call; any other delta goes to the latest call."""

    name = "recency"
    code = "recency-misroute"
    rule = "a delta with a name starts a call, any other fragment is appended to the latest call"

    def route(self, op: ToolCallDelta, table: list[SimulatedCall]) -> tuple[int | None, bool]:
        name = op.name
        if name and type(name) is str:
            table.append(SimulatedCall(name))
            created = True
        elif table:
            created = False
        else:
            return None, False
        arguments = op.arguments
        if arguments is not None and arguments != "":
            table[-1].fragments.append(fragment_text(arguments))
        return len(table) - 1, created


# strategy name -> class; the accumulator and (later) the addon option choose from these.
STRATEGIES: dict[str, type[Strategy]] = {
    RecencyStrategy.name: RecencyStrategy,
}
DEFAULT_STRATEGIES: tuple[str, ...] = tuple(STRATEGIES)
