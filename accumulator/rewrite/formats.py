"""What applies to each wire format, why the rest does not, and the stages that carry it out, all read
from the format's own ``RewriteSupport`` (``accumulator.formats``)."""

from __future__ import annotations

from .. import formats
from .reorder import Interleaver, Serializer

INJECTIONS = ("interleave", "split-names", "repeat-names", "collide-index", "seed-args", "rechunk")
# The one injection that changes what the stream means: its calls' arguments are no JSON any more (a
# broken upstream's shape, to see what a client does with it); the others only reshape the same calls.
BREAKING_INJECTIONS = ("seed-args",)
REPAIRS = ("serialize", "reindex")
_EDITS = ("split-names", "repeat-names", "collide-index", "seed-args")
_VERBS = {
    "interleave": "interleave",
    "serialize": "serialize",
    "split-names": "split a name across",
    "repeat-names": "repeat a name on",
    "collide-index": "give a colliding index",
    "seed-args": "seed with an empty object",
    "reindex": "reindex",
}


def framing(format: str) -> str:
    """How the rewriter cuts the body: into SSE blocks or AWS frames, or not at all ("bytes") where every
    call arrives whole and only ``rechunk`` applies. KeyError for a format it does not know."""
    wire = formats.FORMATS[format]
    if wire.rewrite.whole is not None:
        return "bytes"
    return wire.framings[0]


def skip_reason(format: str, name: str) -> str | None:
    """Why ``name`` does not apply to ``format`` (one line), or None when it does."""
    if name == "rechunk":
        return None
    support = formats.FORMATS[format].rewrite
    if support.whole is not None:
        return f"every call arrives whole, in {support.whole}: no fragments to {_VERBS[name]}"
    if name in ("interleave", "serialize"):
        return None if support.keys is not None else f"no reorder keys for {format}"
    if name == "reindex":
        if support.reindex is not None:
            return None
        return f"a repair for {_having('reindex')} streams: {format} fragments name their call by {support.key} alone"
    if support.edits is not None:
        return None
    if name == "split-names" and support.name_whole_in:
        return f"the name arrives whole in {support.name_whole_in}, with no field to continue it"
    if name == "seed-args":
        return f"a shape of {_having('edits')} streams a translator builds; not sent in {format}"
    return (
        f"a shape of {_having('edits')} streams: {format} fragments name their call by {support.key} alone, "
        "with no id or name"
    )


def _having(stage: str) -> str:
    """The formats whose rewrite support has this stage, by name (the registry knows them; we do not)."""
    return " and ".join(name for name, wire in formats.FORMATS.items() if getattr(wire.rewrite, stage))


def supported(format: str) -> frozenset[str]:
    """The injections and repairs that apply to ``format`` (empty for a format it does not know)."""
    if format not in formats.FORMATS:
        return frozenset()
    return frozenset(name for name in (*INJECTIONS, *REPAIRS) if skip_reason(format, name) is None)


def build_stages(format: str, applied: set[str], counts: dict) -> list:
    """The stages in order: injections (reorder, then edits), repairs (edits, then reorder), fix-ups."""
    support = formats.FORMATS[format].rewrite
    # ``applied`` holds only names ``skip_reason`` lets through: the factory each needs is set.
    keys, make_edits, reindex = support.keys, support.edits, support.reindex
    stages: list = []
    if "interleave" in applied and keys is not None:
        stages.append(Interleaver(keys("interleave"), support.split_final))
    edits = [name in applied for name in _EDITS]
    if any(edits) and make_edits is not None:
        stages.append(make_edits(*edits, counts))
    if "reindex" in applied and reindex is not None:
        stages.append(reindex(counts))
    if "serialize" in applied and keys is not None:
        stages.append(Serializer(keys("serialize"), support.split_final))
    if support.fixups is not None and stages:
        stages.append(support.fixups(counts))
    return stages
