"""Which format a body is, from its path or its first bytes, rule by rule at each edge (a mutation run
found the near misses untested: only each format's own example was sniffed)."""

from __future__ import annotations

import json

import pytest

from accumulator import analyze, formats
from accumulator.formats import path_format, sniff_format, sniff_message


def sse(obj, event: str | None = None) -> bytes:
    return (f"event: {event}\n" if event else "").encode() + b"data: " + json.dumps(obj).encode() + b"\n\n"


def test_a_path_is_read_without_its_query_and_trailing_slash():
    assert path_format("/v1/chat/completions/?a=1?b=2") == ("openai-chat", False)
    assert path_format("/v1/chat/completions?next=/v1/messages") == ("openai-chat", False)
    assert path_format("/v1/chat/completions///") == ("openai-chat", False)


def test_nothing_yet_is_no_format():
    assert sniff_format(b"") is None
    assert sniff_format(b"\xef\xbb\xbf \r\n\t") is None  # a byte order mark and blanks: nothing yet
    assert sniff_format(b"\x00\x00\x00") is None  # not even one AWS prelude
    assert sniff_format(b"\x00" * 11) is None


@pytest.mark.parametrize(
    "head, expected",
    [
        (b"\xef\xbb\xbf" + sse({"object": "chat.completion.chunk", "choices": []}), "openai-chat"),
        (sse({"choices": []}), "openai-chat"),  # no object field (vLLM, llama.cpp)
        (sse({"object": "chat.completion.chunk"}), "openai-chat"),  # no choices yet
        (b"data: [DONE]\n\n" + sse({"choices": []}), "openai-chat"),  # [DONE] says nothing: the next
        (b": keep-alive\n\n" + sse({"choices": []}), "openai-chat"),  # a comment neither
        (sse({"type": "message-start"}, "message-start"), "cohere-v2"),
        (sse({"type": "content-delta"}), "cohere-v2"),  # its type alone, no event line
        (b'{"model":"m","created_at":"t","message":{},"done":false}\n', "ollama-chat"),
        (b'{"model":"m","created_at":"t","done":false}\n', "ollama-chat"),
        (b'{"model":"m","done":false}\n', None),  # "done" alone: not enough
        (b'{"message":{},"created_at":"t"}\n', None),  # no "done": not Ollama
    ],
)
def test_a_stream_is_known_by_its_first_events(head, expected):
    assert sniff_format(head) == expected


@pytest.mark.parametrize(
    "body, expected",
    [
        ({"object": "response", "output": []}, "openai-responses"),
        ({"type": "response", "output": []}, "openai-responses"),  # by "type" where "object" is absent
        ({"object": "response", "type": "other", "output": []}, "openai-responses"),  # "object" first
        ({"type": "message", "content": []}, "anthropic-messages"),
        ({"object": "message", "content": []}, "anthropic-messages"),
        ({"type": "message"}, None),  # no content
        ({"content": []}, None),
    ],
)
def test_a_whole_message_is_known_by_its_own_fields(body, expected):
    assert sniff_message(json.dumps(body).encode()) == expected


def test_mistral_content_parts_give_text_and_reasoning():
    thinking = {"type": "thinking", "thinking": [{"type": "text", "text": "Hmm. "}, "odd", {"text": ""}]}
    parts = [
        "odd",
        thinking,
        {"type": "text", "text": ""},
        {"type": "image", "text": "alt"},
        {"type": "text", "text": "Hi"},
    ]
    chunk = {"choices": [{"index": 0, "delta": {"content": parts}, "finish_reason": None}]}
    result = analyze(
        sse(chunk)
        + sse({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        + b"data: [DONE]\n\n"
    )
    [choice] = result["choices"]
    assert (choice["reasoning"], choice["text"]) == ("Hmm. ", "Hi")
    assert formats.get("openai-chat").name == "openai-chat"
