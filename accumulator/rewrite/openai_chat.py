"""OpenAI Chat Completions: which chunk is what to the reorderers, and the edits only this format allows
(a name sent in two pieces, the name and id repeated, every call on index 0, indices given back).

Calls are told apart as identity routing does (``accumulator.assembly``): a known id, else a new id (a new
call even on a taken index), else the index (the call that took it last), else the only call.
"""

from __future__ import annotations

from ..ops import real_id
from .reorder import BOUNDARY, FINAL, FRAGMENT, PASS


class _Call:
    __slots__ = ("id", "index", "name", "ordinal")

    def __init__(self, ordinal: int, call_id: str | None, index: int | None) -> None:
        self.ordinal = ordinal
        self.id = call_id
        self.index = index
        self.name: str | None = None


class _Choice:
    __slots__ = ("by_id", "by_index", "calls")

    def __init__(self) -> None:
        self.calls: list[_Call] = []
        self.by_id: dict[str, _Call] = {}
        self.by_index: dict[int, _Call] = {}


class CallRouter:
    """Identity routing of tool-call entries, per choice (the rules of ``Assembly._route``)."""

    __slots__ = ("_choices", "count")

    def __init__(self) -> None:
        self._choices: dict[int, _Choice] = {}
        self.count = 0  # calls routed so far, every choice (the rewriter's calls cap reads it)

    def route(self, choice: int, entry: dict) -> tuple[_Call | None, bool]:
        state = self._choices.get(choice)
        if state is None:
            state = self._choices[choice] = _Choice()
        call_id = real_id(entry.get("id"))
        index = entry.get("index")
        if type(index) is not int:
            index = None
        if call_id is not None:
            call = state.by_id.get(call_id)
            if call is not None:
                return call, False
            return self._new(state, call_id, index), True
        if index is not None:
            call = state.by_index.get(index)
            if call is not None:
                return call, False
        elif len(state.calls) == 1:
            return state.calls[0], False
        if _name(entry):
            return self._new(state, None, index), True
        return None, False

    def _new(self, state: _Choice, call_id: str | None, index: int | None) -> _Call:
        self.count += 1
        call = _Call(len(state.calls), call_id, index)
        state.calls.append(call)
        if call_id is not None:
            state.by_id[call_id] = call
        if index is not None:
            state.by_index[index] = call
        return call


def _name(entry: dict) -> str | None:
    function = entry.get("function")
    if type(function) is dict:
        name = function.get("name")
        if type(name) is str and name:
            return name
    return None


def tool_entries(obj) -> list[tuple[int, dict]]:
    """(choice index, entry) of every tool-call entry in a chunk, in order."""
    out = []
    if type(obj) is not dict:
        return out
    choices = obj.get("choices")
    if type(choices) is not list:
        return out
    for choice in choices:
        if type(choice) is not dict:
            continue
        delta = choice.get("delta")
        if type(delta) is not dict:
            continue
        entries = delta.get("tool_calls")
        if type(entries) is not list:
            continue
        index = choice.get("index")
        index = index if type(index) is int else 0
        out += [(index, entry) for entry in entries if type(entry) is dict]
    return out


def _finishes(obj: dict) -> bool:
    choices = obj.get("choices")
    if type(choices) is not list:
        return False
    return any(
        type(c) is dict and type(c.get("finish_reason")) is str and c["finish_reason"] for c in choices
    )


def _carries_more(obj: dict) -> bool:
    """Whether a delta carries something besides tool calls (text, reasoning, a refusal...)."""
    for choice in obj["choices"]:
        delta = choice.get("delta") if type(choice) is dict else None
        if type(delta) is dict and any(v for k, v in delta.items() if k != "tool_calls" and k != "role"):
            return True
    return False


def _role(unit) -> int | None:
    """BOUNDARY, PASS, FINAL, or None for a tool-call chunk (whose key the caller works out)."""
    if unit.quiet:
        return PASS
    finishes = False
    tools = False
    for obj in unit.objs:
        if type(obj) is not dict or "error" in obj:
            return BOUNDARY  # [DONE], a mid-stream error, or a payload we cannot read
        finishes = finishes or _finishes(obj)
        if tool_entries(obj):
            if _carries_more(obj):
                # Text passes in place while calls are held: text riding with a call's fragment must
                # not be moved behind text that came after it.
                return BOUNDARY
            tools = True
    if tools:
        return FINAL if finishes else None
    return BOUNDARY if finishes else PASS


class IndexKeys:
    """Keys for ``interleave``: a chunk belongs to (choice, index) of its first entry. Calls that share an
    index stay in one group, in their order: interleaving them would leave their id-less fragments no
    longer routable, even by a correct client."""

    def __call__(self, unit) -> tuple[int, object]:
        role = _role(unit)
        if role is not None and role != FINAL:
            return role, None
        for obj in unit.objs:
            for choice, entry in tool_entries(obj):
                index = entry.get("index")
                return (role or FRAGMENT), (choice, index if type(index) is int else None)
        return BOUNDARY, None


class CallKeys:
    """Keys for ``serialize``: a chunk belongs to the call (identity routing) of its first entry."""

    def __init__(self) -> None:
        self._router = CallRouter()

    @property
    def calls_seen(self) -> int:
        return self._router.count

    def __call__(self, unit) -> tuple[int, object]:
        key = None
        for obj in unit.objs:  # every entry, whatever the chunk's role: the router must see each call start
            for choice, entry in tool_entries(obj):
                call, _ = self._router.route(choice, entry)
                if key is None and call is not None:
                    key = (choice, call.ordinal)
        role = _role(unit)
        if role is not None and role != FINAL:
            return role, None
        if key is None:
            return BOUNDARY, None  # fragments no call can claim: not ours to move
        return (role or FRAGMENT), key


def _head_chunk(obj: dict, choices: list) -> dict:
    """A chunk with ``obj``'s envelope (id, model, ...) and these choices: no usage, no finish."""
    head = {**obj, "choices": choices}
    if type(head.get("usage")) is dict:
        head["usage"] = None
    head.pop("x_groq", None)
    return head


def split_final(unit):
    """A chunk carrying both tool-call entries and a finish_reason, as two units: the entries (no finish),
    then everything else. None when there is nothing to split."""
    fragments, rest = [], []
    keep = {id(part[1]): part[0] for part in unit.parts}
    for obj in unit.objs:
        if type(obj) is not dict:
            return None
        if not _finishes(obj):
            (rest if not tool_entries(obj) else fragments).append(obj)
            continue
        if not tool_entries(obj):
            rest.append(obj)
            continue
        carried, left = [], []
        for choice in obj["choices"]:
            delta = choice.get("delta") if type(choice) is dict else None
            if type(delta) is dict and type(delta.get("tool_calls")) is list and delta["tool_calls"]:
                index = {"index": choice["index"]} if "index" in choice else {}
                carried.append({**index, "delta": {"tool_calls": delta["tool_calls"]}, "finish_reason": None})
                left.append({**choice, "delta": {k: v for k, v in delta.items() if k != "tool_calls"}})
            else:
                left.append(choice)
        fragments.append(_head_chunk(obj, carried))
        rest.append({**obj, "choices": left})
    if not fragments or not rest:
        return None
    return unit.derive(fragments, keep), unit.derive(rest, keep)


def _cut(name: str) -> int | None:
    """Where to cut a name so that a correct client (equal: ignore; a longer one starting with it:
    replace; else append) rebuilds it: near the middle, the second piece never starting with the first."""
    if len(name) < 2:
        return None
    for k in (len(name) // 2, len(name) // 2 + 1):
        if 0 < k < len(name) and not name[k:].startswith(name[:k]):
            return k
    return None


class ChatEdits:
    """The injections that edit chunks: ``split-names``, ``repeat-names``, ``collide-index``. Calls are
    routed on the chunks as they arrive, before any edit."""

    name = "edits"

    def __init__(self, split: bool, repeat: bool, collide: bool, counts: dict) -> None:
        self._split, self._repeat, self._collide = split, repeat, collide
        self._router = CallRouter()
        self.counts = counts
        self.names_split = 0

    @property
    def calls_seen(self) -> int:
        return self._router.count

    def push(self, unit) -> list:
        if unit.quiet:
            return [unit]
        changed: dict[int, list] = {}  # part -> the first chunks of the names it splits
        for i, obj in enumerate(unit.objs):
            if type(obj) is not dict:
                continue
            edited = False
            heads: list = []
            for choice, entry in tool_entries(obj):
                call, created = self._router.route(choice, entry)
                if call is None:
                    continue
                name = _name(entry)
                head = None
                first_name = name is not None and not call.name
                if name:
                    call.name = _grown(call.name, name)
                if first_name and self._split:
                    head = self._split_name(entry, name)
                    if head is not None:
                        heads.append((choice, head))
                        edited = True
                        self.names_split += 1
                        self._count("split-names")
                if self._repeat and (head is not None or not created) and self._repeat_identity(entry, call):
                    edited = True
                    self._count("repeat-names")
                if self._collide and call.id is not None:
                    collided = self._collide_index(entry, call)
                    if head is not None:
                        collided = self._collide_index(head, call) or collided
                    if collided:
                        edited = True
                        self._count("collide-index")
            if edited:
                changed[i] = heads
        if not changed:
            return [unit]
        objs = []
        keep = {}
        for i, (data, obj) in enumerate(unit.parts):
            heads = changed.get(i)
            if heads:
                by_choice: dict[int, list] = {}
                for choice, head in heads:
                    by_choice.setdefault(choice, []).append(head)
                choices = [
                    {"index": c, "delta": {"tool_calls": entries}, "finish_reason": None}
                    for c, entries in by_choice.items()
                ]
                objs.append(_head_chunk(obj, choices))
            elif heads is None:
                keep[id(obj)] = data
            objs.append(obj)
        return [unit.derive(objs, keep)]

    def _count(self, name: str) -> None:
        self.counts[name] = self.counts.get(name, 0) + 1

    @staticmethod
    def _split_name(entry: dict, name: str) -> dict | None:
        """Replace the entry by its name's second piece; return the first chunk's entry (None: no cut)."""
        k = _cut(name)
        if k is None or type(entry.get("index")) is not int:
            return None
        head = {"index": entry["index"]}
        if "id" in entry:
            head["id"] = entry.pop("id")
        head["type"] = entry.pop("type", "function")
        head["function"] = {"name": name[:k], "arguments": ""}
        entry["function"] = {**entry["function"], "name": name[k:]}
        return head

    @staticmethod
    def _repeat_identity(entry: dict, call: _Call) -> bool:
        if call.id is None or not call.name:
            return False
        function = entry.get("function")
        function = function if type(function) is dict else {}
        if entry.get("id") == call.id and entry.get("type") == "function" and function.get("name"):
            return False
        rest = {k: v for k, v in entry.items() if k not in ("index", "id", "type", "function")}
        index = {"index": entry["index"]} if "index" in entry else {}
        named = {"name": call.name, **{k: v for k, v in function.items() if k != "name"}}
        if function.get("name"):
            named["name"] = function["name"]
        entry.clear()
        entry.update({**index, "id": call.id, "type": "function", "function": named, **rest})
        return True

    @staticmethod
    def _collide_index(entry: dict, call: _Call) -> bool:
        if entry.get("index") == 0 and entry.get("id") == call.id:
            return False
        rest = {k: v for k, v in entry.items() if k not in ("index", "id")}
        entry.clear()
        entry.update({"index": 0, "id": call.id, **rest})
        return True


class Reindex:
    """The ``reindex`` repair: each distinct call (per choice) gets its own index, 0, 1, 2... in order of
    first appearance; an entry without id goes, through its index, to the call that took it last. With its
    own index a continuation needs no id, and a name it repeats verbatim adds nothing: both are dropped,
    since clients that concatenate every field (openai-python's ``accumulate_delta``) would double them."""

    name = "reindex"

    def __init__(self, counts: dict) -> None:
        self._router = CallRouter()
        self.counts = counts

    @property
    def calls_seen(self) -> int:
        return self._router.count

    def push(self, unit) -> list:
        if unit.quiet:
            return [unit]
        for i, obj in enumerate(unit.objs):
            if type(obj) is not dict:
                continue
            edited = False
            for choice, entry in tool_entries(obj):
                call, created = self._router.route(choice, entry)
                if call is None:
                    continue
                repeated = not created and self._drop_repeats(entry, call)
                name = _name(entry)
                if name:
                    call.name = _grown(call.name, name)
                if entry.get("index") != call.ordinal:
                    rest = {k: v for k, v in entry.items() if k != "index"}
                    entry.clear()
                    entry.update({"index": call.ordinal, **rest})
                    self.counts["reindex"] = self.counts.get("reindex", 0) + 1
                    edited = True
                elif repeated:
                    edited = True
            if edited:
                unit.rewrite(i, obj)
        return [unit]

    def _drop_repeats(self, entry: dict, call: _Call) -> bool:
        dropped = False
        if call.id is not None and entry.get("id") == call.id:
            del entry["id"]
            dropped = True
        function = entry.get("function")
        if type(function) is dict and call.name and function.get("name") == call.name:
            entry["function"] = {k: v for k, v in function.items() if k != "name"}
            dropped = True
        if dropped:
            self.counts["reindex-dropped-repeats"] = self.counts.get("reindex-dropped-repeats", 0) + 1
        return dropped


def _grown(current: str | None, piece: str) -> str:
    """A call's name after one more piece, as a correct client grows it (FORMATS.md rule 4)."""
    return piece if not current or piece.startswith(current) else current + piece
