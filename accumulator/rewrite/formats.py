"""What applies to each wire format, why the rest does not, and the stages that carry it out."""

from __future__ import annotations

from . import anthropic, bedrock, cohere, openai_chat, openai_responses
from .reorder import Interleaver, Serializer

INJECTIONS = ("interleave", "split-names", "repeat-names", "collide-index", "rechunk")
REPAIRS = ("serialize", "reindex")

# format -> (framing, how its fragments name their call, how whole calls arrive or None)
_FORMATS: dict[str, tuple[str, str, str | None]] = {
    "openai-chat": ("sse", "id and index", None),
    "openai-responses": ("sse", "output_index", None),
    "anthropic-messages": ("sse", "content block index", None),
    "bedrock-converse": ("eventstream", "contentBlockIndex", None),
    "bedrock-invoke": ("eventstream", "content block index", None),
    "cohere-v2": ("sse", "index", None),
    "gemini": ("bytes", "", "a functionCall part"),
    "ollama-chat": ("bytes", "", "a line"),
}
_NAME_WHOLE_IN = {
    "openai-responses": "response.output_item.added",
    "anthropic-messages": "content_block_start",
    "bedrock-converse": "contentBlockStart",
    "bedrock-invoke": "content_block_start",
    "cohere-v2": "tool-call-start",
}


def framing(format: str) -> str:
    return _FORMATS[format][0]


def skip_reason(format: str, name: str) -> str | None:
    """Why ``name`` does not apply to ``format`` (one line), or None when it does."""
    if name == "rechunk":
        return None
    _, key, whole = _FORMATS[format]
    if whole is not None:
        return f"every call arrives whole, in {whole}: no fragments to {_VERBS[name]}"
    if format == "openai-chat":
        return None
    if name in ("interleave", "serialize"):
        return None
    if name == "split-names":
        return f"the name arrives whole in {_NAME_WHOLE_IN[format]}, with no field to continue it"
    if name == "reindex":
        return f"a Chat Completions repair: {format} fragments name their call by {key} alone"
    return f"a Chat Completions shape: {format} fragments name their call by {key} alone, with no id or name"


_VERBS = {
    "interleave": "interleave",
    "serialize": "serialize",
    "split-names": "split a name across",
    "repeat-names": "repeat a name on",
    "collide-index": "give a colliding index",
    "reindex": "reindex",
}


def supported(format: str) -> frozenset[str]:
    """The injections and repairs that apply to ``format`` (empty for a format it does not know)."""
    if format not in _FORMATS:
        return frozenset()
    return frozenset(name for name in (*INJECTIONS, *REPAIRS) if skip_reason(format, name) is None)


def reorder_keys(format: str, purpose: str):
    """A fresh classifier (unit -> (role, key)) for one reorder stage."""
    if format == "openai-chat":
        return openai_chat.IndexKeys() if purpose == "interleave" else openai_chat.CallKeys()
    if format == "openai-responses":
        return openai_responses.ItemKeys()
    if format == "anthropic-messages":
        return anthropic.BlockKeys()
    if format == "bedrock-converse":
        return bedrock.ConverseKeys()
    if format == "bedrock-invoke":
        return bedrock.invoke_keys()
    return cohere.tool_keys


def build_stages(format: str, applied: set[str], counts: dict) -> list:
    """The stages in order: injections (reorder, then edits), repairs (edits, then reorder), fix-ups."""
    split_final = openai_chat.split_final if format == "openai-chat" else None
    stages: list = []
    if "interleave" in applied:
        stages.append(Interleaver(reorder_keys(format, "interleave"), split_final))
    edits = [name in applied for name in ("split-names", "repeat-names", "collide-index")]
    if any(edits):
        stages.append(openai_chat.ChatEdits(*edits, counts))
    if "reindex" in applied:
        stages.append(openai_chat.Reindex(counts))
    if "serialize" in applied:
        stages.append(Serializer(reorder_keys(format, "serialize"), split_final))
    if format == "openai-responses" and stages:
        stages.append(openai_responses.SequenceNumbers(counts))
    return stages
