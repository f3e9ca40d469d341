"""What the provider reads from a request, whichever HTTP version carried it: the route (format, scenario,
streamed or not), the pacing and encoding asked for, the credentials' hash, and the refusals."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from urllib.parse import parse_qs, unquote

import orjson

from accumulator.decoding import TooLarge, decode_body

from .agent import AGENT, is_agent
from .bodies import FORMAT_SCENARIOS
from .wire import ENCODINGS, sha256

MAX_BODY_BYTES = 8 * 1024 * 1024


class Request:
    """A complete request: method, path, query (parsed), headers (lower-case names), body."""

    def __init__(self, method: str, target: str, headers: dict[str, str], body: bytes) -> None:
        self.method = method
        self.path, _, query = target.partition("?")
        self.query = parse_qs(query)
        self.headers = headers
        self.body = body

    @classmethod
    def from_fields(
        cls, method: str, target: str, fields: Iterable[tuple[bytes, bytes]], body: bytes
    ) -> Request:
        """From raw header fields, as h11 and h2 hand them over: repeated fields combine (RFC 9110 5.3)."""
        headers: dict[str, str] = {}
        for raw_name, raw_value in fields:
            name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
            if name in headers:
                headers[name] += ("; " if name == "cookie" else ", ") + value
            else:
                headers[name] = value
        return cls(method, target, headers, body)


class Refused(Exception):
    """A well-formed request the provider answers with a JSON error; the connection stays usable."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def error_json(message: str, kind: str = "invalid_request_error") -> bytes:
    return orjson.dumps({"error": {"message": message, "type": kind}})


# Formats whose scenario is the body's "model": any POST path that ends so.
_BODY_ROUTES = (
    ("openai-chat", "/chat/completions"),
    ("openai-responses", "/responses"),
    ("anthropic-messages", "/messages"),
    ("cohere-v2", "/v2/chat"),
    ("ollama-chat", "/api/chat"),
)
# Ollama streams unless told not to; the others only when told to.
STREAMED_UNLESS_FALSE: tuple[str, ...] = ("ollama-chat",)
_GEMINI_PATH = re.compile(r"/models/([^/]+):(streamGenerateContent|generateContent)$")
_BEDROCK_PATH = re.compile(r"/model/([^/]+)/(converse-stream|converse|invoke-with-response-stream|invoke)")


def route(path: str) -> tuple[str, str | None, bool | None] | None:
    """(format, scenario from the path or None, streamed by the path or None) of an LLM request path."""
    for fmt, suffix in _BODY_ROUTES:
        if path.endswith(suffix):
            return fmt, None, None
    if match := _GEMINI_PATH.search(path):
        return "gemini", unquote(match[1]), match[2] == "streamGenerateContent"
    if match := _BEDROCK_PATH.fullmatch(path):
        fmt = "bedrock-converse" if match[2].startswith("converse") else "bedrock-invoke"
        return fmt, unquote(match[1]), match[2].endswith("stream")
    return None


def json_body(request: Request) -> dict:
    """The request's body as a JSON object, decoded first when it has a Content-Encoding (OpenAI's backend
    reads Codex's zstd-compressed requests so); a 400 otherwise, a 413 if it decodes past the cap."""
    body = request.body
    coding = request.headers.get("content-encoding", "").strip()
    if coding:
        try:
            body = decode_body(body, coding, MAX_BODY_BYTES)
        except ValueError as exc:
            raise Refused(413 if isinstance(exc, TooLarge) else 400, f"request body: {exc}") from None
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise Refused(400, "body is not JSON") from None
    if not isinstance(payload, dict):
        raise Refused(400, "body must be a JSON object")
    return payload


def scenario_of(request: Request, fmt: str, name: str | None, stream: bool | None) -> tuple[str, bool]:
    """(scenario, streamed) of an LLM request: from the path when it says, else from the body."""
    if name is None:  # the body says
        payload = json_body(request)
        name = payload.get("model")
        if fmt in STREAMED_UNLESS_FALSE:
            stream = payload.get("stream") is not False
        else:
            stream = payload.get("stream") is True
    if is_agent(name):  # `agent`, or a model name --agent-model gave it
        return AGENT, bool(stream)
    if not isinstance(name, str) or name not in FORMAT_SCENARIOS[fmt]:
        raise Refused(404, f"unknown scenario {name!r}; known: {', '.join(FORMAT_SCENARIOS[fmt])}")
    return name, bool(stream)


def options(request: Request, delay: float) -> tuple[float, str | None]:
    """The request's delay between events (X-Fake-Delay) and response encoding (X-Fake-Encoding)."""
    if "x-fake-delay" in request.headers:
        try:
            delay = float(request.headers["x-fake-delay"])
        except ValueError:
            delay = math.nan
        if not 0 <= delay <= 60:
            raise Refused(400, "X-Fake-Delay must be a number of seconds between 0 and 60")
    encoding = request.headers.get("x-fake-encoding", "").strip().lower() or None
    if encoding is not None and encoding not in ENCODINGS:
        raise Refused(400, f"X-Fake-Encoding must be one of {', '.join(ENCODINGS)}")
    return delay, encoding


_CREDENTIAL_HEADERS = ("authorization", "x-api-key", "api-key", "x-goog-api-key", "x-amz-security-token")


def credentials_sha256(request: Request) -> str:
    """A hash of the credentials the request carried (headers, and ?key=), in a fixed order."""
    parts = [request.headers.get(name, "") for name in _CREDENTIAL_HEADERS]
    parts += request.query.get("key", [])
    return sha256("\n".join(parts).encode())
