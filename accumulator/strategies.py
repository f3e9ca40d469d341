"""Hazard strategies: the naive routing rules real clients use, replayed on the same operations.

Each strategy keeps its own call table per choice and sees every tool-call delta with the raw values
the wire sent (an id of ``""``, a missing index), after identity routing has applied it. It remembers
the first event where its call differs from the identity call (another call, a mangled name or id), and
at the end its calls are compared with the identity result. A strategy is a small class: a ``name``, the
warning ``code`` it raises, a one-line ``rule``, the kind of client that follows it, ``route()``, and
``agrees()``: when it surely routes a delta as identity routing did, so that it need not be replayed.
"""

from __future__ import annotations

from typing import ClassVar

from mypy_extensions import mypyc_attr

from .assembly import DEFAULT_MAX_ARGUMENT_CHARS, DEFAULT_MAX_CALLS, ChoiceState, fragment_text
from .ops import PLACEHOLDER_IDS, ToolCallDelta


class SimulatedCall:
    __slots__ = ("fragments", "id", "name", "ordinal", "room")

    def __init__(self, ordinal: int, call_id, name, room: int) -> None:
        self.ordinal = ordinal  # -1: a call beyond the calls cap, which keeps nothing
        self.id = call_id
        self.name = name
        self.fragments: list[str] = []
        self.room = room  # argument characters it may still keep: the same cap as identity routing's

    def final(self) -> dict:
        return {"id": self.id, "name": self.name, "arguments": "".join(self.fragments)}

    def append(self, arguments) -> None:
        if arguments is not None and arguments != "" and self.room > 0:
            text = fragment_text(arguments)
            if len(text) > self.room:
                text = text[: self.room]
            self.room -= len(text)
            self.fragments.append(text)


class Table:
    """One choice's simulated calls, in order, with the keys a strategy looks them up by. The calls cap
    counts over every choice (``counter``, shared), as identity routing's does."""

    __slots__ = ("by_id", "by_index", "calls", "counter", "room")

    def __init__(self, counter: list[int], room: int) -> None:
        self.calls: list[SimulatedCall] = []
        self.by_index: dict = {}
        self.by_id: dict = {}
        self.counter = counter  # [calls left], shared by the strategy's tables
        self.room = room

    def new(self, call_id, name) -> SimulatedCall:
        if self.counter[0] <= 0:
            return SimulatedCall(-1, call_id, name, 0)  # routed to like any call, never kept
        self.counter[0] -= 1
        call = SimulatedCall(len(self.calls), call_id, name, self.room)
        self.calls.append(call)
        return call


# A strategy may be defined outside the compiled core (a test's, a user's): it subclasses this.
@mypyc_attr(allow_interpreted_subclasses=True)
class Strategy:
    """Base: divergence bookkeeping and the final calls; subclasses decide ``route`` and, to be spared
    replaying, ``agrees``."""

    name: ClassVar[str] = ""
    code: ClassVar[str] = ""  # a code of the one catalogue (warnings.py), raised where its calls differ
    rule: ClassVar[str] = ""  # one line: what the strategy does
    clients: ClassVar[str] = ""  # one line: the kind of client that follows it
    # A rule that routes as identity routing does and differs only in what it keeps: judged at the end from
    # identity's calls (``derive``), never replayed delta by delta.
    derived: ClassVar[bool] = False

    def __init__(
        self, max_calls: int = DEFAULT_MAX_CALLS, max_argument_chars: int = DEFAULT_MAX_ARGUMENT_CHARS
    ) -> None:
        self.tables: dict[int, Table] = {}
        self.first_divergence: int | None = None
        self.calls_left = [max_calls]
        self.max_argument_chars = max_argument_chars

    def _table(self) -> Table:
        return Table(self.calls_left, self.max_argument_chars)

    def route(self, op: ToolCallDelta, table: Table) -> tuple[SimulatedCall | None, bool]:
        """Apply the delta to this strategy's table; return (the call it went to or None, created)."""
        raise NotImplementedError

    def agrees(self, op: ToolCallDelta, call, created: bool, index_taken: bool, state) -> bool:
        """Whether this strategy surely routes ``op`` as identity routing did: into ``call`` (None: into
        no call), a new one if ``created``, in ``state``, the choice's table after the delta;
        ``index_taken``: a call held the delta's index before it. While every answer is yes the
        strategy sleeps (its calls are identity's); at the first no it is replayed from there on.

        A false no costs a replay, a false yes a false "ok": this default never agrees, so a strategy
        that does not say is always replayed. The assembly asks a rule that several strategies share
        (the same ``agrees`` of their class) once per delta, of one of them."""
        return False

    def seed(self, choices: dict, exclude) -> None:
        """Start from identity routing's calls (all but ``exclude``): until now this strategy would
        have built exactly them."""
        for index, state in choices.items():
            table = self.tables[index] = self._table()
            for call in state.calls:
                if call is exclude:
                    continue
                simulated = table.new(call.id, call.name)
                if call.arguments:
                    simulated.fragments.append(call.arguments)
                    simulated.room -= len(call.arguments)
                if call.index is not None:
                    table.by_index.setdefault(call.index, simulated)
                if call.id is not None:
                    table.by_id.setdefault(call.id, simulated)

    def observe(self, op: ToolCallDelta, ordinal, created_by_identity: bool, name, call_id) -> None:
        """Route one delta; ``ordinal``, ``name`` and ``call_id`` are the identity call it went to (after
        the delta), ``ordinal`` None for a fragment identity routing dropped."""
        table = self.tables.get(op.choice)
        if table is None:
            table = self.tables[op.choice] = self._table()
        call, created = self.route(op, table)
        if call is not None and call.ordinal < 0:  # beyond the calls cap: dropped, as identity drops it
            _forget(table, call, op)
            call, created = None, False
        if self.first_divergence is None and _diverges(
            op, call, created, ordinal, created_by_identity, name, call_id
        ):
            self.first_divergence = op.event

    def calls(self, choice: int) -> list[dict]:
        table = self.tables.get(choice)
        return [call.final() for call in table.calls] if table else []

    def derive(self, choices: dict[int, ChoiceState]) -> bool:
        """A derived rule's calls, from identity's at the end: whether they differ anywhere."""
        return False


def _forget(table: Table, call: SimulatedCall, op: ToolCallDelta) -> None:
    """Unregister a call beyond the cap, so that a stream of new calls that never ends holds nothing."""
    for keys in (table.by_index, table.by_id):
        for key in (op.index, 0, op.id):
            try:
                if keys.get(key) is call:
                    del keys[key]
            except TypeError:  # an unhashable wire value is never a key
                pass


def _diverges(op, call, created, ordinal, identity_created, name, call_id) -> bool:
    if call is None or ordinal is None:
        # A fragment one side dropped: it matters only if it carried something.
        return (call is None) != (ordinal is None) and _carries(op)
    if created != identity_created or call.ordinal != ordinal:
        return created or identity_created or _carries(op)
    return call.name != name or (call.id or None) != call_id


def _carries(op: ToolCallDelta) -> bool:
    return bool(op.name) or (op.arguments is not None and op.arguments != "")


def _has_name(op: ToolCallDelta) -> bool:
    return type(op.name) is str and op.name != ""


def _starts_cleanly(op: ToolCallDelta, index_taken: bool) -> bool:
    # A call opening with a name, a real id (or none) and an index no call holds: every rule opens it.
    name, call_id = op.name, op.id
    return (
        not index_taken
        and type(name) is str
        and name != ""
        and (call_id is None or (type(call_id) is str and call_id not in PLACEHOLDER_IDS))
    )


@mypyc_attr(allow_interpreted_subclasses=True)
class RecencyStrategy(Strategy):
    name: ClassVar[str] = "recency"
    code: ClassVar[str] = "recency-misroute"
    rule: ClassVar[str] = (
        "a delta with a function name starts a call, any other fragment goes to the latest call"
    )
    clients: ClassVar[str] = "gateways and hand-written accumulators (for example Bifrost before its fix)"

    def agrees(self, op: ToolCallDelta, call, created: bool, index_taken: bool, state) -> bool:
        """A clean start, or a fragment without a name for the latest call."""
        if call is None or op.whole:
            return False
        if created:
            return _starts_cleanly(op, False)
        return not op.name and state.calls[-1] is call

    def route(self, op, table):
        if _has_name(op):
            call, created = table.new(op.id, op.name), True
        elif table.calls:
            call, created = table.calls[-1], False
        else:
            return None, False
        call.append(op.arguments)
        return call, created


@mypyc_attr(allow_interpreted_subclasses=True)
class IndexKeyedStrategy(Strategy):
    """Base of the strategies that look calls up by index: they share one rule for when they agree."""

    def agrees(self, op: ToolCallDelta, call, created: bool, index_taken: bool, state) -> bool:
        """A clean start, or a bare continuation (no id, no name, not even empty ones) naming its call's
        own index."""
        if call is None or op.whole or op.index is None:
            return False
        if created:
            return _starts_cleanly(op, index_taken)
        return (
            op.id is None
            and op.name is None
            and call.index == op.index
            and state.by_index.get(op.index) is call
        )


@mypyc_attr(allow_interpreted_subclasses=True)
class IndexOnlyStrategy(IndexKeyedStrategy):
    name: ClassVar[str] = "index-only"
    code: ClassVar[str] = "index-only-misroute"
    rule: ClassVar[str] = (
        "calls keyed by index alone (a missing index counts as 0), later fragments merged in"
    )
    clients: ClassVar[str] = (
        "SDK and framework mergers that key by index (for example `index ?? 0` in several SDKs; opencode)"
    )

    def route(self, op, table):
        key = 0 if op.index is None else op.index
        call = table.by_index.get(key)
        created = call is None
        if created:
            call = table.by_index[key] = table.new(op.id, op.name if _has_name(op) else None)
        else:
            if not call.id and op.id:
                call.id = op.id
            if not call.name and _has_name(op):
                call.name = op.name
        call.append(op.arguments)
        return call, created


@mypyc_attr(allow_interpreted_subclasses=True)
class IdThenIndexStrategy(IndexKeyedStrategy):
    name: ClassVar[str] = "id-then-index"
    code: ClassVar[str] = "id-then-index-misroute"
    rule: ClassVar[str] = (
        "match by id, then by index, else a new call if a name is present, else drop the fragment"
    )
    clients: ClassVar[str] = (
        "gateways fixed to route by identity, but index-first for new ids (for example Bifrost today)"
    )

    def route(self, op, table):
        call_id = op.id if type(op.id) is str and op.id else None  # a wire id of another type names nothing
        call = table.by_id.get(call_id) if call_id else None
        if call is None and op.index is not None:
            call = table.by_index.get(op.index)
        created = False
        if call is None:
            if not _has_name(op):
                return None, False
            call, created = table.new(call_id, op.name), True
            if op.index is not None:
                table.by_index[op.index] = call
        if call_id and call_id not in table.by_id:
            table.by_id[call_id] = call
        if not call.name and _has_name(op):
            call.name = op.name
        call.append(op.arguments)
        return call, created


@mypyc_attr(allow_interpreted_subclasses=True)
class FieldConcatStrategy(IndexKeyedStrategy):
    name: ClassVar[str] = "field-concat"
    code: ClassVar[str] = "field-concat-misroute"
    rule: ClassVar[str] = (
        "merged by index, every string field concatenated: ids and names as well as arguments"
    )
    clients: ClassVar[str] = (
        "generic delta mergers (for example openai-python's accumulate_delta, LangChain's merge_dicts, "
        "Pydantic AI over Chat Completions)"
    )

    def route(self, op, table):
        key = 0 if op.index is None else op.index
        call = table.by_index.get(key)
        if call is None:
            table.by_index[key] = call = table.new(op.id, op.name)
            created = True
        else:
            created = False
            if type(op.id) is str:
                call.id = (call.id or "") + op.id
            if type(op.name) is str:
                call.name = (call.name or "") + op.name
        call.append(op.arguments)
        return call, created


@mypyc_attr(allow_interpreted_subclasses=True)
class LastWinsStrategy(IndexKeyedStrategy):
    name: ClassVar[str] = "last-wins"
    code: ClassVar[str] = "last-wins-misroute"
    rule: ClassVar[str] = (
        "keyed by index, the latest non-null id and name overwrite the call's (empty strings included)"
    )
    clients: ClassVar[str] = (
        "mergers that assign instead of appending (for example Bifrost's current chat code, the OpenAI "
        "Agents SDK over Chat Completions, LiteLLM's SDK: its stream_chunk_builder)"
    )

    def route(self, op, table):
        key = 0 if op.index is None else op.index
        call = table.by_index.get(key)
        created = call is None
        if created:
            table.by_index[key] = call = table.new(op.id, op.name)
        else:
            if op.id is not None:
                call.id = op.id
            if op.name is not None:
                call.name = op.name
        call.append(op.arguments)
        return call, created


@mypyc_attr(allow_interpreted_subclasses=True)
class ParseEarlyStrategy(Strategy):
    name: ClassVar[str] = "parse-early"
    code: ClassVar[str] = "parse-early-misroute"
    rule: ClassVar[str] = (
        "each call finished as soon as its arguments parse as JSON at a fragment's end; its later "
        "fragments ignored"
    )
    clients: ClassVar[str] = (
        "the Vercel AI SDK's OpenAI-compatible providers (its isParsableJson check; opencode), "
        "Charm's fantasy (Crush) before its fix"
    )
    derived: ClassVar[bool] = True

    def __init__(
        self, max_calls: int = DEFAULT_MAX_CALLS, max_argument_chars: int = DEFAULT_MAX_ARGUMENT_CHARS
    ) -> None:
        super().__init__(max_calls, max_argument_chars)
        self.built: dict[int, list[dict]] = {}

    def derive(self, choices: dict[int, ChoiceState]) -> bool:
        """Where a call's arguments parsed at a fragment's end and more than white space came after (the
        result's ``early_end``, for arguments that are no JSON whole), this client keeps them as they were
        then; every other call is identity's."""
        if not any(call.cut is not None for state in choices.values() for call in state.calls):
            return False
        for index, state in choices.items():
            built = self.built[index] = []
            for call in state.calls:
                arguments = call.arguments
                cut = call.cut
                if cut is not None:
                    kept, ignored_from = cut
                    arguments = arguments[:kept]
                    if self.first_divergence is None or ignored_from < self.first_divergence:
                        self.first_divergence = ignored_from
                built.append({"id": call.id, "name": call.name, "arguments": arguments})
        return True

    def calls(self, choice: int) -> list[dict]:
        return self.built.get(choice, [])


# strategy name -> class; the accumulator, the CLI's --strategies and the addon option choose from these.
STRATEGIES: dict[str, type[Strategy]] = {
    strategy.name: strategy
    for strategy in (
        RecencyStrategy,
        IndexOnlyStrategy,
        IdThenIndexStrategy,
        FieldConcatStrategy,
        LastWinsStrategy,
        ParseEarlyStrategy,
    )
}
DEFAULT_STRATEGIES: tuple[str, ...] = tuple(STRATEGIES)
