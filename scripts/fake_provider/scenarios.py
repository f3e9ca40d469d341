"""The scenarios: one scripted model turn each, as format-neutral steps that every renderer turns into its
own events. The request's "model" (or the path's model) picks the scenario."""

from __future__ import annotations

from typing import Any

# A step is one of:
#   ("call", slot, key, name, arguments)  a tool call opens (its ids come from key: call_<key>, toolu_<key>, …)
#   ("args", slot, fragment)               more argument text for the call opened as slot
#   ("think", fragment)                    reasoning (formats without it send nothing)
#   ("text", fragment)                     answer text
# Formats that only send whole calls (Gemini, Ollama) send a call once, complete, where it opens, and never
# send one whose complete arguments are not a JSON object (the error arrives first).


def _call(slot: int, key: str, name: str, arguments: str = "") -> tuple:
    return ("call", slot, key, name, arguments)


def _args(slot: int, fragment: str) -> tuple:
    return ("args", slot, fragment)


def _each(kind: str, *fragments: str) -> tuple:
    return tuple((kind, fragment) for fragment in fragments)


_INTERLEAVED = (
    _call(0, "abc", "search_circulars"),
    _call(1, "xyz", "get_user_profile"),
    _args(0, '{"query": "RBI'),
    _args(1, '{"user_id": "u'),
    _args(0, ' circulars"}'),
    _args(1, '123"}'),
)

_SEQUENTIAL = (
    *_each("think", "Weather first, ", "then the local time."),
    _call(0, "w1", "get_weather"),
    _args(0, '{"ci'),
    _args(0, 'ty": "Pa'),
    _args(0, 'ris"}'),
    _call(1, "t1", "get_time"),
    _args(1, '{"tz": '),
    _args(1, '"Europe/'),
    _args(1, 'Paris"}'),
)

# One script per scenario. Keys:
#   about       one line for --help              only       the format (or formats) serving it (default: all)
#   steps       the steps above                  error      the format's own error comes after the steps
#   chat_quirk  how Chat Completions bends it
#   cut_after   steps sent before the TCP connection is dropped (no terminating zero-length chunk)
#   gate_after  events sent before waiting for GET /release
#   custom      the keys of calls that are a custom tool's (free-form input; Chat and Responses)
SCRIPTS: dict[str, dict[str, Any]] = {
    "interleaved": {
        "about": "two tool calls whose argument fragments alternate (the production incident)",
        "steps": _INTERLEAVED,
    },
    "sequential": {"about": "reasoning, then two tool calls one after the other", "steps": _SEQUENTIAL},
    # Groq / Ollama: every call is whole in one delta and all of them claim index 0.
    "index-collision": {
        "about": "three whole calls that all claim index 0 (Groq, Ollama)",
        "steps": (
            _call(0, "c1", "weather", '{"location": "San Francisco"}'),
            _call(1, "c2", "weather", '{"location": "Tokyo"}'),
            _call(2, "c3", "weather", '{"location": "Paris"}'),
        ),
        "chat_quirk": "same-index",
        "only": "openai-chat",
    },
    # Fireworks / LiteLLM proxy: every delta repeats id, type and name, which must not start a new call.
    "name-repeated": {
        "about": "every delta of one call repeats its id, type and name (Fireworks, LiteLLM)",
        "steps": (
            _call(0, "r1", "get_current_weather", '{"city": '),
            *(_args(0, fragment) for fragment in ('"Oslo", ', '"unit": ', '"c"}')),
        ),
        "chat_quirk": "repeat-identity",
        "only": "openai-chat",
    },
    # Cut in the middle of the first call's arguments.
    "truncated": {
        "about": "interleaved, dropped mid-arguments without the stream's end",
        "steps": _INTERLEAVED,
        "cut_after": 3,
    },
    # Some reasoning first (Chat Completions has none), so the error comes mid-stream in every format.
    "error-midstream": {
        "about": "the start of a turn, then the format's own error event mid-stream",
        "steps": (("think", "Looking it up."), _call(0, "e1", "lookup", '{"q": ')),
        "error": True,
    },
    "text": {
        "about": "answer text only, no tool call",
        "steps": _each("text", "Hello", " from the", " fake provider", "."),
    },
    # Multi-byte characters in text, names' arguments and reasoning: cuts inside a character are possible.
    "unicode": {
        "about": "multi-byte characters in reasoning, text and arguments",
        "steps": (
            *_each("think", "Zürich zuerst, ", "dann 東京."),
            *_each("text", "Grüße ", "aus Zürich — ", "東京 ✓"),
            _call(0, "u1", "get_weather"),
            _args(0, '{"city": "Zü'),
            _args(0, 'rich", "note": "東'),
            _args(0, '京 ✓"}'),
            _call(1, "u2", "translate"),
            _args(1, '{"text": "Grüße", '),
            _args(1, '"to": "日本語"}'),
        ),
    },
    # Codex's apply_patch: a custom (free-form) tool, its input a patch, not JSON.
    "custom-interleaved": {
        "about": "a custom tool's call (its input a patch, not JSON) interleaved with a function call",
        "steps": (
            _call(0, "p1", "apply_patch"),
            _call(1, "r1", "read_file"),
            _args(0, "*** Begin Patch\n*** Update File: a.py\n"),
            _args(1, '{"path": '),
            _args(0, "@@\n-x = 1\n+x = 2\n*** End Patch"),
            _args(1, '"a.py"}'),
        ),
        "custom": ("p1",),
        "only": ("openai-chat", "openai-responses"),
    },
    "gated": {
        "about": "sequential, held after its first event until GET /release",
        "steps": _SEQUENTIAL,
        "gate_after": 1,
    },
}

SCENARIOS: tuple[str, ...] = tuple(SCRIPTS)

# Scenarios only a WebSocket protocol serves (ws_protocols.py says which), kept apart from SCRIPTS so the
# HTTP formats, /v1/models and their tests never meet them. Keys as above, plus:
#   cancel_after  steps sent before the response is cancelled as a client's response.cancel would
#   audio         text steps are spoken: audio deltas with a transcript (Realtime)
#   cancel_first  the first call is cancelled by a toolCallCancellation after the toolCall (Gemini Live)
WS_SCRIPTS: dict[str, dict[str, Any]] = {
    "realtime-cancel": {
        "about": "interleaved, cancelled after each call's first delta (response.done status cancelled)",
        "steps": _INTERLEAVED,
        "cancel_after": 4,
        "only": "openai-realtime",
    },
    "realtime-audio": {
        "about": "spoken text (audio deltas and their transcript), then a tool call",
        "steps": (
            *_each("text", "Let me check ", "the weather ", "in Paris."),
            _call(0, "a1", "get_weather"),
            _args(0, '{"city": '),
            _args(0, '"Paris"}'),
        ),
        "audio": True,
        "only": "openai-realtime",
    },
    "live-cancel": {
        "about": "interleaved's two calls in one toolCall, then a toolCallCancellation of the first",
        "steps": _INTERLEAVED,
        "cancel_first": True,
        "only": "gemini-live",
    },
}


def script(name: str) -> dict[str, Any]:
    """The script of any scenario, HTTP or WebSocket-only."""
    return SCRIPTS[name] if name in SCRIPTS else WS_SCRIPTS[name]


def served_by(name: str, fmt: str) -> bool:
    """Whether the format serves the scenario (a few are one format's quirk)."""
    only = script(name).get("only", fmt)
    return fmt in ((only,) if isinstance(only, str) else only)
