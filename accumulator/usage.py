"""A response's token counts, the same way for every format: ``input`` (every input token, cached ones
included), ``output`` (reasoning included), ``cache_read``, ``cache_write`` and ``reasoning``, beside the
provider's own usage object, as it named it.

Each format module says where its counts are (``WireFormat.usage``: figure -> the provider's fields that
add up to it); this module reads them the one way: a count is a whole number of at least 0, a field that
is not (a string, a negative number) is left out and named in a note, as are figures that contradict
each other (cached tokens beyond the input, reasoning beyond the output, a part beyond the provider's own
total). What can be trusted is kept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

FIGURES = ("input", "output", "cache_read", "cache_write", "reasoning")
ABSENT = object()  # a field the provider's usage object does not have

# figure (or "total") -> the (field name, value) pairs that add up to it; ABSENT where a field is missing
UsageParts = dict[str, tuple[tuple[str, Any], ...]]


def dig(raw: dict, path: str) -> tuple[str, Any]:
    """(path, the value at this dotted path of ``raw``, or ABSENT)."""
    value: Any = raw
    for key in path.split("."):
        if type(value) is not dict or key not in value:
            return path, ABSENT
        value = value[key]
    return path, value


def either(raw: dict, camel: str, snake: str) -> tuple[str, Any]:
    """A field in either spelling (Gemini Live: the server's camelCase, the Python SDK's snake_case)."""
    found = dig(raw, camel)
    return found if found[1] is not ABSENT else dig(raw, snake)


def normalised(
    parts_of: Callable[[dict], UsageParts] | None,
    raw: dict | None,
    *,
    truncated: bool = False,
    why_none: str = "the provider sent no usage",
) -> dict:
    """The result's ``usage``: the five figures (null where unknown), ``provider`` (the provider's last
    usage object, or null) and ``notes`` (why a figure is missing or was left out). ``truncated``: the
    stream ended early (its counts, if any, may be partial); ``why_none``: the note when no usage came."""
    notes: list[str] = []
    figures: dict[str, int | None] = dict.fromkeys(FIGURES)
    if raw is None:
        notes.append(why_none)
        return {**figures, "provider": None, "notes": notes}
    parts = parts_of(raw) if parts_of is not None else {}
    total = _figure(parts.get("total", ()), notes)
    for name in FIGURES:
        figures[name] = _figure(parts.get(name, ()), notes)
    missing = [name for name in ("input", "output") if figures[name] is None and not _named(parts, name)]
    if missing:
        notes.append(f"no {' or '.join(missing)} count in the provider's usage")
    _consistent(figures, total, notes)
    if truncated:
        notes.append("the stream did not complete: the counts are the last the provider sent, maybe partial")
    return {**figures, "provider": raw, "notes": notes}


def _figure(parts: tuple[tuple[str, Any], ...], notes: list[str]) -> int | None:
    """The sum of the fields present, or None when none is, or when one of them is no count."""
    total = 0
    present = False
    for field, value in parts:
        if value is ABSENT or value is None:
            continue
        count = _count(value)
        if count is None:
            notes.append(f"{field} is {_shown(value)}, not a count: left out")
            return None
        total += count
        present = True
    return total if present else None


def _named(parts: UsageParts, figure: str) -> bool:
    """Whether a field of this figure was present but left out (its note already says so)."""
    return any(value is not ABSENT and value is not None for _, value in parts.get(figure, ()))


def _count(value: Any) -> int | None:
    if type(value) is int:
        return value if value >= 0 else None
    if type(value) is float and value.is_integer() and value >= 0:
        return int(value)  # a gateway that wrote 12.0
    return None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _consistent(figures: dict[str, int | None], total: int | None, notes: list[str]) -> None:
    """Leave out the figures that contradict others, and say so."""
    if total is not None:
        for name in ("input", "output"):
            value = figures[name]
            if value is not None and value > total:
                notes.append(f"{name} ({value}) is larger than the provider's total ({total}): left out")
                figures[name] = None
    given = figures["input"]
    cached = (figures["cache_read"] or 0) + (figures["cache_write"] or 0)
    if given is not None and cached > given:
        notes.append(f"cached tokens ({cached}) exceed the input ({given}): the cache counts are left out")
        figures["cache_read"] = figures["cache_write"] = None
    reasoning = figures["reasoning"]
    output = figures["output"]
    if reasoning is not None and output is not None and reasoning > output:
        notes.append(f"reasoning ({reasoning}) exceeds the output ({output}): left out")
        figures["reasoning"] = None
