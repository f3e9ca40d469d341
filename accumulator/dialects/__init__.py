"""Dialects: one per wire format, each turning provider events into normalized delta operations."""

from .openai_chat import ChatCompletionsDialect

# format name (the result's "format") -> dialect class
DIALECTS = {
    ChatCompletionsDialect.format: ChatCompletionsDialect,
}

__all__ = ["DIALECTS", "ChatCompletionsDialect"]
