"""AWS Bedrock, reordered by whole frames (their bytes and CRCs unchanged). ConverseStream: a tool call is
a content block opened by ``contentBlockStart`` with ``toolUse``, keyed by ``contentBlockIndex``.
InvokeModel: every ``chunk`` frame wraps one Anthropic event in base64, classified as Anthropic's."""

from __future__ import annotations

import base64
import binascii

import orjson

from .anthropic import BlockKeys
from .reorder import BOUNDARY, END, FRAGMENT, START


class ConverseKeys:
    def __init__(self) -> None:
        self._tools: set[int] = set()

    def __call__(self, unit) -> tuple[int, object]:
        obj = unit.obj
        if type(obj) is not dict:
            return BOUNDARY, None
        index = obj.get("contentBlockIndex")
        if type(index) is not int:
            return BOUNDARY, None
        kind = unit.name
        if kind == "contentBlockStart":
            start = obj.get("start")
            if type(start) is dict and type(start.get("toolUse")) is dict:
                self._tools.add(index)
                return START, index
            self._tools.discard(index)
            return BOUNDARY, None
        if index in self._tools:
            if kind == "contentBlockDelta":
                return FRAGMENT, index
            if kind == "contentBlockStop":
                return END, index
        return BOUNDARY, None


def inner_event(unit) -> dict | None:
    """The Anthropic event an InvokeModel ``chunk`` frame carries, or None."""
    obj = unit.obj
    if unit.name != "chunk" or type(obj) is not dict or type(obj.get("bytes")) is not str:
        return None
    try:
        inner = orjson.loads(base64.b64decode(obj["bytes"], validate=True))
    except (binascii.Error, ValueError):  # orjson.JSONDecodeError is a ValueError
        return None
    return inner if type(inner) is dict else None


def invoke_keys() -> BlockKeys:
    return BlockKeys(inner_event)
