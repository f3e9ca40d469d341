"""What a request body declares about tools: the functions and their JSON schemas, whether parallel calls
are allowed, and a tool it forces by name. Each format module reads its own shape; with the format
unknown every shape is read (the shapes do not collide)."""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from . import formats
from .decoding import TooLarge, decode_body


@dataclass(slots=True, frozen=True)
class RequestFacts:
    tools: dict[str, dict | None] | None  # declared name -> its JSON schema (or None); None: no tools key
    parallel: bool | None  # False: the request turned parallel tool calls off
    forced: str | None  # the tool the request forces by name
    usage_asked: bool | None = None  # False: a streamed request that did not ask for usage
    # True: tools may be declared out of sight (loaded by a tool search of a stored earlier turn): a call
    # naming a tool not in ``tools`` is not said undeclared
    tools_open: bool = False


def decoded(request) -> dict | None:
    """A request body (bytes, str or an already decoded dict) as a JSON object, or None."""
    if isinstance(request, (bytes, str)):
        try:
            request = orjson.loads(request)
        except orjson.JSONDecodeError:
            return None
    return request if type(request) is dict else None


def request_body(body: bytes | None, encoding: str | None, max_bytes: int) -> bytes | None:
    """A request's body as it came, decoded as its Content-Encoding says (``encoding``; None: none), at
    most ``max_bytes``: Codex compresses its own (zstd). A body that does not decode but is a JSON object
    as it came (a Content-Encoding that lies) is read as it came, as mitmproxy reads it. ValueError saying
    why it cannot be read otherwise (every front door says it so: the result's ``evidence``). ``identity``
    is no coding: the body as it came, whole."""
    if encoding is None or body is None or encoding.strip().lower() == "identity":
        return body
    try:
        return decode_body(body, encoding, max_bytes)
    except TooLarge as too_large:  # two names: mypyc types each by its first handler
        why = str(too_large)
    except ValueError as undecodable:
        if decoded(body) is not None:
            return body
        why = str(undecodable)
    raise ValueError(f"the request's body cannot be read: {why}")


def request_facts(request, format: str | None = None) -> RequestFacts | None:
    """The facts of a request body, or None when it is not a JSON object; facts read earlier (the
    addon reads them as the request passes, and ships them to its worker instead of the body) are
    themselves."""
    if isinstance(request, RequestFacts):
        return request
    request = decoded(request)
    if request is None:
        return None
    return RequestFacts(
        formats.request_tools(request, format),
        formats.request_parallel(request, format),
        formats.request_forced(request, format),
        formats.request_usage_asked(request, format),
        formats.request_tools_open(request, format),
    )
