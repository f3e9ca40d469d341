"""OpenAI Responses: a function call is an output item; its events name it by ``output_index`` (else by
``item_id``). The run is the span of consecutive function-call items: any other event ends it, so that
``output_item.added`` events keep their output_index order (openai-python appends items as they are added
and then indexes ``snapshot.output[event.output_index]``). ``sequence_number`` is renumbered on the way
out so it stays strictly increasing.
"""

from __future__ import annotations

from .reorder import BOUNDARY, END, FRAGMENT, PASS, START

_FRAGMENTS = ("response.function_call_arguments.delta", "response.function_call_arguments.done")


class ItemKeys:
    def __init__(self) -> None:
        self._index_of_item: dict[str, int] = {}

    def __call__(self, unit) -> tuple[int, object]:
        if unit.quiet:
            return PASS, None
        obj = unit.obj
        if type(obj) is not dict:
            return BOUNDARY, None
        kind = obj.get("type")
        if type(kind) is not str:
            kind = unit.name
        if kind in _FRAGMENTS:
            key = self._key(obj)
            return (FRAGMENT, key) if key is not None else (BOUNDARY, None)
        if kind in ("response.output_item.added", "response.output_item.done"):
            item = obj.get("item")
            index = obj.get("output_index")
            if type(item) is dict and item.get("type") == "function_call" and type(index) is int:
                if kind.endswith("added"):
                    if type(item.get("id")) is str:
                        self._index_of_item[item["id"]] = index
                    return START, index
                return END, index
        return BOUNDARY, None

    def _key(self, obj: dict) -> int | None:
        index = obj.get("output_index")
        if type(index) is int:
            return index
        item_id = obj.get("item_id")
        return self._index_of_item.get(item_id) if type(item_id) is str else None


class SequenceNumbers:
    """Numbers the events that leave 1, 2, 3... on from the first one's own number; an event whose number
    is already right keeps its bytes."""

    name = "sequence"

    def __init__(self, counts: dict) -> None:
        self._last: int | None = None
        self.counts = counts

    def push(self, unit) -> list:
        if unit.quiet:
            return [unit]
        for i, obj in enumerate(unit.objs):
            if type(obj) is not dict:
                continue
            number = obj.get("sequence_number")
            if type(number) is not int:
                continue
            wanted = number if self._last is None else self._last + 1
            self._last = wanted
            if wanted != number:
                obj["sequence_number"] = wanted
                unit.rewrite(i, obj)
                self.counts["sequence_number"] = self.counts.get("sequence_number", 0) + 1
        return [unit]
