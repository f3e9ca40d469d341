"""Dialects: one per wire format, each turning provider events into normalized delta operations."""

from .anthropic import AnthropicDialect
from .bedrock import ConverseStreamDialect, InvokeStreamDialect
from .cohere import CohereDialect
from .gemini import GeminiDialect
from .ollama import OllamaChatDialect
from .openai_chat import ChatCompletionsDialect
from .openai_responses import ResponsesDialect

# format name (the result's "format") -> dialect class
DIALECTS = {
    dialect.format: dialect
    for dialect in (
        ChatCompletionsDialect,
        ResponsesDialect,
        AnthropicDialect,
        GeminiDialect,
        ConverseStreamDialect,
        InvokeStreamDialect,
        CohereDialect,
        OllamaChatDialect,
    )
}

__all__ = ["DIALECTS"]
