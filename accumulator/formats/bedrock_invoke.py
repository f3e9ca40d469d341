"""AWS Bedrock InvokeModelWithResponseStream (``/model/{id}/invoke-with-response-stream``; ``/invoke`` not
streamed) for Anthropic models: everything toolcall-lens knows of it.

Framed as the AWS binary event stream: every frame is a ``chunk`` whose payload
``{"bytes": base64, "p": padding}`` wraps one Anthropic event, read by the Anthropic dialect; the request
and the non-streamed response are Anthropic's own. Rewriting reorders whole frames, classified by the
Anthropic event each one wraps.
"""

from __future__ import annotations

import base64
import binascii

import orjson

from ..warnings import WarningLog
from . import anthropic
from .anthropic import AnthropicDialect, block_keys
from .base import EventStreamDialect, RewriteSupport, WireFormat


class InvokeStreamDialect(EventStreamDialect):
    def __init__(self, warnings: WarningLog) -> None:
        super().__init__(warnings)
        self._anthropic = AnthropicDialect(warnings)

    def frame_ops(self, event_type: str | None, obj: dict, number: int) -> list:
        wrapped = obj.get("bytes")
        if event_type != "chunk" or type(wrapped) is not str:
            return []
        try:
            payload = base64.b64decode(wrapped, validate=True)
        except (binascii.Error, ValueError):
            self._malformed(number, wrapped.encode()[:400], "has a payload that is not base64")
            return []
        inner = self._load(payload, number)
        return [] if inner is None else self._anthropic.event_ops(inner, number)

    def message_ops(self, body: bytes) -> list:
        # InvokeModel (not streamed) answers with the model's own JSON: an Anthropic message here.
        return self._anthropic.message_ops(body)


# -- rewriting -----------------------------------------------------------------------------------------------


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


FORMAT = WireFormat(
    name="bedrock-invoke",
    dialect=InvokeStreamDialect,
    framings=("eventstream",),
    paths=((r"/model/[^/]+/invoke-with-response-stream$", True), (r"/model/[^/]+/invoke$", False)),
    sniff=lambda event, obj: event.kind == "event" and event.type == "chunk",
    tools=anthropic.FORMAT.tools,
    parallel=anthropic.FORMAT.parallel,
    forced=anthropic.FORMAT.forced,
    echoes=anthropic.FORMAT.echoes,
    usage=anthropic.FORMAT.usage,  # the Anthropic events inside the chunks
    tool_finish=anthropic.FORMAT.tool_finish,
    provider="aws",
    genai_provider="aws.bedrock",
    rewrite=RewriteSupport(
        key="content block index",
        name_whole_in="content_block_start",
        keys=lambda purpose: block_keys(inner_event),
    ),
)
