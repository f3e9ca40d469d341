"""Chat Completions dialect + identity routing: each rule and each quirk it survives."""

from __future__ import annotations

import json

import pytest
from streams import DATA, call, calls_of, choice, chunk, codes, sse, tool_chunk, warning

from accumulator import StreamAccumulator, analyze


def run(body: bytes, **options) -> dict:
    return analyze(body, "openai-chat", **options)


# --- the two scenarios that started the project -------------------------------------------------


def test_production_scenario_gives_two_correct_calls_and_recency_misroute():
    result = run((DATA / "production_interleaved.sse").read_bytes())
    assert calls_of(result) == [
        ("call_abc", "search_circulars", '{"query": "RBI circulars"}'),
        ("call_xyz", "get_user_profile", '{"user_id": "u123"}'),
    ]
    assert codes(result) == ["recency-misroute"]
    misroute = warning(result, "recency-misroute")
    assert misroute["severity"] == "warning"
    assert misroute["first_divergence_event"] == 3
    assert misroute["would_build"] == [
        {"id": "call_abc", "name": "search_circulars", "arguments": ""},
        {
            "id": "call_xyz",
            "name": "get_user_profile",
            "arguments": '{"query": "RBI{"user_id": "u circulars"}123"}',
        },
    ]
    assert result["complete"] is True


def test_bifrost_regression_scenario():
    result = run((DATA / "bifrost_regression.sse").read_bytes())
    assert calls_of(result) == [
        ("call_0", "add", '{"a": 1, "b": 3}'),
        ("call_1", "multiply", '{"a": 2, "b": 4}'),
    ]
    misroute = warning(result, "recency-misroute")
    assert misroute["first_divergence_event"] == 3
    assert [c["name"] for c in misroute["would_build"]] == ["add", "multiply"]
    assert misroute["would_build"][1]["arguments"] == '{"a": 1{"a": 2, "b": 3}, "b": 4}'


def test_sequential_calls_raise_no_misroute():
    result = run((DATA / "openai_chat_parallel.sse").read_bytes())
    assert [c[1] for c in calls_of(result)] == ["get_weather", "get_time"]
    assert result["warnings"] == []


def test_recency_divergence_event_is_where_content_first_moved():
    # Two calls, interleaving starts only at event 5.
    body = sse(
        tool_chunk(call(0, "c0", "f", "")),
        tool_chunk(call(0, arguments='{"x":')),
        tool_chunk(call(1, "c1", "g", "")),
        tool_chunk(call(1, arguments='{"y": 2}')),
        tool_chunk(call(0, arguments=" 1}")),
        chunk(choice(0, "tool_calls")),
    )
    result = run(body)
    assert calls_of(result) == [("c0", "f", '{"x": 1}'), ("c1", "g", '{"y": 2}')]
    assert warning(result, "recency-misroute")["first_divergence_event"] == 5


def test_strategies_can_be_switched_off():
    result = run((DATA / "production_interleaved.sse").read_bytes(), strategies=())
    assert codes(result) == []


# --- identity routing rules -----------------------------------------------------------------------


def test_known_id_routes_even_with_the_wrong_index():
    body = sse(
        tool_chunk(call(0, "a", "f", "")),
        tool_chunk(call(1, "b", "g", "")),
        tool_chunk(call(1, "a", arguments='{"k": 1}')),  # id says call a, index disagrees
        chunk(choice(0, "tool_calls")),
    )
    assert calls_of(run(body)) == [("a", "f", '{"k": 1}'), ("b", "g", "")]


def test_same_id_name_and_type_repeated_on_every_delta():
    # Q3 / Q7: Fireworks, LiteLLM proxy, llama-cpp-python, MiniMax via NIM.
    body = sse(
        tool_chunk(call(0, "chatcmpl-tool-aa62", "get_current_weather", "", type="function")),
        tool_chunk(call(0, "chatcmpl-tool-aa62", "get_current_weather", '{"city":', type="function")),
        tool_chunk(call(0, "chatcmpl-tool-aa62", "get_current_weather", ' "Oslo"}', type="function")),
        chunk(choice(0, "tool_calls")),
    )
    result = run(body)
    assert calls_of(result) == [("chatcmpl-tool-aa62", "get_current_weather", '{"city": "Oslo"}')]
    assert codes(result).count("name-repeated") == 1  # once per call, not per delta
    assert warning(result, "name-repeated")["severity"] == "info"
    # Recency starts a call at every named delta: it breaks on this stream.
    assert len(warning(result, "recency-misroute")["would_build"]) == 3


def test_new_id_with_a_taken_index_starts_a_new_call_and_flags_the_collision():
    # Q6: Groq / Ollama send every parallel call with index 0 and distinct ids.
    body = sse(
        tool_chunk(call(0, "call_1", "weather", '{"location":"San Francisco"}')),
        tool_chunk(call(0, "call_2", "weather", '{"location":"Tokyo"}')),
        tool_chunk(call(0, "call_3", "weather", '{"location":"Paris"}')),
        chunk(choice(0, "tool_calls")),
    )
    result = run(body)
    assert calls_of(result) == [
        ("call_1", "weather", '{"location":"San Francisco"}'),
        ("call_2", "weather", '{"location":"Tokyo"}'),
        ("call_3", "weather", '{"location":"Paris"}'),
    ]
    collisions = [w for w in result["warnings"] if w["code"] == "index-collision"]
    assert [(w["id"], w["existing_id"], w["index"]) for w in collisions] == [
        ("call_2", "call_1", 0),
        ("call_3", "call_2", 0),
    ]
    assert "recency-misroute" not in codes(result)  # names on every call: recency gets this right


def test_id_less_fragment_after_a_collision_goes_to_the_newest_holder_of_the_index():
    body = sse(
        tool_chunk(call(0, "call_1", "f", '{"a": 1}')),
        tool_chunk(call(0, "call_2", "g", "")),
        tool_chunk(call(0, arguments='{"b": 2}')),
        chunk(choice(0, "tool_calls")),
    )
    assert calls_of(run(body)) == [("call_1", "f", '{"a": 1}'), ("call_2", "g", '{"b": 2}')]


def test_indices_are_a_map_not_list_positions():
    # Q17: Claude-backed OpenAI layers start at index 1; gaps are allowed.
    body = sse(
        tool_chunk(call(1, "x", "first", "")),
        tool_chunk(call(5, "y", "second", "")),
        tool_chunk(call(5, arguments='{"s": 2}')),
        tool_chunk(call(1, arguments='{"f": 1}')),
        chunk(choice(0, "tool_calls")),
    )
    result = run(body)
    assert calls_of(result) == [("x", "first", '{"f": 1}'), ("y", "second", '{"s": 2}')]
    assert [c["index"] for c in result["choices"][0]["tool_calls"]] == [1, 5]


def test_no_id_no_index_goes_to_the_only_call():
    body = sse(
        tool_chunk(call(None, "solo", "f", "")),
        tool_chunk(call(None, None, None, '{"a": 1}')),
        chunk(choice(0, "tool_calls")),
    )
    result = run(body)
    assert calls_of(result) == [("solo", "f", '{"a": 1}')]
    assert "orphan-delta" not in codes(result)


def test_no_id_no_index_with_several_calls_is_an_orphan_and_its_text_is_kept():
    body = sse(
        tool_chunk(call(None, "a", "f", "")),
        tool_chunk(call(None, "b", "g", "")),
        tool_chunk(call(None, None, None, '{"lost": ')),
        tool_chunk(call(None, None, None, "true}")),
        chunk(choice(0, "tool_calls")),
    )
    result = run(body)
    assert calls_of(result) == [("a", "f", ""), ("b", "g", "")]
    orphan = warning(result, "orphan-delta")
    assert orphan["severity"] == "warning"
    assert orphan["arguments"] == '{"lost": true}'
    assert orphan["events"] == [3, 4] and orphan["count"] == 2


def test_fragment_naming_a_call_that_does_not_exist_is_an_orphan():
    body = sse(
        tool_chunk(call(0, "a", "f", '{"a": 1}')),
        tool_chunk(call(3, arguments='{"ghost": 1}')),
        chunk(choice(0, "tool_calls")),
    )
    result = run(body)
    assert calls_of(result) == [("a", "f", '{"a": 1}')]
    orphan = warning(result, "orphan-delta")
    assert orphan["indices"] == [3] and orphan["arguments"] == '{"ghost": 1}'


def test_a_name_with_no_known_identity_starts_a_call():
    body = sse(
        tool_chunk(call(0, None, "f", '{"a": 1}')),
        tool_chunk(call(1, None, "g", '{"b": 2}')),
        tool_chunk(call(None, None, "h", "{}")),
        chunk(choice(0, "tool_calls")),
    )
    assert calls_of(run(body)) == [(None, "f", '{"a": 1}'), (None, "g", '{"b": 2}'), (None, "h", "{}")]


@pytest.mark.parametrize("placeholder", ["", "null"])
def test_placeholder_ids_are_ignored(placeholder):
    # Q4 (DashScope, LM Studio: ""), Q25 (mistralai default, Mistral-hosted GLM: "null").
    body = sse(
        tool_chunk(call(0, "call_real", "weather", "")),
        tool_chunk(call(0, placeholder, "", '{"location": ')),
        tool_chunk(call(0, placeholder, "", '"Berlin"}')),
        chunk(choice(0, "tool_calls")),
    )
    result = run(body)
    assert calls_of(result) == [("call_real", "weather", '{"location": "Berlin"}')]
    # A client whose latest id and name overwrite the call's is fooled (langchain #39335); a merger
    # that concatenates strings also glues the "null" ids onto the real one.
    expected = (
        ["last-wins-misroute"] if placeholder == "" else ["field-concat-misroute", "last-wins-misroute"]
    )
    assert codes(result) == expected


def test_placeholder_id_never_becomes_the_calls_id():
    body = sse(tool_chunk(call(0, "null", "f", "{}")), chunk(choice(0, "tool_calls")))
    assert calls_of(run(body)) == [(None, "f", "{}")]


# --- names ----------------------------------------------------------------------------------------


def test_name_prefix_replaces_and_name_pieces_append():
    body = sse(
        tool_chunk(call(0, "a", "get_", "")),
        tool_chunk(call(0, None, "get_wea", "")),  # cumulative: starts with the current name
        tool_chunk(call(0, None, "ther", "{}")),  # a piece: appended
        chunk(choice(0, "tool_calls")),
    )
    result = run(body)
    assert calls_of(result) == [("a", "get_weather", "{}")]
    split = warning(result, "name-split")
    assert split["pieces"] == ["get_wea", "ther"] and split["severity"] == "info"


# --- arguments ------------------------------------------------------------------------------------


def test_arguments_object_is_serialised_once():
    # Q11: TGI's OpenAI layer, Venice, mistralai Dict|str.
    body = sse(tool_chunk(call(0, "a", "f", {"city": "Paris", "n": 2})), chunk(choice(0, "tool_calls")))
    result = run(body)
    assert calls_of(result) == [("a", "f", '{"city":"Paris","n":2}')]
    assert result["warnings"] == []


def test_several_entries_for_one_call_in_one_chunk_apply_in_order():
    # Q16: vLLM sends a name entry and an arguments entry with the same index in one chunk.
    body = sse(
        tool_chunk(call(0, "t1", "get_weather"), call(0, arguments='{"city": "')),
        tool_chunk(call(0, arguments='Paris"}'), call(1, "t2", "get_time"), call(1, arguments="{}")),
        chunk(choice(0, "tool_calls")),
    )
    result = run(body)
    assert calls_of(result) == [("t1", "get_weather", '{"city": "Paris"}'), ("t2", "get_time", "{}")]
    assert result["warnings"] == []


def test_tool_call_in_the_finish_chunk_and_deltas_after_finish_still_count():
    # Q12 (Mistral, vLLM final flush) and Q13 (SenseNova, NVIDIA).
    body = sse(
        tool_chunk(call(0, "a", "f", '{"x": '), finish_reason=None),
        tool_chunk(call(0, arguments="1"), finish_reason="tool_calls"),
        tool_chunk(call(0, arguments="}")),
    )
    result = run(body)
    assert calls_of(result) == [("a", "f", '{"x": 1}')]
    assert result["choices"][0]["finish_reason"] == "tool_calls"


def test_invalid_final_arguments_are_reported():
    # Q9: vLLM's end-of-stream flush re-sending whole arguments.
    body = sse(
        tool_chunk(call(0, "a", "f", '{"city": "Paris"}')),
        tool_chunk(call(0, arguments='{"city": "Paris"}'), finish_reason="tool_calls"),
    )
    result = run(body)
    invalid = warning(result, "invalid-arguments")
    assert invalid["arguments"] == '{"city": "Paris"}{"city": "Paris"}' and invalid["id"] == "a"


def test_zero_argument_call_with_empty_arguments_is_valid():
    # Q15: Claude via OpenAI layers streams only arguments "".
    body = sse(tool_chunk(call(0, "a", "list_files", "")), chunk(choice(0, "tool_calls")))
    result = run(body)
    assert calls_of(result) == [("a", "list_files", "")]
    assert result["warnings"] == []


def test_deprecated_function_call_is_a_tool_call():
    body = sse(
        chunk(choice(0, function_call={"name": "legacy", "arguments": ""})),
        chunk(choice(0, function_call={"arguments": '{"a": 1}'})),
        chunk(choice(0, "function_call")),
    )
    assert calls_of(run(body)) == [(None, "legacy", '{"a": 1}')]


# --- choices, text, usage, metadata ---------------------------------------------------------------


def test_each_choice_has_its_own_call_table():
    # Q22: n > 1, both choices use tool index 0, interleaved.
    result = run((DATA / "openai_chat_n2.sse").read_bytes())
    assert calls_of(result, 0) == [("call_A0", "get_weather", '{"city":"Paris"}')]
    assert calls_of(result, 1) == [("call_B0", "get_weather", '{"city":"Lyon"}')]
    assert [c["finish_reason"] for c in result["choices"]] == ["tool_calls", "tool_calls"]
    assert result["warnings"] == []


def test_text_refusal_reasoning_and_finish_reason_per_choice():
    body = sse(
        chunk(choice(0, role="assistant", content="", refusal=None)),
        chunk(choice(0, reasoning_content="Think")),
        chunk(choice(0, reasoning="ing.")),
        chunk(choice(0, content="Hello")),
        chunk(choice(1, refusal="I can't")),
        chunk(choice(0, content=" world")),
        chunk(choice(1, refusal=" help.")),
        chunk(choice(0, "stop"), choice(1, "stop")),
    )
    result = run(body)
    first, second = result["choices"]
    assert (first["text"], first["reasoning"], first["refusal"], first["finish_reason"]) == (
        "Hello world",
        "Thinking.",
        None,
        "stop",
    )
    assert (second["text"], second["refusal"]) == (None, "I can't help.")


def test_magistral_content_parts_split_into_text_and_reasoning():
    parts = [
        {"type": "thinking", "thinking": [{"type": "text", "text": "hmm"}]},
        {"type": "text", "text": "ok"},
    ]
    result = run(sse(chunk(choice(0, content=parts)), chunk(choice(0, "stop"))))
    assert (result["choices"][0]["reasoning"], result["choices"][0]["text"]) == ("hmm", "ok")


def test_model_response_id_and_usage_from_the_empty_choices_chunk():
    result = run((DATA / "openai_chat_parallel.sse").read_bytes())
    assert result["model"] == "gpt-4.1-2025-04-14"
    assert result["response_id"] == "chatcmpl-B9xQ2pLhRz7kVw3"
    assert result["usage"]["provider"]["total_tokens"] == 134


def test_groq_usage_in_x_groq():
    body = sse(
        tool_chunk(call(0, "g1", "weather", "{}")),
        chunk(
            choice(0, "tool_calls"), x_groq={"id": "req_1", "usage": {"prompt_tokens": 5, "total_tokens": 9}}
        ),
    )
    assert run(body)["usage"]["provider"] == {"prompt_tokens": 5, "total_tokens": 9}


def test_azure_prompt_filter_chunk_is_accepted_without_complaint():
    result = run((DATA / "azure_openai_chat_parallel.sse").read_bytes())
    assert result["warnings"] == []
    assert result["model"] == "gpt-4.1-2025-04-14" and result["response_id"] == "chatcmpl-AzX81"
    assert [c[0] for c in calls_of(result)] == ["call_az_1", "call_az_2"]


# --- errors and the end of the stream -------------------------------------------------------------


def test_error_object_mid_stream():
    body = sse(
        tool_chunk(call(0, "a", "f", '{"x": ')),
        {"error": {"message": "upstream overloaded", "code": 502}},
    )
    result = run(body)
    error = warning(result, "provider-error")
    assert "upstream overloaded" in error["message"] and error["event"] == 2
    assert result["complete"] is False
    assert result["error"] == {"message": "upstream overloaded", "code": 502}


def test_openrouter_error_with_finish_reason_error():
    body = sse(
        chunk(choice(0, content="partial")),
        chunk(choice(0, "error"), error={"message": "Provider returned error", "code": 500}),
    )
    result = run(body)
    assert result["complete"] is False and "provider-error" in codes(result)
    assert result["choices"][0]["finish_reason"] == "error"


def test_stream_cut_before_done_and_before_finish_is_truncated():
    body = sse(tool_chunk(call(0, "a", "f", '{"x": 1')), done=False)
    result = run(body)
    assert result["complete"] is False
    assert warning(result, "truncated-stream")["unfinished_choices"] == [0]
    assert "invalid-arguments" in codes(result)


def test_missing_done_but_every_choice_finished_is_complete():
    body = sse(tool_chunk(call(0, "a", "f", "{}")), chunk(choice(0, "tool_calls")), done=False)
    result = run(body)
    assert result["complete"] is True and result["warnings"] == []


def test_empty_body_is_truncated():
    result = run(b"")
    assert result["complete"] is False and codes(result) == ["truncated-stream"]


def test_malformed_event_is_reported_and_the_stream_goes_on():
    body = sse(
        tool_chunk(call(0, "a", "f", '{"x": ')),
        b'{"choices": [ this is not json',
        b"[1, 2]",
        tool_chunk(call(0, arguments="1}")),
        chunk(choice(0, "tool_calls")),
    )
    result = run(body)
    assert calls_of(result) == [("a", "f", '{"x": 1}')]
    malformed = [w for w in result["warnings"] if w["code"] == "malformed-event"]
    assert [w["event"] for w in malformed] == [2, 3]
    assert result["complete"] is True


def test_invalid_utf8_becomes_replacement_characters_and_a_warning():
    body = sse(
        b'{"choices":[{"index":0,"delta":{"content":"caf\xe9 \xff"},"finish_reason":null}]}',
        chunk(choice(0, "stop")),
    )
    result = run(body)
    assert result["choices"][0]["text"] == "caf\ufffd \ufffd"
    assert warning(result, "invalid-utf8")["event"] == 1


def test_oversized_event_is_dropped_with_a_warning():
    big = tool_chunk(call(0, arguments="x" * 5000))
    body = sse(
        tool_chunk(call(0, "a", "f", "{")), big, tool_chunk(call(0, arguments="}")), chunk(choice(0, "stop"))
    )
    result = run(body, max_event_bytes=2000)
    assert calls_of(result) == [("a", "f", "{}")]
    assert warning(result, "oversized-event")["after_event"] == 1


def test_warnings_per_code_are_capped_and_counted():
    body = sse(*[b"nope"] * 30, chunk(choice(0, "stop")))
    result = run(body)
    assert codes(result).count("malformed-event") == 20
    assert result["stats"]["warnings_suppressed"] == 10


# --- declared tools -------------------------------------------------------------------------------


def test_undeclared_tool_against_the_request():
    request = json.loads((DATA / "production_request.json").read_text())
    body = sse(
        tool_chunk(call(0, "a", "search_circulars", "{}")),
        tool_chunk(call(1, "b", "delete_everything", "{}")),
        chunk(choice(0, "tool_calls")),
    )
    result = run(body, request=request)
    undeclared = [w for w in result["warnings"] if w["code"] == "undeclared-tool"]
    assert [(w["name"], w["id"]) for w in undeclared] == [("delete_everything", "b")]
    # The request may also be given as raw bytes; without a request nothing is checked.
    assert codes(run(body, request=json.dumps(request).encode())) == codes(result)
    assert "undeclared-tool" not in codes(run(body))
    # A request that declares no tools at all says nothing about them; an empty list declares none.
    assert "undeclared-tool" not in codes(run(body, request={"model": "m", "messages": []}))
    assert codes(run(body, request={"tools": []})).count("undeclared-tool") == 2


def test_merged_name_is_undeclared():
    # What the production incident's gateway would have echoed: a name no tool has.
    request = {"tools": [{"type": "function", "function": {"name": "search_circular"}}]}
    body = sse(
        tool_chunk(call(0, "a", "search_circularsearch_circular", "{}")), chunk(choice(0, "tool_calls"))
    )
    assert "undeclared-tool" in codes(run(body, request=request))


# --- sans-IO --------------------------------------------------------------------------------------


def test_finish_is_idempotent_and_feeding_in_pieces_equals_whole():
    body = (DATA / "production_interleaved.sse").read_bytes()
    accumulator = StreamAccumulator("openai-chat")
    for i in range(0, len(body), 3):
        accumulator.feed(body[i : i + 3])
    first = accumulator.finish()
    assert accumulator.finish() is first
    assert first == run(body)


def test_unknown_format_and_strategy_are_refused():
    with pytest.raises(ValueError):
        StreamAccumulator("nope")
    with pytest.raises(ValueError):
        StreamAccumulator("openai-chat", strategies=("nope",))
