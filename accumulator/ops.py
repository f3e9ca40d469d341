"""Normalized delta operations: what every dialect turns provider events into.

Assembly and the hazard strategies consume only these, so they work for every wire format. Values are
kept as the wire sent them (an id may be ``""`` or ``"null"``, a name ``""``); the routing rules decide
what such values mean, identically for every format.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Ids that name no call: empty strings on continuation deltas (DashScope, LM Studio) and the string
# "null" (mistralai SDK default, Mistral-hosted GLM); docs/formats.md lists the quirks.
PLACEHOLDER_IDS = frozenset(("", "null"))

# Each operation's __init__ is written out (dataclass(init=False)): compiled (setup.py), an object is then
# built natively; the __init__ a dataclass generates would run as interpreted Python, one per delta.


@dataclass(init=False, slots=True)
class ToolCallDelta:
    """A fragment of one tool call, as it names its call."""

    event: int  # 1-based number of the stream event that carried it
    choice: int  # choice (completion) the call belongs to; 0 for single-choice formats
    id: Any  # as the wire sent it: a string, a placeholder, None, or any other JSON value (real_id reads it)
    index: int | None
    name: Any  # as the wire sent it: routing takes only a non-empty string as a name
    arguments: Any  # a string fragment, a whole JSON value (object), or None
    # A complete call in one piece (Ollama lines, Gemini parts): always a call of its own, whatever
    # its index says, since the format has no continuation deltas to route.
    whole: bool
    # A custom tool's call (OpenAI's free-form tools): its arguments are raw text, not JSON.
    custom: bool
    # Given with a call's name only: the namespace that declared its tool (Responses, as Codex declares
    # each MCP server's tools), and the built-in tool whose call it is (Responses' client-executed
    # ``tool_search``), else None.
    namespace: Any
    builtin: str | None

    def __init__(
        self,
        event: int,
        choice: int,
        id: Any,
        index: int | None,
        name: Any,
        arguments: Any,
        whole: bool = False,
        custom: bool = False,
        namespace: Any = None,
        builtin: str | None = None,
    ) -> None:
        self.event = event
        self.choice = choice
        self.id = id
        self.index = index
        self.name = name
        self.arguments = arguments
        self.whole = whole
        self.custom = custom
        self.namespace = namespace
        self.builtin = builtin


@dataclass(init=False, slots=True)
class TextDelta:
    event: int
    choice: int
    kind: str  # "text", "reasoning" or "refusal"
    text: str

    def __init__(self, event: int, choice: int, kind: str, text: str) -> None:
        self.event = event
        self.choice = choice
        self.kind = kind
        self.text = text


@dataclass(init=False, slots=True)
class Finish:
    event: int
    choice: int
    reason: str

    def __init__(self, event: int, choice: int, reason: str) -> None:
        self.event = event
        self.choice = choice
        self.reason = reason


@dataclass(init=False, slots=True)
class Meta:
    event: int
    model: Any  # as the wire sent it (a string, else ignored)
    response_id: Any

    def __init__(self, event: int, model: Any, response_id: Any) -> None:
        self.event = event
        self.model = model
        self.response_id = response_id


@dataclass(init=False, slots=True)
class Usage:
    event: int
    usage: dict  # the provider's usage object, last one wins

    def __init__(self, event: int, usage: dict) -> None:
        self.event = event
        self.usage = usage


@dataclass(init=False, slots=True)
class ProviderError:
    event: int
    error: Any

    def __init__(self, event: int, error: Any) -> None:
        self.event = event
        self.error = error


@dataclass(init=False, slots=True)
class StreamEnd:
    """The format's own end-of-stream marker (Chat Completions: ``data: [DONE]``)."""

    event: int

    def __init__(self, event: int) -> None:
        self.event = event


def real_id(value: Any) -> str | None:
    """The call id a delta names, or None when it names none (absent or a placeholder)."""
    if value is None:
        return None
    if type(value) is not str:
        value = str(value)
    return None if value in PLACEHOLDER_IDS else value
