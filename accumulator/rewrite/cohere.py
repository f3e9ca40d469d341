"""Cohere v2: a tool call is named by ``index`` on ``tool-call-start`` / ``-delta`` / ``-end``. The run is
consecutive tool calls; any other event ends it."""

from __future__ import annotations

from .reorder import BOUNDARY, END, FRAGMENT, PASS, START

_ROLES = {"tool-call-start": START, "tool-call-delta": FRAGMENT, "tool-call-end": END}


def tool_keys(unit) -> tuple[int, object]:
    if unit.quiet:
        return PASS, None
    obj = unit.obj
    if type(obj) is not dict:
        return BOUNDARY, None
    kind = obj.get("type")
    if type(kind) is not str:
        kind = unit.name
    role = _ROLES.get(kind)
    index = obj.get("index")
    if role is None or type(index) is not int:
        return BOUNDARY, None
    return role, index
