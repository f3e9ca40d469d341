"""Reordering the tool calls of a run: one reorderer per policy (``interleave``, ``serialize``), told by a
small per-format classifier what each event is. A run is the span of consecutive tool calls; a boundary
(a finish, a text block, the end) ends it, and everything held is released, in a valid order, before it.
"""

from __future__ import annotations

from collections.abc import Callable

# What an event is to a reorderer.
PASS = 0  # passes in place, even inside a run (a comment, a ping, a text chunk between fragments)
BOUNDARY = 1  # ends the run: everything held goes out before it
START = 2  # opens a call (its key names it)
FRAGMENT = 3  # continues a call
END = 4  # closes a call (Anthropic content_block_stop, Responses output_item.done, ...)
FINAL = 5  # a fragment that also ends the run (a Chat Completions chunk carrying finish_reason)

Classify = Callable[[object], tuple[int, object]]
SplitFinal = Callable[[object], tuple[object, object] | None]


class Reorderer:
    """The bookkeeping both policies share: the run's held units by call, in order of first appearance,
    the held totals, and which calls had a unit leave at another place than it came (counted, not kept:
    a run that never ends holds no more than its held units)."""

    name = ""

    def __init__(self, classify: Classify, split_final: SplitFinal | None = None) -> None:
        self._classify = classify
        self._split_final = split_final
        self.holding = True  # False while a hold cap flushes the pipeline: nothing is held then
        self.held_events = 0
        self.held_bytes = 0
        self.calls_reordered = 0
        self.calls_seen = 0  # calls that opened a group or took a place, over every run
        self._groups: dict = {}  # call key -> its held units, in order of first appearance
        self._arrivals = 0  # units of this run that arrived
        self._sent = 0  # units of this run that left
        self._places: dict = {}  # id(held unit) -> (its place in arrival order, its key)
        self._moved: set = set()  # keys of the calls with a unit that left at another place

    def push(self, unit) -> list:
        role, key = self._classify(unit)
        if role == PASS:
            return [unit]
        if role == BOUNDARY:
            return [*self._end_run(), unit]
        if not self.holding:
            return [unit]
        if role == FINAL:
            if self.held_events > len(self._groups.get(key, ())) and self._split_final is not None:
                # Other calls are held: their fragments must go out before the finish this unit carries.
                halves = self._split_final(unit)
                if halves is not None:
                    fragment, rest = halves
                    return [*self._add(fragment, FRAGMENT, key), *self._end_run(), rest]
            return [*self._add(unit, FRAGMENT, key), *self._end_run()]
        return self._add(unit, role, key)

    def flush(self) -> list:
        """End of stream: the run ends."""
        return self._end_run()

    def drain(self) -> list:
        """The hold cap was exceeded: everything held, in arrival order; the run starts afresh."""
        held = [unit for group in self._groups.values() for unit in group]
        places = self._places
        released = sorted(held, key=lambda unit: places[id(unit)][0])
        self._settle(released)
        return released

    # -- what the policies implement ---------------------------------------------------------------------

    def _add(self, unit, role: int, key) -> list:
        raise NotImplementedError

    def _release(self) -> list:
        """Everything held, in the policy's order, at the end of a run."""
        raise NotImplementedError

    # -- shared ------------------------------------------------------------------------------------------

    def _arrive(self, unit, key, held: bool) -> None:
        """A unit of the run arrived; ``held``: it waits, else it leaves now."""
        place = self._arrivals
        self._arrivals += 1
        if held:
            self._places[id(unit)] = (place, key)
        else:
            self._leave(place, key)

    def _leave(self, place: int, key) -> None:
        if place != self._sent:
            self._moved.add(key)
        self._sent += 1

    def _hold(self, unit, key) -> None:
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = []
        group.append(unit)
        self.held_events += 1
        self.held_bytes += unit.size

    def _end_run(self) -> list:
        if not self._arrivals:
            return []
        released = self._release() if self.held_events else []
        self._settle(released)
        return released

    def _released(self, units: list) -> list:
        """Held units leaving now, in this order."""
        places = self._places
        for unit in units:
            place, key = places.pop(id(unit))
            self._leave(place, key)
        return units

    def _settle(self, released: list) -> None:
        """Count the calls whose units left in another order than they came, then forget the run."""
        self._released(released)
        self.calls_reordered += len(self._moved)
        self._groups = {}
        self._arrivals = self._sent = 0
        self._places = {}
        self._moved = set()
        self.held_events = 0
        self.held_bytes = 0
        self._reset()

    def _reset(self) -> None:
        pass


class Interleaver(Reorderer):
    """Holds the run's units per call; at the run's end sends them round-robin: the first unit of every
    call (in order of first appearance), then the second of each, and so on. Each call keeps its order."""

    name = "interleave"

    def _add(self, unit, role: int, key) -> list:
        if key not in self._groups:
            self.calls_seen += 1
        self._arrive(unit, key, held=True)
        self._hold(unit, key)
        return []

    def _release(self) -> list:
        out = []
        active = [iter(group) for group in self._groups.values()]
        while active:
            still = []
            for units in active:
                unit = next(units, None)
                if unit is not None:
                    out.append(unit)
                    still.append(units)
            active = still
        return out


class Serializer(Reorderer):
    """Sends each call's units contiguously, calls in order of first appearance. The earliest unfinished
    call of the run streams live; a later call's units wait until every earlier call has ended (its END
    unit, where the format has one) or the run ends, and then leave together."""

    name = "serialize"

    def __init__(self, classify: Classify, split_final: SplitFinal | None = None) -> None:
        super().__init__(classify, split_final)
        self._reset()

    def _reset(self) -> None:
        self._position: dict = {}  # call key -> its place in the run's order of first appearance
        self._order: list = []
        self._live = 0  # the place of the call that streams live
        self._ended: set = set()  # keys of held calls whose END is held too

    def _add(self, unit, role: int, key) -> list:
        place = self._position.get(key)
        if place is None:
            place = self._position[key] = len(self._order)
            self._order.append(key)
            self.calls_seen += 1
        if place < self._live:
            # A call that already ended and left: nothing to keep contiguous with any more.
            self._arrive(unit, key, held=False)
            return [unit]
        if place > self._live:
            self._arrive(unit, key, held=True)
            self._hold(unit, key)
            if role == END:
                self._ended.add(key)
            return []
        self._arrive(unit, key, held=False)
        out = [unit]
        if role == END:
            out += self._released(self._advance())
        return out

    def _advance(self) -> list:
        """The live call ended: the held calls that follow go out, up to the first one still open."""
        out: list = []
        order = self._order
        while True:
            self._live += 1
            if self._live >= len(order):
                return out
            key = order[self._live]
            group = self._groups.pop(key, [])
            for unit in group:
                self.held_events -= 1
                self.held_bytes -= unit.size
            out += group
            if key not in self._ended:
                return out

    def _release(self) -> list:
        out = []
        for key in self._order[self._live :]:
            out += self._groups.get(key, ())
        return out


class ContentBlockKeys:
    """The classifier of formats whose tool calls are content blocks at an index: ``start`` opens a block
    (a tool call when ``is_tool(event)``), then ``delta`` and ``stop`` events name its index. Any other event
    ends the run, but those named in ``passing`` (keep-alives) and quiet units, which pass in place.
    ``event_of(unit)`` finds the event in a unit and ``kind_of(unit, event)`` its kind; ``index_field`` holds
    the block index."""

    def __init__(
        self, *, start, delta, stop, is_tool, index_field, kind_of, event_of=None, passing=()
    ) -> None:
        self._start, self._delta, self._stop = start, delta, stop
        self._is_tool = is_tool
        self._index_field = index_field
        self._kind_of = kind_of
        self._event_of = event_of or (lambda unit: unit.obj)
        self._passing = passing
        self._tools: set[int] = set()  # indices of the tool blocks started so far

    def __call__(self, unit) -> tuple[int, object]:
        if unit.quiet:
            return PASS, None
        event = self._event_of(unit)
        if type(event) is not dict:
            return BOUNDARY, None
        kind = self._kind_of(unit, event)
        if kind in self._passing:
            return PASS, None
        index = event.get(self._index_field)
        if type(index) is not int:
            return BOUNDARY, None
        if kind == self._start:
            if self._is_tool(event):
                self._tools.add(index)
                return START, index
            self._tools.discard(index)
            return BOUNDARY, None
        if index in self._tools:
            if kind == self._delta:
                return FRAGMENT, index
            if kind == self._stop:
                return END, index
        return BOUNDARY, None
