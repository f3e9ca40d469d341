"""Gemini Live (``…BidiGenerateContent``, the Live API), over a WebSocket only.

The server's messages come in binary frames holding UTF-8 JSON (text frames are read the same way), in
camelCase; Google's Python SDK sends some of the client's in snake_case (``tool_response``): both are
read. Calls arrive whole, a batch in one ``toolCall`` message (``functionCalls[{id, name, args}]``): there
are no deltas to misroute, so the hazard strategies do not apply. A response is the model's output from
its first message to ``turnComplete``, to a ``toolCall`` (the model then waits for the answers), or to
``interrupted``.

The client's evidence: ``toolResponse.functionResponses[].id`` answers calls; ``toolCallCancellation``
(server) cancels calls already sent, which the client should then not answer.
"""

from __future__ import annotations

from ..ops import Finish, StreamEnd, TextDelta, ToolCallDelta, Usage
from ..usage import UsageParts, either
from .base import JsonDialect, WebSocketSupport, WireFormat, as_dict, as_list, as_str
from .gemini import FORMAT as GEMINI


def field(obj: dict, camel: str, snake: str):
    """A key in either spelling (the server's camelCase, the Python SDK's snake_case)."""
    value = obj.get(camel)
    return obj.get(snake) if value is None else value


class GeminiLiveDialect(JsonDialect):
    fragments = False
    empty_arguments = "{}"

    def __init__(self, warnings) -> None:
        super().__init__(warnings)
        self._calls = 0  # calls opened so far in this response (the index of the next)

    def obj_ops(self, obj: dict, kind: str | None, number: int) -> list:
        out: list = []
        usage = field(obj, "usageMetadata", "usage_metadata")
        if type(usage) is dict:
            out.append(Usage(number, usage))
        calls = as_dict(field(obj, "toolCall", "tool_call"))
        for call in as_list(field(calls, "functionCalls", "function_calls")):
            if type(call) is not dict:
                continue
            arguments = call.get("args")
            out.append(
                ToolCallDelta(
                    number,
                    0,
                    as_str(call.get("id")),
                    self._calls,
                    as_str(call.get("name")),
                    arguments if arguments is not None else {},
                    True,
                )
            )
            self._calls += 1
        if calls:
            out.append(Finish(number, 0, "tool_call"))
            out.append(StreamEnd(number))
        content = as_dict(field(obj, "serverContent", "server_content"))
        turn = as_dict(field(content, "modelTurn", "model_turn"))
        for part in as_list(turn.get("parts")):
            if type(part) is dict and type(part.get("text")) is str and part["text"]:
                out.append(TextDelta(number, 0, "reasoning" if part.get("thought") else "text", part["text"]))
        transcript = as_dict(field(content, "outputTranscription", "output_transcription"))
        if type(transcript.get("text")) is str and transcript["text"]:
            out.append(TextDelta(number, 0, "text", transcript["text"]))
        if field(content, "turnComplete", "turn_complete") is True:
            out.append(Finish(number, 0, "turn_complete"))
            out.append(StreamEnd(number))
        return out

    def message_ops(self, body: bytes) -> list:
        return []  # the Live API has no non-streamed response


class GeminiLiveSession:
    """Starts a response at the model's first message after the client's turn, ends it at
    ``turnComplete``, a ``toolCall`` or ``interrupted``; reads answers and cancellations."""

    def __init__(self, connection) -> None:
        self.connection = connection
        self.config: dict | None = None  # the client's setup: model, tools
        self.model: str | None = None
        self.answered_since = False  # a toolResponse came since the last response awaiting evidence ended

    def client(self, obj: dict, number: int) -> None:
        connection = self.connection
        setup = field(obj, "setup", "setup")
        if type(setup) is dict:
            self.config = {"tools": setup.get("tools")} if setup.get("tools") is not None else None
            model = as_str(setup.get("model"))
            self.model = model.removeprefix("models/") if model else self.model
            return
        answers = field(obj, "toolResponse", "tool_response")
        if type(answers) is dict:
            responses = as_list(field(answers, "functionResponses", "function_responses"))
            connection.answer([r.get("id") for r in responses if type(r) is dict])
            self.answered_since = True
            return
        content = field(obj, "clientContent", "client_content")
        if type(content) is dict and field(content, "turnComplete", "turn_complete"):
            connection.settle()  # a new turn of the user's: the answers so far are all there were

    def server(self, obj: dict, number: int) -> None:
        connection = self.connection
        cancellation = as_dict(field(obj, "toolCallCancellation", "tool_call_cancellation"))
        if cancellation:
            connection.cancel(list(as_list(cancellation.get("ids"))))
        content = as_dict(field(obj, "serverContent", "server_content"))
        calls = field(obj, "toolCall", "tool_call")
        usage = field(obj, "usageMetadata", "usage_metadata")
        if not content and calls is None and usage is None:
            return  # setupComplete, goAway, sessionResumptionUpdate, a cancellation alone
        response = connection.latest()
        if response is None:
            if not content and calls is None:
                return  # usage of a response already ended
            if self.answered_since:
                connection.settle()  # the model goes on after the answers: they are all there were
                self.answered_since = False
            response = connection.start(request=self.config, model=self.model)
        connection.feed(response, obj)
        if calls is not None or field(content, "turnComplete", "turn_complete") is True:
            connection.end(response)
        elif field(content, "interrupted", "interrupted") is True:
            connection.end(response, "interrupted", "the user spoke over the model")


def _ws_sniff(from_client: bool, obj: dict) -> bool:
    if from_client:
        return type(obj.get("setup")) is dict and "model" in obj["setup"]
    return "setupComplete" in obj or "setup_complete" in obj


def usage_parts(raw: dict) -> UsageParts:
    """Live's ``usageMetadata``: Gemini's, with ``responseTokenCount`` for the candidates, in either
    spelling."""
    thoughts = either(raw, "thoughtsTokenCount", "thoughts_token_count")
    return {
        "input": (
            either(raw, "promptTokenCount", "prompt_token_count"),
            either(raw, "toolUsePromptTokenCount", "tool_use_prompt_token_count"),
        ),
        "output": (either(raw, "responseTokenCount", "response_token_count"), thoughts),
        "cache_read": (either(raw, "cachedContentTokenCount", "cached_content_token_count"),),
        "reasoning": (thoughts,),
        "total": (either(raw, "totalTokenCount", "total_token_count"),),
    }


FORMAT = WireFormat(
    name="gemini-live",
    dialect=GeminiLiveDialect,
    framings=(),
    tools=GEMINI.tools,  # setup.tools: Gemini's function declarations
    usage=usage_parts,
    provider="google",
    genai_provider="gcp.gemini",
    genai_operation="generate_content",
    websocket=WebSocketSupport(
        paths=(r"BidiGenerateContent(Constrained)?$",), session=GeminiLiveSession, sniff=_ws_sniff
    ),
)
