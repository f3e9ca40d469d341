"""accumulator.relay: a response a gateway relayed, paired with the one it got from its provider when both
passed through the same proxy, and what the gateway changed (``gateway-altered``)."""

from __future__ import annotations

import copy
import json

import fake_provider
import pytest
from schemas import check_result

from accumulator import analyze
from accumulator.relay import Relays

SENT = analyze(fake_provider.body("openai-chat", "sequential"))  # call_w1 get_weather, call_t1 get_time
PROVIDER, GATEWAY = "api.provider.test:443", "127.0.0.1:4000"


def relayed(
    got: dict, *, server: str = PROVIDER, started: float = 10.5, ended: float = 11.0, size=None
) -> dict:
    """The provider's response (SENT) seen first, then ``got`` as the gateway's client got it, its request
    sent at 10.0 and its response ended at 12.0; ``got`` as it is then."""
    relays = Relays() if size is None else Relays(size)
    relays.check(copy.deepcopy(SENT), "provider-flow", server, started, ended)
    got = copy.deepcopy(got)
    relays.check(got, "client-flow", GATEWAY, 10.0, 12.0)
    return got


def calls(result: dict) -> list[dict]:
    return result["choices"][0]["tool_calls"]


def altered(result: dict) -> list[dict]:
    return [w for w in result["warnings"] if w["code"] == "gateway-altered"]


def test_a_faithful_relay_names_its_source_and_says_nothing_more():
    got = relayed(SENT)
    assert got["relayed_from"] == {"flow_id": "provider-flow", "calls_same": True}
    assert not altered(got)
    check_result(got)


def test_arguments_written_again_by_the_gateway_are_the_same_arguments():
    got = copy.deepcopy(SENT)
    for call in calls(got):  # spacing and key order of the gateway's own serialiser
        call["arguments"] = json.dumps(json.loads(call["arguments"]), separators=(",", ":"))
    assert relayed(got)["relayed_from"]["calls_same"] is True


def test_spliced_arguments_are_gateway_altered_with_what_the_provider_sent():
    got = copy.deepcopy(SENT)
    # The recency rule's build of two interleaved calls: the first empty, the second spliced.
    calls(got)[0]["arguments"] = ""
    calls(got)[1]["arguments"] = '{"ci{"tz": ty": "Pa"Europe/ris"}Paris"}'
    got = relayed(got)
    assert got["relayed_from"] == {"flow_id": "provider-flow", "calls_same": False}
    [warning] = altered(got)
    assert warning["severity"] == "warning" and warning["relayed_from"] == "provider-flow"
    assert warning["sent"] == [
        {"id": c["id"], "name": c["name"], "arguments": c["arguments"]} for c in calls(SENT)
    ]
    message = warning["message"]
    assert "in flow provider-flow" in message
    assert 'call call_w1 (get_weather) has arguments \'\', sent as {"city": "Paris"}' in message
    assert 'call call_t1 (get_time) has arguments {"ci{"tz": ty": "Pa"Europe/ris"}Paris"}' in message
    check_result(got)


def test_an_empty_text_is_the_empty_object():
    sent = copy.deepcopy(SENT)
    calls(sent)[0]["arguments"] = ""
    relays = Relays()
    relays.check(sent, "provider-flow", PROVIDER, 10.5, 11.0)
    got = copy.deepcopy(sent)
    calls(got)[0]["arguments"] = "{}"
    relays.check(got, "client-flow", GATEWAY, 10.0, 12.0)
    assert got["relayed_from"]["calls_same"] is True


def test_a_renamed_a_dropped_and_an_added_call_are_each_said():
    got = copy.deepcopy(SENT)
    calls(got)[0]["name"] = "get_w"
    extra = copy.deepcopy(calls(got)[0]) | {"id": "1c421a8a", "name": "eather"}
    del calls(got)[1]
    calls(got).append(extra)
    message = altered(relayed(got))[0]["message"]
    assert "call call_w1 is named 'get_w', sent as 'get_weather'" in message
    assert "call call_t1 (get_time) was dropped" in message
    assert "1 call(s) the provider did not send: 1c421a8a (eather)" in message


@pytest.mark.parametrize(
    ("server", "started", "ended"),
    [
        (GATEWAY, 10.5, 11.0),  # the same server: two responses of one provider, not a relay
        (PROVIDER, 9.5, 11.0),  # its request went out before the client's: it cannot be relayed from it
        (PROVIDER, 10.5, 12.5),  # it ended after the client's response: not what the gateway handed on
    ],
    ids=["same-server", "sent-before", "ended-after"],
)
def test_a_response_outside_the_clients_time_or_of_the_same_server_is_no_source(server, started, ended):
    got = copy.deepcopy(SENT)
    calls(got)[1]["arguments"] = "{}"
    got = relayed(got, server=server, started=started, ended=ended)
    assert "relayed_from" not in got and not altered(got)


def test_no_shared_id_no_id_and_no_time_are_no_pairing():
    other = copy.deepcopy(SENT)
    for n, call in enumerate(calls(other)):
        call["id"] = f"gateway_{n}"
    assert "relayed_from" not in relayed(other)
    anonymous = copy.deepcopy(SENT)
    for call in calls(anonymous):
        call["id"] = None
    assert "relayed_from" not in relayed(anonymous)
    relays = Relays()
    relays.check(copy.deepcopy(SENT), "provider-flow", PROVIDER, None, 11.0)
    assert len(relays) == 0  # a response whose time is not known is not remembered
    got = copy.deepcopy(SENT)
    relays.check(got, "client-flow", GATEWAY, 10.0, 12.0)
    assert "relayed_from" not in got


def test_a_gateway_behind_a_gateway_pairs_each_side_with_the_one_it_relayed():
    relays = Relays()
    first, second, third = (copy.deepcopy(SENT) for _ in range(3))
    relays.check(first, "provider-flow", PROVIDER, 10.5, 11.0)
    relays.check(second, "inner-gateway-flow", "127.0.0.1:4001", 10.2, 11.5)
    relays.check(third, "client-flow", GATEWAY, 10.0, 12.0)
    assert second["relayed_from"]["flow_id"] == "provider-flow"
    assert third["relayed_from"]["flow_id"] == "inner-gateway-flow"


def test_the_source_is_the_response_sharing_the_most_ids():
    relays = Relays()
    one = copy.deepcopy(SENT)
    del calls(one)[1]
    relays.check(one, "one-call", PROVIDER, 10.5, 11.0)
    relays.check(copy.deepcopy(SENT), "both-calls", "other.provider.test:443", 10.6, 11.1)
    got = copy.deepcopy(SENT)
    relays.check(got, "client-flow", GATEWAY, 10.0, 12.0)
    assert got["relayed_from"]["flow_id"] == "both-calls"


def test_the_ids_remembered_are_bounded():
    relays = Relays(size=3)
    for n in range(5):
        result = copy.deepcopy(SENT)
        for call in calls(result):
            call["id"] = f"{call['id']}-{n}"
        relays.check(result, f"flow-{n}", PROVIDER, float(n), n + 0.5)
    assert len(relays) == 3


def test_arguments_cut_at_the_cap_on_either_side_are_not_compared():
    got = copy.deepcopy(SENT)
    calls(got)[0]["arguments"], calls(got)[0]["arguments_truncated"] = '{"ci', True
    got = relayed(got)
    assert got["relayed_from"]["calls_same"] is True
    sent = copy.deepcopy(SENT)
    calls(sent)[1]["arguments"], calls(sent)[1]["arguments_truncated"] = '{"t', True
    relays = Relays()
    relays.check(sent, "provider-flow", PROVIDER, 10.5, 11.0)
    renamed = copy.deepcopy(SENT)
    calls(renamed)[1]["name"] = "get_w"
    relays.check(renamed, "client-flow", GATEWAY, 10.0, 12.0)
    [warning] = altered(renamed)  # a name is still compared
    assert "call call_t1 is named 'get_w', sent as 'get_time'" in warning["message"]
    assert warning["sent"][1]["arguments"] is None
