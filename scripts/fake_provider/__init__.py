"""A local LLM provider in every wire format: scripted tool-call streams over real HTTP/1.1.

Formats, by path (POST): OpenAI Chat Completions `…/chat/completions`, OpenAI Responses `…/responses`,
Anthropic Messages `…/messages`, Cohere v2 `/v2/chat`, Ollama `/api/chat` (scenario = the body's "model");
Gemini `…/models/{scenario}:streamGenerateContent[?alt=sse]` and `:generateContent`; Bedrock
`/model/{scenario}/converse-stream`, `/converse`, `/invoke-with-response-stream`, `/invoke`.
A request body may come compressed (Content-Encoding gzip, deflate, br or zstd, as Codex sends its
own): it is read decoded. Request headers: X-Fake-Delay (seconds between events), X-Fake-Encoding (gzip, deflate, br or zstd),
X-Fake-Framing: length (a Content-Length body instead of chunks), X-Fake-Chunking: hostile (each event also
cut at hostile points, `accumulator.boundaries`, one write per piece), X-Fake-Fault (see FAULTS) with
X-Fake-Size and X-Fake-Drip-Bytes. GET /health, GET /v1/models, GET /release (lets `gated` streams go on).

WebSocket on the same port (a GET with Upgrade: websocket), by path (WS_PROTOCOLS): OpenAI Responses
WebSocket mode `…/responses` (the Responses events as text messages; "stream_id" lanes, "generate": false),
OpenAI Realtime `/v1/realtime?model=SCENARIO`, Gemini Live `…BidiGenerateContent` (binary frames). The
upgrade request may carry X-Fake-Delay, X-Fake-Fragment (frames of N bytes), X-Fake-Binary, X-Fake-Deflate
and X-Fake-Fault: ws-garbage|ws-drop; `ws_expected` gives the calls each response carries.

    .venv/bin/python scripts/fake_provider [--host 127.0.0.1] [--port 0] [--delay 0.02] [--agent-file PATH] [--agent-model NAME] [--agent-search TOOL]

The `agent` scenario (agent.py) is for real coding agents: configure the agent's model name as `agent` and
the first request, answered from the tools it declares, gets two parallel calls (its shell tool, its
file-read tool on --agent-file; a patch instead to an agent declaring a custom apply_patch tool, as Codex
does to a GPT-5 model, which --agent-model makes an `agent` too) and the follow-up carrying their results a
final text; GET /agent lists every answer it made (the calls sent, the results and the echoed calls
received). --agent-search TOOL sends the second call to TOOL (an MCP server's), after a client tool search
for it where the agent declares one but not TOOL (Codex to a GPT-5 model). A Responses agent declaring OpenAI's built-in `shell`
and `apply_patch` tools by type (the OpenAI Agents SDK's ShellTool, ApplyPatchTool) gets their calls.

Rooms: scenarios.py (the scripted steps), agent.py (the `agent` scenario), renderers/ (one module per wire format, the framing helpers),
bodies.py (a scenario in a format: events, body, expected calls, path, request), wire.py (compression and
hash headers), faults.py (X-Fake-Fault), request.py (what a request asks for), provider.py (the answers,
for any HTTP version), server.py (HTTP/1.1 over h11, and the process); websocket.py (wsproto, the outbox,
the WebSocket options and faults), ws_responses.py, ws_realtime.py, ws_live.py (one protocol each),
ws_protocols.py (their table, the hand-over at the upgrade).
"""

from __future__ import annotations

from .bodies import (
    FORMAT_SCENARIOS,
    body,
    content_type,
    events,
    expected_calls,
    final_response,
    path,
    payloads,
    request_body,
    sse_body,
)
from .faults import (
    FAULTS,
    HTML_502,
    HUGE_EVENT_HEAD,
    RATE_LIMITED,
    bomb_pieces,
    drop_mid_event_pieces,
    endless,
    huge_event_pieces,
)
from .provider import GATE_TIMEOUT, Provider, Transport
from .renderers import FORMATS
from .renderers.framing import aws_message
from .request import MAX_BODY_BYTES, Request
from .scenarios import SCENARIOS
from .server import MAX_HEAD_BYTES, Http1Provider, arguments, main, serve
from .websocket import WS_FAULTS
from .wire import ENCODINGS
from .ws_protocols import WS_PROTOCOLS, WS_SCENARIOS, ws_expected

__all__ = [
    "ENCODINGS",
    "FAULTS",
    "FORMATS",
    "FORMAT_SCENARIOS",
    "GATE_TIMEOUT",
    "HTML_502",
    "HUGE_EVENT_HEAD",
    "MAX_BODY_BYTES",
    "MAX_HEAD_BYTES",
    "RATE_LIMITED",
    "SCENARIOS",
    "WS_FAULTS",
    "WS_PROTOCOLS",
    "WS_SCENARIOS",
    "Http1Provider",
    "Provider",
    "Request",
    "Transport",
    "arguments",
    "aws_message",
    "body",
    "bomb_pieces",
    "content_type",
    "drop_mid_event_pieces",
    "endless",
    "events",
    "expected_calls",
    "final_response",
    "huge_event_pieces",
    "main",
    "path",
    "payloads",
    "request_body",
    "serve",
    "sse_body",
    "ws_expected",
]
