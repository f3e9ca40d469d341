"""API keys out of stored flows: each credential replaced by a marker that keeps its first few characters,
as soon as the request has gone out; put back, from the proxy's memory, when the flow is replayed."""

from __future__ import annotations

from typing import NamedTuple

from mitmproxy import http

# Where API keys travel: headers, and query parameters (Gemini's ?key=, presigned AWS URLs).
SECRET_HEADERS = (
    "authorization",
    "proxy-authorization",
    "x-api-key",
    "api-key",
    "x-goog-api-key",
    "x-amz-security-token",
)
SECRET_QUERY = ("key", "api-key", "api_key", "X-Amz-Signature", "X-Amz-Credential", "X-Amz-Security-Token")
# The Realtime API's browser form puts the key in a WebSocket subprotocol: "realtime, openai-insecure-api-key.KEY".
KEY_PROTOCOLS = ("openai-insecure-api-key.",)
# ASCII on purpose: mitmdump prints a header's non-ASCII bytes escaped (`\xe2\x80\xa6` for an ellipsis).
REDACTED = "...[redacted]"
EARLIER_MARKERS = (REDACTED, "\u2026[redacted]")  # the ellipsis marker of earlier versions, in older dumps


# The names looked for, as the raw header fields spell them (lower-cased): one pass over the fields finds
# and masks them (a lookup by name walks every field, and this runs on every LLM flow).
_SECRET_FIELDS = frozenset(name.encode() for name in SECRET_HEADERS)
_PROTOCOL_FIELD = b"sec-websocket-protocol"
_KEY_PROTOCOLS = tuple(prefix.encode() for prefix in KEY_PROTOCOLS)
_MARKER_BYTES = tuple(marker.encode() for marker in EARLIER_MARKERS)


class Masked(NamedTuple):
    """What ``redact_credentials`` replaced in one request, for a replay of it (``restore_credentials``):
    each header field's lower-cased name, its mask and its value; each query parameter's likewise. Kept in
    the proxy's memory only, never on the flow."""

    fields: tuple[tuple[bytes, bytes, bytes], ...]
    query: tuple[tuple[str, str, str], ...]


def redact_credentials(flow: http.HTTPFlow) -> Masked | None:
    """Replace the credentials of a stored request by a marker that keeps their first few characters.
    Returns what it replaced (None: nothing)."""
    request = flow.request
    headers = request.headers
    fields = headers.fields
    masked: list | None = None  # the fields, once one changes
    protocols = []  # where the WebSocket subprotocol lists are
    replaced: list[tuple[bytes, bytes, bytes]] = []
    for i, (name, value) in enumerate(fields):
        lowered = name.lower()
        if lowered in _SECRET_FIELDS:
            new = _encoded(mask(_decoded(value)))
            if new != value:
                if masked is None:
                    masked = list(fields)
                masked[i] = (name, new)
                replaced.append((lowered, new, value))
        elif lowered == _PROTOCOL_FIELD:
            protocols.append(i)
    # Every list of subprotocols is rewritten when one carries a key, as mitmproxy's set_all would.
    if any(prefix in fields[i][1] for i in protocols for prefix in _KEY_PROTOCOLS):
        if masked is None:
            masked = list(fields)
        for i in protocols:
            new = _encoded(_mask_protocols(_decoded(fields[i][1])))
            masked[i] = (fields[i][0], new)
            replaced.append((_PROTOCOL_FIELD, new, fields[i][1]))
    if masked is not None:
        headers.fields = tuple(masked)
    in_query: list[tuple[str, str, str]] = []
    if "?" in request.path:  # reading the query parses the path: only where there is one
        query = request.query
        for name in SECRET_QUERY:
            values = query.get_all(name)
            if values:
                hidden = [mask(value) for value in values]
                query.set_all(name, hidden)
                in_query += [(name, new, value) for new, value in zip(hidden, values) if new != value]
    return Masked(tuple(replaced), tuple(in_query)) if replaced or in_query else None


def restore_credentials(flow: http.HTTPFlow, masked: Masked) -> None:
    """Put back what ``redact_credentials`` replaced, where the request still holds its mask: a field or
    parameter changed since (edited in mitmweb, set by mitmproxy's modify_headers) is left as it is."""
    request = flow.request
    if masked.fields:
        pending = list(masked.fields)
        fields = list(request.headers.fields)
        for i, (name, value) in enumerate(fields):
            lowered = name.lower()
            for j, (was, new, original) in enumerate(pending):
                if value == new and lowered == was:
                    fields[i] = (name, original)
                    del pending[j]
                    break
        request.headers.fields = tuple(fields)
    if masked.query and "?" in request.path:
        query = request.query
        for name in {name for name, _, _ in masked.query}:
            values = query.get_all(name)
            restored = list(values)
            for was, new, original in masked.query:
                if was == name and new in restored:
                    restored[restored.index(new)] = original
            if restored != values:
                query.set_all(name, restored)


def still_redacted(request: http.Request) -> list[str]:
    """The credential header fields and query parameters of a request that hold a mask (the request of a
    flow loaded from a capture made with redaction on): sent so, the provider refuses it."""
    names = [
        name.decode("latin-1")
        for name, value in request.headers.fields
        if name.lower() in _SECRET_FIELDS and value.endswith(_MARKER_BYTES)
    ]
    if "?" in request.path:
        query = request.query
        names += [
            name for name in SECRET_QUERY if any(v.endswith(EARLIER_MARKERS) for v in query.get_all(name))
        ]
    return names


def _decoded(value: bytes) -> str:
    """A header's value as mitmproxy's ``Headers`` gives it."""
    return value.decode("utf-8", "surrogateescape")


def _encoded(value: str) -> bytes:
    """A header's value as mitmproxy's ``Headers`` stores it."""
    return value.encode("utf-8", "surrogateescape")


def mask(value: str) -> str:
    if value.endswith(EARLIER_MARKERS):
        return value
    scheme, space, secret = value.partition(" ")
    if not space or len(scheme) > 24:  # no auth scheme: the whole value is the secret
        scheme, secret = "", value
    else:
        scheme += " "
    keep = min(6, len(secret) // 4)
    return f"{scheme}{secret[:keep]}{REDACTED}"


def _mask_protocols(value: str) -> str:
    """A ``Sec-WebSocket-Protocol`` list with the key of each key-carrying entry masked."""
    entries = []
    for entry in value.split(","):
        name = entry.strip()
        prefix = next((p for p in KEY_PROTOCOLS if name.startswith(p)), None)
        entries.append(prefix + mask(name[len(prefix) :]) if prefix else name)
    return ", ".join(entries)
