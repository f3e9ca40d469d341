"""Bedrock InvokeModelWithResponseStream (Anthropic models): Anthropic's events, base64 in the `bytes` of AWS
event-stream `chunk` messages, with Bedrock's invocation metrics on message_stop; errors as exceptions."""

from __future__ import annotations

import base64

import orjson

from .anthropic_messages import AnthropicMessages
from .base import Payloads, WireFormat
from .bedrock_converse import THROTTLED
from .framing import AWS_EVENTSTREAM, AWS_EXCEPTION, aws_frames
from .openai_chat import HI


class BedrockInvoke(AnthropicMessages):
    bedrock = True
    error_event = AWS_EXCEPTION


def frame(payloads: Payloads) -> list[bytes]:
    return aws_frames(
        payloads, lambda payload, pad: {"bytes": base64.b64encode(orjson.dumps(payload)).decode(), "p": pad}
    )


FORMAT = WireFormat(
    "bedrock-invoke",
    BedrockInvoke,
    frame,
    AWS_EVENTSTREAM,
    "/model/{model}/{verb}",
    (429, THROTTLED),
    {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 1024, "messages": HI},
    "toolu_{key}",
    ("invoke-with-response-stream", "invoke"),
)
