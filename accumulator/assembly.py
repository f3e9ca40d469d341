"""Identity-routed assembly: the tool-call table of each choice, and its text buffers.

A fragment goes to the call it names, never to "the latest" one: a known id first, then a new id (a new
call, even when its index is taken), then the index (a map, never list positions). Fragments are kept
as lists and joined once at the end. Every tool-call delta is also shown to the hazard strategies,
with where identity routing put it, so they can say where they first went astray.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import orjson

from .ops import (
    Finish,
    Meta,
    ProviderError,
    StreamEnd,
    TextDelta,
    ToolCallDelta,
    Usage,
    real_id,
)
from .warnings import WarningLog

if TYPE_CHECKING:  # strategies.py imports this module
    from .strategies import Strategy

_ORPHAN_TEXT_CAP = 64 * 1024
# Resource caps of one stream (the addon's toolcall_lens_max_calls and toolcall_lens_argument_cap).
DEFAULT_MAX_CALLS = 1000  # tool calls rebuilt per stream; later ones are counted, not kept
DEFAULT_MAX_ARGUMENT_CHARS = 1024 * 1024  # argument characters kept per call; the rest is counted


class ToolCall:
    __slots__ = (
        "builtin",
        "custom",
        "cut",
        "deltas",
        "ends",
        "first_at",
        "first_event",
        "fragments",
        "id",
        "index",
        "interleaved",
        "last_at",
        "last_event",
        "name",
        "name_repeated",
        "namespace",
        "ordinal",
        "room",
        "truncated",
    )

    def __init__(
        self, ordinal: int, call_id: str | None, index: int | None, event: int, now, room: int
    ) -> None:
        self.ordinal = ordinal  # position in the choice's table, in order of creation
        self.id = call_id
        self.index = index
        self.name: str | None = None
        self.fragments: list[str] = []
        self.name_repeated = False
        # Timing facts: which events (and, with a clock, when) its deltas came, how many, and whether
        # another call's deltas came between two of its own.
        self.deltas = 0
        self.first_event = self.last_event = event
        self.first_at = self.last_at = now
        self.interleaved = False
        self.room = room  # argument characters it may still keep (the per-call cap)
        self.truncated = False  # arguments beyond the cap arrived and were not kept
        self.custom = False  # a custom tool's call: its arguments are raw text, not JSON
        self.namespace: str | None = None  # the namespace that declared its tool (Responses)
        self.builtin: str | None = None  # the built-in tool whose call it is (Responses' tool_search)
        # Where a fragment ended in a closing bracket (white space aside), the only places its arguments
        # could have parsed whole before the end: flat pairs (that length, the event of the next fragment
        # that added more than white space, -1 until one does). None: no such fragment yet;
        # _TOO_MANY_ENDS: too many to keep. What a client that finishes a call as soon as its arguments
        # parse would have cut is decided from them at the end (``early_end``), for arguments that are
        # no JSON whole.
        self.ends: list[int] | None = None
        self.cut: tuple[int, int] | None = None  # (length kept, event of the first fragment ignored)

    @property
    def arguments(self) -> str:
        fragments = self.fragments
        if len(fragments) > 1:
            self.fragments = fragments = ["".join(fragments)]
        return fragments[0] if fragments else ""


class ChoiceState:
    __slots__ = (
        "by_id",
        "by_index",
        "calls",
        "finish_reason",
        "index",
        "last_call",
        "orphans",
        "reasoning",
        "refusal",
        "text",
    )

    def __init__(self, index: int) -> None:
        self.index = index
        self.calls: list[ToolCall] = []
        self.by_id: dict[str, ToolCall] = {}
        self.by_index: dict[int, ToolCall] = {}
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.refusal: list[str] = []
        self.finish_reason: str | None = None
        self.orphans: list[ToolCallDelta] = []
        self.last_call: ToolCall | None = None  # the call the previous tool-call delta went to


_SPACE = " \t\r\n"
_ENDS = ("}", "]")
_MAX_ENDS = 4096  # closing-bracket fragment ends kept per call (code in an argument holds many)
# A call with more: no parse-early verdict for it. Compared by identity, never changed (its last item is
# not -1, so no fragment is recorded in it).
_TOO_MANY_ENDS: list[int] = [0, 0]


def _end(call: ToolCall, length: int) -> None:
    """A fragment of the call ended in a closing bracket, its arguments ``length`` long there (white
    space after the bracket aside)."""
    ends = call.ends
    if ends is None:
        call.ends = [length, -1]
    elif ends is not _TOO_MANY_ENDS:
        if len(ends) >= 2 * _MAX_ENDS:
            call.ends = _TOO_MANY_ENDS
        else:
            ends.append(length)
            ends.append(-1)


def early_end(call: ToolCall, arguments: str) -> tuple[int, int] | None:
    """For arguments that are no JSON whole: the length at which they first parsed as one JSON value at
    a fragment's end, and the event of the next fragment that added more, if any: what a client that
    finishes a call as soon as its arguments parse keeps, and where it stops reading."""
    ends = call.ends
    if ends is None or ends is _TOO_MANY_ENDS or all(ends[i] == -1 for i in range(1, len(ends), 2)):
        return None
    first = first_value(arguments)
    if first is None:
        return None
    end = first[1]
    for i in range(0, len(ends), 2):
        if ends[i] == end and ends[i + 1] != -1:
            return end, ends[i + 1]
    return None


def first_value(text: str) -> tuple[Any, int] | None:
    """The JSON value ``text`` begins with (white space aside), and where it ends; None if it begins with
    none."""
    try:
        return _DECODER.raw_decode(text, len(text) - len(text.lstrip()))
    except ValueError:
        return None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is no JSON")  # NaN and Infinity: Python's json takes them, JSON does not


_DECODER = json.JSONDecoder(parse_constant=_no_constant)


def fragment_text(arguments: Any) -> str:
    """A delta's arguments as text: a string as is, any other JSON value serialised once."""
    if type(arguments) is str:
        return arguments
    return orjson.dumps(arguments).decode()


class Assembly:
    """Applies normalized operations; holds everything a result is built from."""

    def __init__(
        self,
        warnings: WarningLog,
        strategies: list[Strategy],
        max_calls: int = DEFAULT_MAX_CALLS,
        max_argument_chars: int = DEFAULT_MAX_ARGUMENT_CHARS,
    ) -> None:
        self._warn = warnings
        self.max_calls = max_calls
        self.max_argument_chars = max_argument_chars
        self.calls_total = 0  # calls rebuilt, over every choice
        self.calls_dropped = 0  # calls the cap refused
        self.deltas_dropped = 0  # their fragments, and every fragment with no call once the cap was hit
        self.strategies = strategies
        self.choices: dict[int, ChoiceState] = {}
        self.model: str | None = None
        self.response_id: str | None = None
        self.usage: dict | None = None
        self.errors: list = []
        self.ended = False  # the format's own end marker was seen
        self.now: float | None = None  # arrival time of the events being applied, when a clock is given
        # The strategies asleep, grouped by their rule (their class's ``Strategy.agrees``) so that a rule
        # several strategies share is asked once per delta; and the strategies awake (see _tool_delta).
        self.sleeping: dict[Any, list[Strategy]] = {}  # rule -> the strategies asleep that follow it
        for strategy in strategies:
            if not strategy.derived:  # a rule judged from identity's calls at the end never replays
                self.sleeping.setdefault(type(strategy).agrees, []).append(strategy)
        # One strategy of each rule, asked on every tool-call delta (a method call, compiled natively).
        self.dormant: tuple[Strategy, ...] = tuple(group[0] for group in self.sleeping.values())
        self.awake: list[Strategy] = []
        self.first_token: tuple[int, float | None] | None = None  # (event, time) of the first text or call

    def apply(self, op) -> None:
        kind = type(op)
        if kind is ToolCallDelta:
            self._tool_delta(op)
        elif kind is TextDelta:
            getattr(self._choice(op.choice), op.kind).append(op.text)
            if self.first_token is None:
                self.first_token = (op.event, self.now)
        elif kind is Finish:
            self._choice(op.choice).finish_reason = op.reason
        elif kind is Meta:
            # Only a non-empty string is a model or an id (a number there is the provider's mistake).
            if op.model and type(op.model) is str:
                self.model = op.model
            if op.response_id and type(op.response_id) is str:
                self.response_id = op.response_id
        elif kind is Usage:
            self.usage = op.usage
        elif kind is ProviderError:
            self.errors.append(op.error)
            self._warn.add(
                "provider-error",
                f"event {op.event}: provider error: {error_text(op.error)}",
                event=op.event,
                error=op.error,
            )
        elif kind is StreamEnd:
            self.ended = True

    def _choice(self, index: int) -> ChoiceState:
        state = self.choices.get(index)
        if state is None:
            state = self.choices[index] = ChoiceState(index)
        return state

    def _tool_delta(self, op: ToolCallDelta) -> None:
        state = self.choices.get(op.choice) or self._choice(op.choice)
        dormant = self.dormant
        index = op.index
        index_taken = bool(dormant) and index in state.by_index
        if op.id is None and not op.whole and index is not None and (call := state.by_index.get(index)):
            created = False  # a continuation naming its call by index alone: _route's first answer
        else:
            call, created = self._route(state, op)
        if dormant:
            # A hazard strategy sleeps while its own rule says it surely routes every delta as identity
            # routing does (then its calls are identity's: nothing to simulate). At the first delta it
            # might route elsewhere it wakes, takes a copy of identity's calls as they were before this
            # delta, and from then on replays every delta itself.
            for asked in dormant:
                if not asked.agrees(op, call, created, index_taken, state):
                    self._wake(asked, call if created else None)
        if self.first_token is None:
            self.first_token = (op.event, self.now)
        if call is None:
            if self.calls_dropped:
                self.deltas_dropped += 1  # most likely a fragment of a refused call: not an orphan
            else:
                state.orphans.append(op)
        else:
            previous = state.last_call
            if previous is not call:
                if previous is not None and call.deltas:  # back to a call after another call's delta
                    call.interleaved = previous.interleaved = True
                state.last_call = call
            call.deltas += 1
            call.last_event = op.event
            call.last_at = self.now
            if op.custom:
                call.custom = True
            name = op.name
            if name and type(name) is str:
                self._set_name(call, name, op.event, state.index)
                namespace = op.namespace  # given with a name only: nothing more on an argument delta
                if namespace and type(namespace) is str:
                    call.namespace = namespace
                if op.builtin is not None:
                    call.builtin = op.builtin
            arguments = op.arguments
            if arguments is not None and arguments != "":
                text = arguments if type(arguments) is str else fragment_text(arguments)
                if len(text) > call.room:
                    text = self._over_cap(call, text, op.event, state.index)
                if text:
                    ends = call.ends
                    if ends is not None and ends[-1] == -1 and not text.isspace():
                        ends[-1] = op.event  # the first fragment a parse-early client would ignore
                    call.fragments.append(text)
                    call.room -= len(text)
                    last = text[-1]
                    if last == "}" or last == "]" or (last in _SPACE and text.rstrip()[-1:] in _ENDS):
                        length = self.max_argument_chars - call.room
                        _end(call, length - (len(text) - len(text.rstrip())))
        if self.awake:
            if call is None and self.calls_dropped:
                return  # past the calls cap: what identity drops, the strategies need not route
            if call is None:
                for strategy in self.awake:
                    strategy.observe(op, None, False, None, None)
            else:
                for strategy in self.awake:
                    strategy.observe(op, call.ordinal, created, call.name, call.id)

    def _over_cap(self, call: ToolCall, text: str, event: int, choice: int) -> str:
        """The part of ``text`` the call still has room for; the first time, says the cap was hit."""
        if not call.truncated:
            call.truncated = True
            self._warn.add(
                "arguments-cap",
                f"event {event}: call {call.id or '#' + str(call.ordinal)} ({call.name}): arguments beyond "
                f"{self.max_argument_chars} characters were not kept",
                event=event,
                choice=choice,
                id=call.id,
                limit=self.max_argument_chars,
            )
        return text[: call.room]

    def _wake(self, asked: Strategy, just_created: ToolCall | None) -> None:
        # A new tuple, not an edit: _tool_delta is still iterating over the old one.
        self.dormant = tuple(strategy for strategy in self.dormant if strategy is not asked)
        for strategy in self.sleeping.pop(type(asked).agrees):
            strategy.seed(self.choices, just_created)
            self.awake.append(strategy)

    def awake_strategies(self) -> set[str]:
        """The strategies that ran; the others rebuilt the identity result exactly."""
        return {strategy.name for strategy in self.awake}

    def route(self, op: ToolCallDelta) -> tuple[ToolCall | None, bool]:
        """The call a tool-call delta names by identity, opened if the delta opens one; nothing else of
        the delta is applied. The rewriter tells calls apart with this, as the analysis does."""
        state = self.choices.get(op.choice) or self._choice(op.choice)
        return self._route(state, op)

    def _route(self, state: ChoiceState, op: ToolCallDelta) -> tuple[ToolCall | None, bool]:
        call_id = real_id(op.id)
        index = op.index
        if op.whole:
            if index is not None and index in state.by_index:
                self._collision(state, op, call_id, index)
            return _created(self._new_call(state, call_id, index, op.event))
        if call_id is not None:
            call = state.by_id.get(call_id)
            if call is not None:
                return call, False
            if index is not None and index in state.by_index:
                self._collision(state, op, call_id, index)
            return _created(self._new_call(state, call_id, index, op.event))
        if index is not None:
            call = state.by_index.get(index)
            if call is not None:
                return call, False
        elif len(state.calls) == 1:
            return state.calls[0], False
        if op.name and type(op.name) is str:
            return _created(self._new_call(state, None, index, op.event))
        return None, False

    def _collision(self, state: ChoiceState, op: ToolCallDelta, call_id: str | None, index: int) -> None:
        holder = state.by_index[index]
        self._warn.add(
            "index-collision",
            f"event {op.event}: new call {call_id or '(no id)'} arrived with index {index}, "
            f"already held by call {holder.id or '#' + str(holder.ordinal)}",
            event=op.event,
            choice=state.index,
            index=index,
            id=call_id,
            existing_id=holder.id,
        )

    def _new_call(
        self, state: ChoiceState, call_id: str | None, index: int | None, event: int
    ) -> ToolCall | None:
        if self.calls_total >= self.max_calls:
            if not self.calls_dropped:
                self._warn.add(
                    "calls-cap",
                    f"event {event}: more than {self.max_calls} tool calls; later calls are counted, not rebuilt",
                    event=event,
                    limit=self.max_calls,
                )
            self.calls_dropped += 1
            return None
        self.calls_total += 1
        call = ToolCall(len(state.calls), call_id, index, event, self.now, self.max_argument_chars)
        state.calls.append(call)
        if call_id is not None:
            state.by_id[call_id] = call
        if index is not None:
            state.by_index[index] = call
        return call

    def _set_name(self, call: ToolCall, name: str, event: int, choice: int) -> None:
        current = call.name
        if not current:
            call.name = name
        elif name == current:
            if not call.name_repeated:
                call.name_repeated = True
                self._warn.add(
                    "name-repeated",
                    f"event {event}: the name {name!r} of call {call.id or '#' + str(call.ordinal)} was sent again",
                    event=event,
                    choice=choice,
                    id=call.id,
                    name=name,
                )
        elif name.startswith(current):
            call.name = name
        else:
            call.name = current + name
            self._warn.add(
                "name-split",
                f"event {event}: call {call.id or '#' + str(call.ordinal)} name continued: "
                f"{current!r} + {name!r}",
                event=event,
                choice=choice,
                id=call.id,
                pieces=[current, name],
            )


def _created(call: ToolCall | None) -> tuple[ToolCall | None, bool]:
    return call, call is not None


def error_text(error: Any) -> str:
    if type(error) is dict:
        inner = error.get("error")  # {"error": {"message": ...}}, as most APIs wrap it
        message = error.get("message") or (inner.get("message") if type(inner) is dict else None)
        if message:
            return str(message)
    return orjson.dumps(error, default=str).decode()[:300]
