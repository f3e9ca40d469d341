"""Agent sessions (``accumulator.sessions``): how a response joins its session (a session header, the
WebSocket connection, ``previous_response_id``, the conversation its request carries), its turn, loops,
calls never answered, and the text a person reads. Real Chat streams and requests, the echo check's
evidence as the addon computes it."""

from __future__ import annotations

import gc

import orjson
from chat_flows import chat_stream, follow_up
from hypothesis import given, settings
from hypothesis import strategies as st
from schemas import check_result

from accumulator import analyze
from accumulator.echo import ObservedCalls, add_evidence, tool_results
from accumulator.sessions import Sessions, _short, context_chart, format_session


class Agent:
    """The addon's steps for one flow: the request's echoes checked, the response placed, its calls kept."""

    def __init__(self, sessions: Sessions | None = None) -> None:
        self.sessions = sessions if sessions is not None else Sessions()
        self.observed = ObservedCalls()
        self.flows = 0

    def turn(self, stream: bytes, request: dict | None = None, headers: dict | None = None, **extra) -> dict:
        self.flows += 1
        flow_id = f"flow-{self.flows}"
        result = analyze(stream, "openai-chat", request=request)
        if request is not None:
            add_evidence(result, *self.observed.examine(request, "openai-chat"))
        self.sessions.place(
            result,
            flow_id,
            headers=headers,
            tool_results=tool_results(request, "openai-chat") if request else [],
            time=1_700_000_000.0 + self.flows,
            **extra,
        )
        self.observed.record(result, flow_id)
        check_result(result)
        return result


SEARCH = ("call_1", "search", '{"q": "rbi"}')
PROFILE = ("call_2", "get_user", '{"id": 7}')


def test_the_conversation_a_request_carries_joins_the_earlier_turns_session():
    agent = Agent()
    first = agent.turn(chat_stream([SEARCH, PROFILE]))
    second = agent.turn(chat_stream([]), follow_up([[SEARCH, PROFILE]]))
    assert first["session"]["by"] == "new" and first["session"]["turn"] == 1
    assert second["session"]["id"] == first["session"]["id"] == "flow-1"
    assert second["session"]["turn"] == 2 and second["session"]["by"] == "the conversation of flow flow-1"
    assert [r["id"] for r in second["session"]["tool_results"]] == ["call_1", "call_2"]


def test_two_agents_interleaved_through_one_proxy_stay_two_sessions():
    agent = Agent()
    a1 = agent.turn(chat_stream([SEARCH]))
    b1 = agent.turn(chat_stream([("call_9", "search", '{"q": "other"}')]))
    a2 = agent.turn(chat_stream([PROFILE]), follow_up([[SEARCH]]))
    b2 = agent.turn(chat_stream([]), follow_up([[("call_9", "search", '{"q": "other"}')]]))
    a3 = agent.turn(chat_stream([]), follow_up([[SEARCH], [PROFILE]]))
    assert a1["session"]["id"] != b1["session"]["id"]
    assert [r["session"]["id"] for r in (a1, a2, a3)] == [a1["session"]["id"]] * 3
    assert [r["session"]["turn"] for r in (a1, a2, a3)] == [1, 2, 3]
    assert [r["session"]["id"] for r in (b1, b2)] == [b1["session"]["id"]] * 2
    assert [r["session"]["turn"] for r in (b1, b2)] == [1, 2]
    assert len(agent.sessions) == 2


def test_a_session_header_wins_and_names_the_session():
    agent = Agent()
    headers = {"x-claude-code-session-id": "a32b0612"}
    first = agent.turn(chat_stream([SEARCH]), headers=headers)
    # A request of another conversation with the same header: the agent says it is the same run.
    second = agent.turn(chat_stream([]), headers=headers)
    other = agent.turn(chat_stream([]), headers={"x-session-id": "ses_1"})
    codex = agent.turn(chat_stream([]), headers={"session-id": "01a24311"})
    assert (first["session"]["id"], first["session"]["by"]) == ("a32b0612", "header x-claude-code-session-id")
    assert second["session"]["id"] == "a32b0612" and second["session"]["turn"] == 2
    assert (other["session"]["id"], other["session"]["by"]) == ("ses_1", "header x-session-id")
    assert (codex["session"]["id"], codex["session"]["by"]) == ("01a24311", "header session-id")
    assert agent.turn(chat_stream([]), headers={"session-id": "  "})["session"]["by"] == "new"


def test_previous_response_id_joins_the_session_of_that_response():
    sessions = Sessions()
    first = {**analyze(chat_stream([SEARCH])), "response_id": "resp_1"}
    sessions.place(first, "f1")
    second = analyze(chat_stream([]))
    sessions.place(second, "f2", previous_response_id="resp_1")
    third = analyze(chat_stream([]))
    sessions.place(third, "f3", previous_response_id="resp_unknown")
    assert (second["session"]["id"], second["session"]["by"], second["session"]["turn"]) == (
        "f1",
        "previous_response_id",
        2,
    )
    assert third["session"]["id"] == "f3" and third["session"]["by"] == "new"


def test_the_responses_of_one_websocket_connection_are_one_session():
    sessions = Sessions()
    results = [analyze(chat_stream([])) for _ in range(3)]
    for result in results:
        sessions.place(result, "ws-flow", connection=True)
    assert [r["session"]["turn"] for r in results] == [1, 2, 3]
    assert [r["session"]["by"] for r in results] == ["websocket connection"] * 3
    assert {r["session"]["id"] for r in results} == {"ws-flow"}


def test_the_same_call_made_loop_after_times_is_a_loop_and_spacing_does_not_hide_it():
    agent = Agent(Sessions(loop_after=3))
    headers = {"session-id": "s"}
    looping = [("c1", "read_file", '{"path": "a.py", "n": 1}'), ("c2", "read_file", '{"n":1,"path":"a.py"}')]
    first = agent.turn(chat_stream([looping[0]]), headers=headers)
    second = agent.turn(chat_stream([looping[1]]), headers=headers)
    # Another call between them (other arguments) is no repeat of it.
    agent.turn(chat_stream([("c3", "read_file", '{"path": "b.py", "n": 1}')]), headers=headers)
    third = agent.turn(chat_stream([("c4", "read_file", '{"path":"a.py","n":1}')]), headers=headers)
    fourth = agent.turn(chat_stream([("c5", "read_file", '{"path":"a.py","n":1}')]), headers=headers)
    assert not [w for r in (first, second) for w in r["warnings"] if w["code"] == "tool-call-loop"]
    (loop,) = [w for w in third["warnings"] if w["code"] == "tool-call-loop"]
    assert (loop["severity"], loop["name"], loop["times"], loop["turns"]) == (
        "warning",
        "read_file",
        3,
        [1, 2, 4],
    )
    assert [w["times"] for w in fourth["warnings"] if w["code"] == "tool-call-loop"] == [4]
    record = agent.sessions.record(agent.sessions.get("s"))
    assert [(loop["name"], loop["times"]) for loop in record["loops"]] == [("read_file", 4)]
    assert "LOOP: read_file" in format_session(record)


def test_the_loop_threshold_is_the_registrys():
    agent = Agent(Sessions(loop_after=2))
    headers = {"session-id": "s"}
    agent.turn(chat_stream([SEARCH]), headers=headers)
    second = agent.turn(chat_stream([("call_8", *SEARCH[1:])]), headers=headers)
    assert [w["times"] for w in second["warnings"] if w["code"] == "tool-call-loop"] == [2]


def test_a_call_made_again_and_again_keeps_its_count_and_last_ten_turns_and_nothing_the_collector_follows():
    # A session keeps, per distinct call, how often it was made and its last ten turns (all a loop warning
    # and the session's record name): bounded however long the loop, and tuples of numbers only, which
    # the collector stops following (a list a call was an object each call kept alive in the proxy).
    agent = Agent(Sessions(loop_after=3))
    headers = {"session-id": "s"}
    for n in range(25):
        last = agent.turn(chat_stream([(f"c{n}", "read_file", '{"path": "a.py"}')]), headers=headers)
    (loop,) = [w for w in last["warnings"] if w["code"] == "tool-call-loop"]
    assert (loop["times"], loop["turns"]) == (25, list(range(16, 26)))
    assert "made 25 times in this session (turns 16, 17, 18, 19, 20, 21, 22, 23, 24, 25)" in loop["message"]
    check_result(last)
    session = agent.sessions.get("s")
    ((times, turns),) = session.calls.values()
    assert (times, turns) == (25, tuple(range(16, 26)))
    gc.collect()
    gc.collect()
    assert not gc.is_tracked(session.calls)
    record = agent.sessions.record(session)
    assert [(loop["times"], loop["turns"]) for loop in record["loops"]] == [(25, list(range(16, 26)))]


def test_what_the_next_turn_sent_back_and_a_call_never_answered():
    agent = Agent()
    agent.turn(chat_stream([SEARCH, PROFILE]))
    # The next turn answers the search (with 12 bytes) and leaves the profile out.
    agent.turn(chat_stream([]), follow_up([[SEARCH, PROFILE]], answers={"call_1": "found 3 docs"}))
    record = agent.sessions.record(agent.sessions.get("flow-1"))
    search, profile = record["turns"][0]["calls"]
    assert search["answered"] is True and search["result"] == {
        "id": "call_1",
        "size": 12,
        "error": None,
        "turn": 2,
    }
    assert profile["answered"] is False and profile["result"] is None
    assert record["unanswered"] == [{"turn": 1, "id": "call_2", "name": "get_user"}]
    text = format_session(record)
    assert "search(" in text and "result 12 B sent (turn 2)" in text
    assert "NEVER ANSWERED: get_user (id call_2) of turn 1" in text


def test_a_call_of_the_last_turn_is_not_yet_unanswered():
    agent = Agent()
    agent.turn(chat_stream([SEARCH]))
    record = agent.sessions.record(agent.sessions.get("flow-1"))
    assert record["turns"][0]["calls"][0]["answered"] is None and record["unanswered"] == []
    assert "not answered yet" in format_session(record)


def test_a_websocket_response_takes_the_connections_evidence():
    sessions = Sessions()
    result = analyze(chat_stream([SEARCH, PROFILE]))
    result["websocket"] = {
        "position": 1,
        "prewarm": False,
        "evidence": {"answered": ["call_1"], "unanswered": ["call_2"], "cancelled": []},
    }
    sessions.place(result, "ws", connection=True)
    calls = sessions.record(sessions.get("ws"))["turns"][0]["calls"]
    assert [c["answered"] for c in calls] == [True, False]


def test_gemini_calls_without_ids_are_answered_by_name_in_the_next_turn():
    sessions = Sessions()
    first = analyze(
        b'data: {"candidates": [{"content": {"parts": [{"functionCall": {"name": "read_file", "args": {"p": 1}}},'
        b' {"functionCall": {"name": "shell", "args": {}}}]}, "finishReason": "STOP"}]}\n\n',
        "gemini",
    )
    sessions.place(first, "g1", headers={"session-id": "g"})
    request = {
        "contents": [
            {"role": "model", "parts": [{"functionCall": {"name": "read_file", "args": {"p": 1}}}]},
            {
                "role": "user",
                "parts": [{"functionResponse": {"name": "read_file", "response": {"error": "no such file"}}}],
            },
        ]
    }
    second = analyze(
        b'data: {"candidates": [{"content": {"parts": [{"text": "ok"}]}, "finishReason": "STOP"}]}\n\n',
        "gemini",
    )
    sessions.place(second, "g2", headers={"session-id": "g"}, tool_results=tool_results(request, "gemini"))
    assert second["session"]["tool_results"] == [{"id": None, "size": 24, "error": True, "name": "read_file"}]
    read, shell = sessions.record(sessions.get("g"))["turns"][0]["calls"]
    assert read["answered"] is True and read["result"]["error"] is True
    assert shell["answered"] is False
    assert "ERROR" in format_session(sessions.record(sessions.get("g")))


def test_ollama_calls_echoed_without_ids_join_the_session_and_are_answered_by_tool_name():
    # Ollama streams each call with an id; its libraries echo the calls without and answer each by its
    # tool's name (tool_name): the next turn is the same conversation, and the call it answered is.
    def line(message: dict, done: bool = False) -> bytes:
        return orjson.dumps({"model": "qwen3:8b", "message": {"role": "assistant", "content": "", **message}, "done": done}) + b"\n"  # fmt: skip

    calls = [("call_w", "get_weather", {"city": "Paris"}), ("call_t", "get_time", {"tz": "Europe/Paris"})]
    stream = b"".join(
        line({"tool_calls": [{"id": i, "function": {"index": n, "name": name, "arguments": args}}]})
        for n, (i, name, args) in enumerate(calls)
    ) + line({}, done=True)
    request = {
        "model": "qwen3:8b",
        "messages": [
            {"role": "user", "content": "weather and time"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"name": n, "arguments": a}} for _, n, a in calls],
            },
            {"role": "tool", "content": "18 C", "tool_name": "get_weather"},
        ],
    }
    sessions, observed = Sessions(), ObservedCalls()
    first = analyze(stream, "ollama-chat")
    sessions.place(first, "o1")
    observed.record(first, "o1")
    second = analyze(line({}, done=True), "ollama-chat")
    add_evidence(second, *observed.examine(request, "ollama-chat"))
    sessions.place(second, "o2", tool_results=tool_results(request, "ollama-chat"))
    assert (second["session"]["id"], second["session"]["by"]) == ("o1", "the conversation of flow o1")
    assert second["session"]["tool_results"] == [
        {"id": None, "size": 4, "error": None, "name": "get_weather"}
    ]
    weather, time = sessions.record(sessions.get("o1"))["turns"][0]["calls"]
    assert weather["answered"] is True and weather["result"]["turn"] == 2
    # The time was echoed and never answered: a result of that name, not of the other.
    assert time["answered"] is False
    assert [w["code"] for w in second["warnings"]] == []


def test_tool_results_read_from_every_request_shape_with_size_and_failure():
    anthropic = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "x" * 5, "is_error": True}
                ],
            }
        ]
    }
    bedrock = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"toolResult": {"toolUseId": "t1", "content": [{"text": "ok"}], "status": "error"}}
                ],
            }
        ]
    }
    responses = {"input": [{"type": "function_call_output", "call_id": "call_7", "output": "héllo"}]}
    assert tool_results(anthropic, "anthropic-messages") == [{"id": "toolu_1", "size": 5, "error": True}]
    assert tool_results(bedrock, "bedrock-converse") == [{"id": "t1", "size": 15, "error": True}]
    assert tool_results(responses, "openai-responses") == [{"id": "call_7", "size": 6, "error": None}]
    assert tool_results(b"not json") == [] and tool_results(None) == []


def test_the_session_view_totals_costs_per_response_and_charts_the_context():
    sessions = Sessions()
    costs = [0.5, None, 0.25]
    for n, (cost, tokens) in enumerate(zip(costs, (100, 400, 800), strict=True)):
        result = analyze(
            chat_stream(
                [], usage={"prompt_tokens": tokens, "completion_tokens": 10, "total_tokens": tokens + 10}
            )
        )
        result["cost"] = None if cost is None else {"total": cost}
        sessions.place(result, f"f{n}", headers={"session-id": "s"}, time=0.0)
    record = sessions.record(sessions.get("s"))
    assert record["totals"]["cost"] == 0.75 and record["totals"]["unpriced_turns"] == 1
    assert (record["totals"]["input"], record["totals"]["output"]) == (1300, 30)
    assert (
        context_chart([100, 400, 800]) == "▂▅█"
        and context_chart([None, 5]) == " █"
        and context_chart([]) == ""
    )
    text = format_session(record)
    assert "context (input tokens per turn): ▂▅█" in text and "1 turn(s) unpriced" in text


def test_a_flow_with_bad_usage_leaves_the_session_view_whole():
    sessions = Sessions()
    bad = analyze(chat_stream([], usage={"prompt_tokens": "many", "completion_tokens": -1}))
    sessions.place(bad, "f1", headers={"session-id": "s"})
    sessions.place(analyze(chat_stream([SEARCH])), "f2", headers={"session-id": "s"})
    text = format_session(sessions.record(sessions.get("s")))
    assert "turn 1" in text and "tokens: unknown" in text and "turn 2" in text


def test_the_registry_is_bounded():
    sessions = Sessions(max_sessions=3, max_turns=2)
    for n in range(5):
        sessions.place(analyze(chat_stream([])), f"f{n}")
    assert len(sessions) == 3 and sessions.get("f0") is None and sessions.get("f4") is not None
    for n in range(4):
        sessions.place(analyze(chat_stream([])), f"g{n}", headers={"session-id": "long"})
    record = sessions.record(sessions.get("long"))
    assert [t["turn"] for t in record["turns"]] == [3, 4] and record["turns_dropped"] == 2


def _tracked_from(root) -> int:
    """How many objects the garbage collector follows, reachable from ``root`` (itself included; classes,
    which every object reaches, left out)."""
    seen, todo = set(), [root]
    while todo:
        obj = todo.pop()
        if id(obj) in seen or not gc.is_tracked(obj) or isinstance(obj, type):
            continue
        seen.add(id(obj))
        todo.extend(gc.get_referents(obj))
    return len(seen)


def test_a_sessions_turns_are_kept_where_the_garbage_collector_does_not_walk():
    # A proxy keeps a thousand sessions of up to a thousand turns. Held as dicts and lists (four objects
    # the collector follows a turn of two calls, 805 here), every full collection of the proxy walked them
    # all. Each turn is JSON bytes now; the session's record reads them back whole.
    agent = Agent()
    for n in range(200):
        agent.turn(chat_stream([SEARCH, PROFILE]), headers={"session-id": "long"})
    session = agent.sessions.get("long")
    gc.collect()  # tuples of strings are untracked by a collection, as in a running proxy
    assert _tracked_from(session) < 20  # the session, its lists and its two calls' turn counts
    record = agent.sessions.record(session)
    assert [t["turn"] for t in record["turns"]] == list(range(1, 201))
    assert record["turns"][-1]["calls"] == [
        {"id": "call_1", "name": "search", "arguments": '{"q": "rbi"}', "answered": None, "result": None},
        {"id": "call_2", "name": "get_user", "arguments": '{"id": 7}', "answered": None, "result": None},
    ]
    assert record["turns"][0]["time"] == 1_700_000_001.0 and record["loops"][0]["times"] == 200


@settings(max_examples=400, deadline=None)
@given(
    # Whitespace runs long enough that a head of twice the cut can be too short once made one line.
    st.lists(st.sampled_from(["a", "bc", "{", '"', ":", " ", "\n\t", " " * 40, "\u00e9"]), max_size=300).map(
        "".join
    ),
    st.integers(min_value=4, max_value=120),
)
def test_a_calls_short_form_reads_a_head_of_its_arguments_and_is_the_whole_ones_one_line_form_cut(
    text, limit
):
    # The turn's view shows each call's arguments on one line, cut: only as much of the text is read as the
    # cut needs (a MiB of arguments is not split whole for a line of 80 characters), with the same answer.
    whole = " ".join(text.split())
    expected = whole if len(whole) <= limit else whole[: limit - 3] + "..."
    assert _short(text, limit) == expected
