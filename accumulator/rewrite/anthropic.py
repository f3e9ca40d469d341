"""Anthropic Messages (also inside Bedrock InvokeModel frames): a tool call is a ``tool_use`` content block,
its events keyed by the block ``index``. anthropic-python appends a block on ``content_block_start`` and
then indexes ``content[event.index]``: starts must keep their index order, which both policies do since
calls leave in order of first appearance. The run is consecutive tool blocks; pings pass in place, any
other event ends it.
"""

from __future__ import annotations

from .reorder import BOUNDARY, END, FRAGMENT, PASS, START

_CALL_BLOCKS = ("tool_use", "server_tool_use")


class BlockKeys:
    """Classifies Anthropic event objects; ``event_of(unit)`` finds the event in a unit."""

    def __init__(self, event_of=None) -> None:
        self._event_of = event_of or (lambda unit: unit.obj)
        self._tools: set[int] = set()  # indices of the tool blocks started so far

    def __call__(self, unit) -> tuple[int, object]:
        if unit.quiet:
            return PASS, None
        obj = self._event_of(unit)
        if type(obj) is not dict:
            return BOUNDARY, None
        kind = obj.get("type")
        index = obj.get("index")
        if kind == "ping":
            return PASS, None
        if type(index) is not int:
            return BOUNDARY, None
        if kind == "content_block_start":
            block = obj.get("content_block")
            if type(block) is dict and block.get("type") in _CALL_BLOCKS:
                self._tools.add(index)
                return START, index
            self._tools.discard(index)
            return BOUNDARY, None
        if index in self._tools:
            if kind == "content_block_delta":
                return FRAGMENT, index
            if kind == "content_block_stop":
                return END, index
        return BOUNDARY, None
