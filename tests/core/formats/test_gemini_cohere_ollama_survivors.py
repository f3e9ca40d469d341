"""Gemini, Gemini Live, Cohere v2 and Ollama: what a mutation run found untested (the logic survivors of
``accumulator/formats/gemini.py``, ``gemini_live.py``, ``cohere.py`` and ``ollama.py``; see
docs/mutation.md). Each test was checked by applying the mutation it guards against to the source by hand
and seeing it fail."""

from __future__ import annotations

import json

import pytest
from schemas import check_result
from streams import codes, named_sse, warning

from accumulator import Connection, analyze, analyze_message

GEMINI_LIVE_PATH = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"


def first_token(result: dict):
    return result["timing"]["first_token_event"]


def calls(result: dict) -> list[tuple]:
    return [
        (c["id"], c["name"], c["arguments"]) for choice in result["choices"] for c in choice["tool_calls"]
    ]


def call_events(result: dict) -> list[tuple]:
    return [
        (c["name"], c["arguments"], c["first_event"], c["last_event"])
        for choice in result["choices"]
        for c in choice["tool_calls"]
    ]


# --- a body that is not JSON: its event number, streamed or whole (the dialects' _load) ----------------------


@pytest.mark.parametrize(
    ("format", "body"),
    [
        ("cohere-v2", named_sse(("message-start", {"id": "c"})) + b"event: content-delta\ndata: {nope\n\n"),
        ("gemini", b'data: {"candidates": []}\r\n\r\ndata: {nope\r\n\r\n'),
        ("ollama-chat", b'{"model": "m", "done": false}\n{nope\n'),
    ],
)
def test_a_streamed_event_that_is_not_json_is_reported_with_its_event_number(format, body):
    # cohere ops_6, gemini ops_12, ollama ops_3
    assert warning(analyze(body, format), "malformed-event")["event"] == 2


@pytest.mark.parametrize("format", ["cohere-v2", "gemini", "ollama-chat"])
def test_a_whole_message_that_is_not_json_is_reported_as_event_1(format):
    # cohere/gemini/ollama message_ops_3
    assert warning(analyze_message(b"{not json", format), "malformed-event")["event"] == 1


# --- Cohere v2 streams ------------------------------------------------------------------------------------


def cohere(kind: str, **payload) -> tuple[str, dict]:
    return kind, payload


def message(**fields) -> dict:
    return {"delta": {"message": fields}}


COHERE_START = cohere("message-start", id="co_1", **message(role="assistant"))
COHERE_END = cohere("message-end", delta={"finish_reason": "COMPLETE"})


def test_cohere_text_and_plan_are_first_tokens_at_their_own_events_and_an_empty_or_odd_plan_adds_nothing():
    # ops_68 (content-delta's event), ops_88 (tool-plan-delta's event), ops_85 (an empty or odd plan)
    text = named_sse(
        COHERE_START, cohere("content-delta", index=0, **message(content={"text": "Hi"})), COHERE_END
    )
    assert first_token(analyze(text, "cohere-v2")) == 2
    plan = named_sse(
        COHERE_START,
        cohere("tool-plan-delta", **message(tool_plan="")),
        cohere("tool-plan-delta", **message(tool_plan=["not", "text"])),
        cohere("tool-plan-delta", **message(tool_plan="Plan.")),
        COHERE_END,
    )
    result = analyze(plan, "cohere-v2")
    assert first_token(result) == 4 and result["choices"][0]["reasoning"] == "Plan."


def test_cohere_a_calls_events_are_its_start_and_its_last_delta_and_the_start_may_carry_arguments():
    # ops_118 (the start's event), ops_29 (a delta's event), ops_123/ops_137 (the start's own arguments)
    call = {"id": "c1", "type": "function", "function": {"name": "one", "arguments": '{"a": '}}
    body = named_sse(
        COHERE_START,
        cohere("tool-call-start", index=0, **message(tool_calls=call)),
        cohere("tool-call-delta", index=0, **message(tool_calls={"function": {"arguments": "1"}})),
        cohere("tool-call-delta", index=0, **message(tool_calls={"function": {"arguments": "}"}})),
        cohere("tool-call-end", index=0),
        cohere("message-end", delta={"finish_reason": "TOOL_CALL"}),
    )
    assert call_events(analyze(body, "cohere-v2")) == [("one", '{"a": 1}', 2, 4)]


def test_cohere_an_error_finish_is_reported_at_the_message_ends_event():
    # ops_181
    body = named_sse(COHERE_START, cohere("message-end", delta={"finish_reason": "ERROR"}))
    assert warning(analyze(body, "cohere-v2"), "provider-error")["event"] == 2


@pytest.mark.parametrize(
    ("payload", "error"),
    [
        ({"error": {"message": "overloaded"}}, {"message": "overloaded"}),
        # No "error" inside: the event itself is the error object.
        ({"message": "bad"}, {"type": "error", "message": "bad"}),
    ],
)
def test_cohere_an_error_event_names_its_event_and_keeps_its_error_object(payload, error):
    # ops_206 (event), ops_207/208/209 (the error object; 208/209 raised), ops_210/211 (error or the event)
    result = analyze(named_sse(COHERE_START, cohere("error", **payload)), "cohere-v2")
    found = warning(result, "provider-error")
    assert (found["event"], found["error"]) == (2, error) and result["error"] == error


def test_cohere_message_end_ends_the_stream_even_without_a_finish_reason_or_any_content():
    # ops_201 (the end marker dropped: the stream would be reported truncated)
    result = analyze(named_sse(COHERE_START, cohere("message-end", delta={})), "cohere-v2")
    assert result["complete"] is True and "truncated-stream" not in codes(result)


def test_a_whole_cohere_message_is_complete_without_a_finish_reason_and_its_calls_are_at_event_1():
    # message_ops_152 (its end marker dropped), message_ops_100 (a call's event)
    call = {"id": "c1", "type": "function", "function": {"name": "one", "arguments": "{}"}}
    for body in ({"id": "co_1", "message": {}}, {"id": "co_2", "message": {"tool_calls": [call]}}):
        result = analyze_message(json.dumps(body).encode(), "cohere-v2")
        assert result["complete"] is True and result["warnings"] == [], body
    assert call_events(result) == [("one", "{}", 1, 1)]


# --- Gemini streams ---------------------------------------------------------------------------------------


def gemini_chunk(*parts, finish: str | None = None, **extra) -> dict:
    candidate: dict = {"content": {"role": "model", "parts": list(parts)}}
    if finish is not None:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], **extra}


def gemini_sse(*chunks: dict) -> bytes:
    return b"".join(b"data: " + json.dumps(chunk).encode() + b"\r\n\r\n" for chunk in chunks)


def gemini_array(*chunks: dict, end: bool = True) -> bytes:
    return ("[" + ",\n".join(json.dumps(chunk) for chunk in chunks) + ("]" if end else "")).encode()


def opens(name: str) -> dict:
    return {"functionCall": {"name": name, "willContinue": True}}


def partial(path: str, value: str, more: bool = True) -> dict:
    call: dict = {"partialArgs": [{"jsonPath": path, "stringValue": value}]}
    return {"functionCall": {**call, "willContinue": True} if more else call}


def test_a_gemini_error_chunk_names_its_event_and_keeps_its_error_object():
    # _chunk_ops_6 (event), _chunk_ops_7 (the error object)
    inner = {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}
    result = analyze(gemini_sse(gemini_chunk({"text": "Hi"}), {"error": inner}), "gemini")
    found = warning(result, "provider-error")
    assert (found["event"], found["error"], result["error"]) == (2, inner, inner)


def test_a_gemini_text_is_the_first_token_at_its_event_and_empty_or_textless_parts_add_nothing():
    # _part_25, _chunk_ops_71 (the text's event), _part_16 (an empty text; a part without text raised)
    body = gemini_sse(
        gemini_chunk({"text": ""}, {"inlineData": {"mimeType": "image/png", "data": "AA=="}}),
        gemini_chunk({"text": "Hi"}, finish="STOP"),
    )
    result = analyze(body, "gemini")
    assert first_token(result) == 2 and result["choices"][0]["text"] == "Hi" and result["warnings"] == []


def test_vertex_streamed_calls_are_closed_at_the_event_that_closes_them():
    # _function_call_19 (a call's first event), _close_6 (a close's event); closed by: a new call
    # (_function_call_6), partialArgs without willContinue (_function_call_84), an empty functionCall
    # (_function_call_87/89/90), the candidate's finishReason (_chunk_ops_84/85).
    body = gemini_sse(
        gemini_chunk(opens("a")),  # 1
        gemini_chunk(partial("$.q", "x")),  # 2
        gemini_chunk({"functionCall": {}}),  # 3: closes a
        gemini_chunk(opens("b")),  # 4
        gemini_chunk(opens("c")),  # 5: closes b
        gemini_chunk(partial("$.q", "y", more=False)),  # 6: closes c
        gemini_chunk(opens("d")),  # 7
        gemini_chunk({"text": "ok"}),  # 8
        gemini_chunk(finish="STOP"),  # 9: closes d
        {"usageMetadata": {"totalTokenCount": 9}},  # 10
    )
    result = analyze(body, "gemini")
    assert call_events(result) == [
        ("a", '{"q":"x"}', 1, 3),
        ("b", "{}", 4, 5),
        ("c", '{"q":"y"}', 5, 6),
        ("d", "{}", 7, 9),
    ]
    assert result["complete"] is True and result["warnings"] == []


def test_partial_args_after_an_empty_function_call_closed_the_call_continue_nothing():
    # _function_call_61/63/66/67 (the warning's event, reason and data), _function_call_87 (an empty
    # functionCall that did not close would take these arguments)
    body = gemini_sse(
        gemini_chunk(opens("a")),
        gemini_chunk({"functionCall": {}}),
        gemini_chunk(partial("$.late", "z")),
        gemini_chunk(finish="STOP"),
    )
    result = analyze(body, "gemini")
    assert call_events(result) == [("a", "{}", 1, 2)]
    found = warning(result, "malformed-event")
    assert found["event"] == 3 and "never opened" in found["message"] and "$.late" in found["data"]


def test_a_call_still_open_is_closed_at_the_arrays_end_or_at_the_last_event_of_a_cut_stream():
    # ops_5 (the array's "]"), _close_all_3, finish_1 (a stream cut while a call streamed)
    chunks = (gemini_chunk({"text": "Hi"}), gemini_chunk(opens("a")), gemini_chunk(partial("$.q", "x")))
    assert call_events(analyze(gemini_array(*chunks), "gemini")) == [("a", '{"q":"x"}', 2, 4)]
    assert call_events(analyze(gemini_sse(*chunks), "gemini")) == [("a", '{"q":"x"}', 2, 3)]


def test_a_whole_gemini_message_with_a_call_left_open_is_all_at_event_1():
    # message_ops_11 (the chunk's event), message_ops_15 (the close at its end)
    body = gemini_chunk(opens("a"), finish=None)
    assert call_events(analyze_message(json.dumps(body).encode(), "gemini")) == [("a", "{}", 1, 1)]


def test_gemini_function_calls_with_the_same_id_are_each_a_call_of_their_own():
    # _function_call_25/32/41 (whole=True: a part is a whole call, never a continuation of another)
    one = {"functionCall": {"id": "dup", "name": "one", "args": {"a": 1}}}
    two = {"functionCall": {"id": "dup", "name": "two", "args": {"b": 2}}}
    result = analyze(gemini_sse(gemini_chunk(one), gemini_chunk(two, finish="STOP")), "gemini")
    assert call_events(result) == [("one", '{"a":1}', 1, 1), ("two", '{"b":2}', 2, 2)]


def test_partial_args_whose_path_is_not_a_string_or_not_rooted_at_dollar_are_left_out():
    # _set_path_6 (a numeric path raised; a path without "$" was read from its second character)
    odd = {"functionCall": {"partialArgs": [
        {"jsonPath": 7, "stringValue": "x"},
        {"jsonPath": "a.b", "stringValue": "y"},
        {"jsonPath": "$.q", "stringValue": "z"},
    ], "willContinue": True}}  # fmt: skip
    result = analyze(
        gemini_sse(gemini_chunk(opens("a")), gemini_chunk(odd), gemini_chunk(finish="STOP")), "gemini"
    )
    assert call_events(result) == [("a", '{"q":"z"}', 1, 3)]


# --- Gemini requests: declared tools, their schemas and a forced tool -----------------------------------------


def gemini_calls(*named: tuple[str, dict]) -> bytes:
    parts = [{"functionCall": {"name": name, "args": args}} for name, args in named]
    return gemini_sse(gemini_chunk(*parts, finish="STOP"))


def request_codes(body: bytes, request: dict) -> list[tuple]:
    return [(w["code"], w.get("name")) for w in analyze(body, "gemini", request=request)["warnings"]]


def test_gemini_tools_after_an_odd_entry_are_declared_with_their_json_schema():
    # _tools_13 (an odd entry ended the list), _tools_23/24 (parametersJsonSchema ignored)
    schema = {"type": "object", "required": ["q"]}
    request = {"tools": ["odd", {"functionDeclarations": [{"name": "find", "parametersJsonSchema": schema}]}]}
    assert request_codes(gemini_calls(("find", {"q": 1})), request) == []
    assert request_codes(gemini_calls(("find", {})), request) == [("schema-mismatch", "find")]


def test_gemini_tools_that_are_not_a_list_declare_nothing():
    # _tools_8 (tools iterated whatever they were: a number raised)
    for tools in (5, "find", {"functionDeclarations": [{"name": "find"}]}):
        assert request_codes(gemini_calls(("find", {})), {"tools": tools}) == [("undeclared-tool", "find")]


def test_gemini_openapi_parameters_have_their_type_names_lowered_and_nothing_else():
    # _openapi_types_6 (every string lowered: a pattern in capitals), _openapi_types_13/15 (lists of schemas)
    parameters = {
        "type": "OBJECT",
        "properties": {
            "code": {"type": "STRING", "pattern": "^[A-Z]+$"},
            "n": {"anyOf": [{"type": "INTEGER"}, {"type": "BOOLEAN"}]},
        },
    }
    request = {"tools": [{"functionDeclarations": [{"name": "f", "parameters": parameters}]}]}
    assert request_codes(gemini_calls(("f", {"code": "AB", "n": 1})), request) == []
    assert request_codes(gemini_calls(("f", {"code": "AB", "n": "x"})), request) == [("schema-mismatch", "f")]


@pytest.mark.parametrize(
    ("allowed", "forced"),
    [(["b"], True), (["a", "b"], False), ("b", False), (None, False), ({"b": 1}, False)],
)
def test_gemini_mode_any_forces_a_tool_only_with_a_list_of_one_name(allowed, forced):
    # _forced_29/30 (two names forced the first; a one-letter string forced itself; None or a dict raised)
    config = {"mode": "ANY", **({} if allowed is None else {"allowedFunctionNames": allowed})}
    found = request_codes(gemini_calls(("a", {})), {"toolConfig": {"functionCallingConfig": config}})
    assert [code for code, _ in found] == (["tool-choice-ignored"] if forced else [])


# --- Ollama -----------------------------------------------------------------------------------------------


def ndjson(*lines: dict) -> bytes:
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


@pytest.mark.parametrize("field", ["thinking", "content"])
def test_ollama_thinking_or_content_is_the_first_token_at_its_own_line(field):
    # _line_ops_39 (thinking's event), _line_ops_61 (content's event)
    body = ndjson(
        {"model": "m", "message": {"role": "assistant", "content": ""}, "done": False},
        {"model": "m", "message": {field: "Hm"}, "done": False},
        {"model": "m", "message": {"content": ""}, "done": True},
    )
    assert first_token(analyze(body, "ollama-chat")) == 2


def test_a_whole_ollama_message_has_its_call_at_event_1():
    # message_ops_11
    call = {"function": {"name": "one", "arguments": {"a": 1}}}
    body = ndjson({"model": "m", "message": {"tool_calls": [call]}, "done": True})
    assert call_events(analyze_message(body, "ollama-chat")) == [("one", '{"a":1}', 1, 1)]


# --- Gemini Live ------------------------------------------------------------------------------------------


class Live:
    """A Gemini Live connection fed JSON messages; every settled result collected and checked."""

    def __init__(self) -> None:
        self.connection = Connection("gemini-live", path=GEMINI_LIVE_PATH)
        self.results: list[dict] = []

    def send(self, from_client: bool, obj: dict) -> None:
        self.results += self.connection.message(from_client, json.dumps(obj).encode(), False)

    def finish(self) -> list[dict]:
        self.results += self.connection.finish()
        for result in self.results:
            check_result(result)
        return self.results


def live_turn() -> Live:
    live = Live()
    live.send(True, {"setup": {"model": "models/live-x"}})
    live.send(False, {"setupComplete": {}})
    live.send(True, {"clientContent": {"turns": [], "turnComplete": True}})
    return live


@pytest.mark.parametrize(
    "said", [{"modelTurn": {"parts": [{"text": "Hi"}]}}, {"outputTranscription": {"text": "Hi"}}]
)
def test_gemini_live_text_or_a_transcript_is_the_first_token_at_its_message_of_the_response(said):
    # obj_ops_138 (a part's text), obj_ops_180 (a transcript)
    live = live_turn()
    live.send(False, {"serverContent": {"modelTurn": {"parts": []}}})
    live.send(False, {"serverContent": said})
    live.send(False, {"serverContent": {"turnComplete": True}})
    (result,) = live.finish()
    assert result["choices"][0]["text"] == "Hi" and first_token(result) == 2


def test_gemini_live_calls_of_a_batch_with_the_same_id_are_each_a_call_of_their_own():
    # obj_ops_60/67/80 (whole=True)
    live = live_turn()
    batch = [{"id": "dup", "name": "one", "args": {"a": 1}}, {"id": "dup", "name": "two", "args": {"b": 2}}]
    live.send(False, {"toolCall": {"functionCalls": batch}})
    (result,) = live.finish()
    assert calls(result) == [("dup", "one", '{"a":1}'), ("dup", "two", '{"b":2}')]


def test_gemini_live_a_response_after_the_answers_settles_them_once_and_not_the_next_responses_calls():
    # server_69: the answers seen were used up by the response they came before; the next response,
    # started while its own calls await answers, must not settle them (it would call them unanswered).
    live = live_turn()
    live.send(False, {"toolCall": {"functionCalls": [{"id": "x", "name": "one"}]}})
    live.send(True, {"toolResponse": {"functionResponses": [{"id": "x"}]}})
    live.send(False, {"toolCall": {"functionCalls": [{"id": "y", "name": "two"}]}})
    live.send(False, {"serverContent": {"modelTurn": {"parts": [{"text": "Still working"}]}}})
    live.send(True, {"toolResponse": {"functionResponses": [{"id": "y"}]}})
    live.send(False, {"serverContent": {"turnComplete": True}})
    results = {r["websocket"]["position"]: r for r in live.finish()}
    assert [results[n]["websocket"]["evidence"]["answered"] for n in (1, 2)] == [["x"], ["y"]]
    assert [w["code"] for r in results.values() for w in r["warnings"]] == []


def test_gemini_live_without_a_setup_message_names_no_model_and_checks_no_tools():
    # GeminiLiveSession.__init___2/3 (config and model "" for None)
    live = Live()
    live.send(False, {"toolCall": {"functionCalls": [{"id": "x", "name": "one"}]}})
    (result,) = live.finish()
    assert result["model"] is None and calls(result) == [("x", "one", "{}")] and result["warnings"] == []
