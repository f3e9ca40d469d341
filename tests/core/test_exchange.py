"""What an exchange is (accumulator/exchange.py), decided once for every front door: its rules one by one,
each at its edge (a mutation run found most of them untested: only the common cases ran)."""

from __future__ import annotations

import gzip
import json

from streams import DATA

from accumulator import analyze_exchange, classify, detect_format
from accumulator.exchange import HTTP_ERROR, MESSAGE, STREAM, Exchange, maybe_llm, media_type

CHAT = "/v1/chat/completions"
GEMINI_STREAM = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
CHAT_STREAM = (DATA / "openai_chat_parallel.sse").read_bytes()
ANTHROPIC_STREAM = (DATA / "anthropic_messages_parallel.sse").read_bytes()
CHAT_MESSAGE = json.dumps(
    {
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}],
    }
).encode()


def test_the_media_type_is_what_comes_before_the_first_parameter():
    assert media_type("Text/Event-Stream; charset=utf-8; x=y") == "text/event-stream"
    assert media_type(None) == "" and media_type("") == ""


def test_the_first_look_needs_an_llm_path_or_a_streaming_content_type():
    assert maybe_llm(CHAT, "text/html")
    assert maybe_llm("/anything", "application/x-ndjson")
    assert not maybe_llm("/index.html", "text/html")
    assert not maybe_llm(None, "application/json")


def test_an_unknown_path_is_a_stream_only_by_its_content_type_and_never_as_an_error():
    assert classify(path="/proxy/x", content_type="text/event-stream") == Exchange(STREAM, None)
    assert classify(path="/proxy/x", status=200, content_type="text/event-stream") == Exchange(STREAM, None)
    assert classify(path="/proxy/x", status=399, content_type="text/event-stream") == Exchange(STREAM, None)
    assert classify(path="/proxy/x", status=400, content_type="text/event-stream") is None
    assert classify(path="/proxy/x", content_type="application/json") is None
    # With a path, the bytes decide nothing on an unknown one: only a captured body (no path) is sniffed.
    assert classify(path="/proxy/x", head=CHAT_STREAM[:512]) is None
    assert classify(head=CHAT_STREAM[:512]) == Exchange(STREAM, "openai-chat")
    assert classify(head=b"\n  " + CHAT_MESSAGE) == Exchange(MESSAGE, "openai-chat")
    assert classify(head=b"<html>") is None
    assert classify() is None


def test_an_error_status_on_an_llm_path_is_an_http_error_of_that_format_saying_if_a_stream_was_asked():
    assert classify(path=CHAT, status=399, content_type="application/json") == Exchange(
        MESSAGE, "openai-chat"
    )
    assert classify(path=CHAT, status=400) == Exchange(HTTP_ERROR, "openai-chat", False)
    assert classify(path=CHAT, status=500, request=b'{"stream": true}') == Exchange(
        HTTP_ERROR, "openai-chat", True
    )
    assert classify(path=CHAT, status=429, request={"stream": True}) == Exchange(
        HTTP_ERROR, "openai-chat", True
    )
    assert classify(path=GEMINI_STREAM, status=503) == Exchange(
        HTTP_ERROR, "gemini", True
    )  # the path streams


def test_on_an_llm_path_the_content_type_then_the_request_then_the_body_say_streamed_or_not():
    assert classify(path=GEMINI_STREAM, content_type="application/json") == Exchange(STREAM, "gemini")
    assert classify(path=CHAT, content_type="text/event-stream") == Exchange(STREAM, "openai-chat")
    assert classify(path=CHAT, content_type="application/json") == Exchange(MESSAGE, "openai-chat")
    assert classify(path=CHAT, content_type="application/problem+json") == Exchange(MESSAGE, "openai-chat")
    # Labelled neither way: asked to stream (the body as bytes, text or already read) is a stream.
    for request in (b'{"stream": true}', '{"stream": true}', {"stream": True}):
        assert classify(path=CHAT, content_type="text/plain", request=request) == Exchange(
            STREAM, "openai-chat"
        )
    for request in (b'{"stream": false}', b'{"model": "m"}', {"stream": "yes"}, None):
        assert classify(path=CHAT, content_type="", request=request) is None
    # Nor asked: the first bytes tell, and only a body of the path's own format counts.
    assert classify(path=CHAT, content_type="", head=CHAT_STREAM[:512]) == Exchange(STREAM, "openai-chat")
    assert classify(path=CHAT, content_type="", head=ANTHROPIC_STREAM[:512]) is None
    assert classify(path=CHAT, content_type="", head=b"<html>") is None


def test_a_request_given_as_a_function_is_read_only_where_it_decides():
    # The addon hands over its reading of the request (a MiB, perhaps compressed): headers that tell leave
    # it unread; a response labelled neither way, or an error, reads it once.
    read: list[int] = []

    def request(body: bytes = b'{"stream": true}'):
        return lambda: read.append(1) or body

    for path, status, content_type in (
        (CHAT, 200, "text/event-stream"),
        (CHAT, 200, "application/json"),
        (GEMINI_STREAM, 200, "text/plain"),
        (GEMINI_STREAM, 503, ""),
        ("/proxy/x", 200, "text/event-stream"),
    ):
        assert classify(path=path, status=status, content_type=content_type, request=request()) is not None
    assert read == []
    assert classify(path=CHAT, content_type="text/plain", request=request()) == Exchange(
        STREAM, "openai-chat"
    )
    assert classify(path=CHAT, status=500, request=request()) == Exchange(HTTP_ERROR, "openai-chat", True)
    assert classify(path=CHAT, content_type="", request=request(b'{"model": "m"}')) is None
    assert read == [1, 1, 1]


def test_a_whole_exchange_is_read_with_its_status_reason_type_encoding_and_request():
    error = analyze_exchange(
        Exchange(HTTP_ERROR, "openai-chat", True),
        b'{"error": {"message": "slow down", "type": "rate_limit"}}',
        status=429,
        reason="Too Many Requests",
        content_type="application/json",
    )
    [warning] = error["warnings"]
    assert (warning["code"], warning["status"], warning["reason"]) == ("http-error", 429, "Too Many Requests")
    assert warning["content_type"] == "application/json" and error["streamed"] is True
    assert "slow down" in warning["message"]
    message = analyze_exchange(Exchange(MESSAGE, "openai-chat"), CHAT_MESSAGE)
    assert message["streamed"] is False and message["choices"][0]["text"] == "hi"
    plain = analyze_exchange(Exchange(STREAM, "openai-chat"), CHAT_STREAM, chunk=7)
    packed = analyze_exchange(Exchange(STREAM, "openai-chat"), gzip.compress(CHAT_STREAM), encoding="gzip")
    assert [c["name"] for c in packed["choices"][0]["tool_calls"]] == [
        c["name"] for c in plain["choices"][0]["tool_calls"]
    ]
    assert len(plain["choices"][0]["tool_calls"]) == 2
    sniffed = analyze_exchange(Exchange(STREAM, None), CHAT_STREAM)
    assert sniffed["format"] == "openai-chat"


def test_a_body_s_format_comes_from_its_path_when_there_is_one():
    assert detect_format(CHAT_STREAM[:512]) == "openai-chat"
    assert detect_format(CHAT_STREAM[:512], path="/v1/messages") == "anthropic-messages"
    assert detect_format(b"<html>", path="/index.html") is None
    assert detect_format(b"<html>") is None
