"""The unit the rewriting stages pass around: one framed event with its exact bytes (the framers' raw mode,
``accumulator.framing``, cuts them), or what a stage made of it. Only an event a stage changes is
serialised again (``sse_event``); every other event leaves with the bytes it came with.
"""

from __future__ import annotations

import re
from typing import cast

import orjson

from ..framing.payload import BOM

_LINE_END_KEPT = re.compile(rb"(\r\n|\r|\n)")


class Unit:
    """One event as it came (``parts`` holds one ``[bytes, payload object]``), or what a stage made of it:
    several wire events in a row (a name sent in two chunks), or one of the two halves of an event.

    ``origin`` numbers the input event it comes from: the rewriter's ledger gives back the original bytes
    of every origin not yet sent if anything goes wrong. ``quiet``: a comment, keep-alive or blank block,
    which carries no payload and passes in place.
    """

    __slots__ = ("name", "origin", "parts", "quiet", "template")

    def __init__(self, origin: int, template: bytes | None, name, parts: list, quiet: bool = False) -> None:
        self.origin = origin
        self.template = template  # the SSE block a re-serialised event copies its other lines from
        self.name = name  # SSE ``event:`` field, AWS ``:event-type``
        self.parts = parts  # [[bytes, obj], ...]; obj is the parsed payload (a dict) or None
        self.quiet = quiet

    @property
    def data(self) -> bytes:
        parts = self.parts
        return parts[0][0] if len(parts) == 1 else b"".join(part[0] for part in parts)

    @property
    def obj(self):
        return self.parts[0][1]

    @property
    def objs(self) -> list:
        return [part[1] for part in self.parts]

    def rewrite(self, i: int, obj: dict) -> None:
        """Part ``i`` now carries ``obj``: serialise it again (SSE only; the other parts keep their bytes)."""
        self.parts[i] = [self._serialised(i, obj), obj]

    def derive(self, objs: list, keep: dict | None = None) -> Unit:
        """A unit of the same origin made of these payloads, in this order; ``keep`` maps id(obj) to the
        bytes of a payload that did not change."""
        keep = keep or {}
        parts = [[keep.get(id(obj)) or self._serialised(i, obj), obj] for i, obj in enumerate(objs)]
        return Unit(self.origin, self.template, self.name, parts)

    def _serialised(self, i: int, obj) -> bytes:
        """Part ``i``'s event carrying ``obj``. SSE only: an SSE unit's template is never None. The body's
        BOM (its first event's template starts with it) goes in front of the first part only: a BOM
        further on is no BOM to a client but the start of a line, and the event it starts is lost."""
        template = cast(bytes, self.template)
        if i and template.startswith(BOM):
            template = template[3:]
        return sse_event(template, orjson.dumps(obj))

    @property
    def size(self) -> int:
        return sum(len(part[0]) for part in self.parts)


# -- SSE -----------------------------------------------------------------------------------------------------


def _is_data_line(line: bytes) -> bool:
    return line.startswith(b"data") and (len(line) == 4 or line[4] == 0x3A)


def sse_event(template: bytes, payload: bytes) -> bytes:
    """``template`` (a whole SSE block) with its data replaced by ``payload`` (one line, no LF in it):
    its other lines (``event:``, ``id:``, comments), its line ends and its blank line stay as they were."""
    bom = b""
    if template.startswith(BOM):
        bom, template = BOM, template[3:]
    pieces = _LINE_END_KEPT.split(template)
    out = [bom]
    done = False
    for i in range(0, len(pieces) - 1, 2):
        line, end = pieces[i], pieces[i + 1]
        if _is_data_line(line):
            if not done:
                done = True
                out.append((b"data: " if line[5:6] == b" " else b"data:") + payload + end)
            continue
        if not line and not done:
            # The blank line that ends the block, and no data line before it: put one there.
            done = True
            out.append(b"data: " + payload + end)
        out.append(line + end)
    if pieces[-1]:
        out.append(pieces[-1])
    return b"".join(out)
