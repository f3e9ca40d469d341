"""What a request body declares about tools: the functions and their JSON schemas, whether parallel calls
are allowed, and a tool it forces by name. Each format module reads its own shape; with the format
unknown every shape is read (the shapes do not collide)."""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from . import formats


@dataclass(slots=True, frozen=True)
class RequestFacts:
    tools: dict[str, dict | None] | None  # declared name -> its JSON schema (or None); None: no tools key
    parallel: bool | None  # False: the request turned parallel tool calls off
    forced: str | None  # the tool the request forces by name
    usage_asked: bool | None = None  # False: a streamed request that did not ask for usage


def decoded(request) -> dict | None:
    """A request body (bytes, str or an already decoded dict) as a JSON object, or None."""
    if isinstance(request, (bytes, str)):
        try:
            request = orjson.loads(request)
        except orjson.JSONDecodeError:
            return None
    return request if type(request) is dict else None


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
    )
