"""One renderer per wire format: a scenario's steps as that format's events, framed as its wire carries them.
Each module writes everything about its format in one `WireFormat`; this table is the only list of them."""

from __future__ import annotations

from . import (
    anthropic_messages,
    bedrock_converse,
    bedrock_invoke,
    cohere_v2,
    gemini,
    ollama_chat,
    openai_chat,
    openai_responses,
)
from .base import Render, WireFormat

WIRE_FORMATS: dict[str, WireFormat] = {
    module.FORMAT.name: module.FORMAT
    for module in (
        openai_chat,
        openai_responses,
        anthropic_messages,
        gemini,
        bedrock_converse,
        bedrock_invoke,
        cohere_v2,
        ollama_chat,
    )
}
FORMATS: tuple[str, ...] = tuple(WIRE_FORMATS)

__all__ = ["FORMATS", "WIRE_FORMATS", "Render", "WireFormat"]
