"""The contenders: each takes a stream's pieces and returns (id, name, arguments) per call. The floor (the
least any reader must do), the core, the addon's stream callable, and the peers when they are installed."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import orjson

from accumulator import DEFAULT_STRATEGIES, StreamAccumulator

from .streams import MODEL, chat_body


def run_floor(pieces: Iterable[bytes]) -> list:
    """The least any reader must do: cut lines, orjson.loads every data line. Rebuilds nothing."""
    loads = orjson.loads
    carry = b""
    for piece in pieces:
        lines = (carry + piece).split(b"\n")
        carry = lines.pop()
        for line in lines:
            if line.startswith(b"data: ") and line != b"data: [DONE]":
                loads(line[6:])
    return []


def core_runner(strategies: tuple[str, ...]) -> Callable[[Iterable[bytes]], list]:
    def run_core(pieces: Iterable[bytes]) -> list:
        accumulator = StreamAccumulator("openai-chat", strategies=strategies)
        for piece in pieces:
            accumulator.feed(piece)
        result = accumulator.finish()
        return [(c["id"], c["name"], c["arguments"]) for c in result["choices"][0]["tool_calls"]]

    return run_core


def addon_runner() -> tuple[Callable | None, str]:
    """The addon's own stream callable (addon.StreamWatch) around an accumulator built as the addon builds
    it (request body, clock, stall threshold, every strategy): what mitmdump calls once per chunk."""
    try:
        from addon import StreamWatch
    except Exception as exc:  # noqa: BLE001 - a row that says why it is missing
        return None, f"unavailable ({exc!r})"
    request = chat_body(MODEL)

    def run_watch(pieces: Iterable[bytes]) -> list:
        accumulator = StreamAccumulator(
            "openai-chat",
            request=request,
            strategies=tuple(DEFAULT_STRATEGIES),
            started_at=time.time(),
            stall_seconds=10.0,
        )
        watch = StreamWatch(accumulator, "openai-chat", 16 * 2**20)
        for piece in pieces:
            watch(piece)
        result, _body = watch.finish()
        return [(c["id"], c["name"], c["arguments"]) for c in result["choices"][0]["tool_calls"]]

    return run_watch, "addon.StreamWatch"


def openai_runner() -> tuple[Callable | None, str]:
    """openai-python as ``client.chat.completions.stream()`` runs: its SSE decoder, ``json.loads`` of each
    event, ``construct_type(ChatCompletionChunk, ...)`` (what Stream.__stream__ does without strict
    validation), ``ChatCompletionStreamState.handle_chunk`` (events consumed), ``get_final_completion()``."""
    try:
        import openai
        from openai._models import construct_type
        from openai._streaming import SSEDecoder
        from openai.lib.streaming.chat import ChatCompletionStreamState
        from openai.types.chat import ChatCompletionChunk
    except ImportError as exc:
        return None, f"not installed ({exc})"

    def run_openai(pieces: Iterable[bytes]) -> list:
        state = ChatCompletionStreamState()
        for sse in SSEDecoder().iter_bytes(iter(pieces)):
            if sse.data.startswith("[DONE]"):
                break
            chunk = construct_type(type_=ChatCompletionChunk, value=sse.json())
            for _event in state.handle_chunk(chunk):
                pass
        completion = state.get_final_completion()
        calls = completion.choices[0].message.tool_calls or []
        return [(c.id, c.function.name, c.function.arguments) for c in calls]

    return run_openai, f"openai {openai.__version__}"


def langchain_runners() -> tuple[dict[str, Callable], str]:
    """LangChain's own merging of AIMessageChunk (as langchain-openai builds them from each delta:
    ``tool_call_chunks`` with name, args, id, index), on events parsed as the floor parses them. Two ways
    LangChain merges: ``gathered = gathered + chunk`` per event (the streaming idiom of its docs and
    agents) and one ``chunks[0] + chunks[1:]`` at the end (``generate_from_stream``)."""
    try:
        import langchain_core
        from langchain_core.messages import AIMessageChunk
        from langchain_core.messages.tool import tool_call_chunk
    except ImportError:
        return {}, "not installed (pip install langchain-core to add it)"

    def chunks_of(pieces: Iterable[bytes]):
        loads = orjson.loads
        carry = b""
        for piece in pieces:
            lines = (carry + piece).split(b"\n")
            carry = lines.pop()
            for line in lines:
                if not line.startswith(b"data: ") or line == b"data: [DONE]":
                    continue
                delta = loads(line[6:])["choices"][0]["delta"]
                raw = delta.get("tool_calls") or []
                tool_chunks = [
                    tool_call_chunk(
                        name=rtc.get("function", {}).get("name"),
                        args=rtc.get("function", {}).get("arguments"),
                        id=rtc.get("id"),
                        index=rtc.get("index"),
                    )
                    for rtc in raw
                ]
                yield AIMessageChunk(content=delta.get("content") or "", tool_call_chunks=tool_chunks)

    def calls_of(message) -> list:
        return [(c["id"], c["name"], c["args"]) for c in message.tool_call_chunks]

    def run_running(pieces: Iterable[bytes]) -> list:
        gathered = None
        for chunk in chunks_of(pieces):
            gathered = chunk if gathered is None else gathered + chunk
        return calls_of(gathered)

    def run_once(pieces: Iterable[bytes]) -> list:
        chunks = list(chunks_of(pieces))
        return calls_of(chunks[0] + chunks[1:])

    runners = {
        "LangChain, gathered + chunk per event": run_running,
        "LangChain, one merge at the end": run_once,
    }
    return runners, f"langchain-core {langchain_core.__version__}"
