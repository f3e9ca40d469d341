"""Credentials out of a stored request, read off its header fields in one pass (toolcall_lens/redact.py):
each masked where it stands, every other field kept byte for byte."""

from __future__ import annotations

from mitmproxy.test import tflow

from toolcall_lens.redact import REDACTED, mask, redact_credentials


def _flow(*fields: tuple[bytes, bytes]):
    flow = tflow.tflow()
    flow.request.headers.fields = fields
    return flow


def test_each_credential_field_is_masked_where_it_stands_and_the_others_are_kept_as_they_were():
    flow = _flow(
        (b"Host", b"api.openai.com"),
        (b"Authorization", b"Bearer sk-AAAAAAAAAAAAAAAAAAAA"),
        (b"X-Custom", b"\xff\xfe raw bytes"),
        (b"authorization", b"Bearer sk-BBBBBBBBBBBBBBBBBBBB"),
        (b"X-API-KEY", b"sk-ant-CCCCCCCCCCCCCCCC"),
        (b"x-api-key-hint", b"sk-not-a-credential-header"),
    )
    redact_credentials(flow)
    fields = flow.request.headers.fields
    assert [name for name, _ in fields] == [
        b"Host",
        b"Authorization",
        b"X-Custom",
        b"authorization",
        b"X-API-KEY",
        b"x-api-key-hint",
    ]
    assert fields[1][1] == mask("Bearer sk-AAAAAAAAAAAAAAAAAAAA").encode()
    assert fields[3][1] == mask("Bearer sk-BBBBBBBBBBBBBBBBBBBB").encode()
    assert fields[4][1] == mask("sk-ant-CCCCCCCCCCCCCCCC").encode()
    for i, secret in ((1, b"AAAA"), (3, b"BBBB"), (4, b"CCCC")):
        assert fields[i][1].endswith(REDACTED.encode()) and secret not in fields[i][1]
    assert fields[0][1] == b"api.openai.com" and fields[2][1] == b"\xff\xfe raw bytes"
    assert fields[5][1] == b"sk-not-a-credential-header"
    # As mitmproxy's own Headers read them back.
    assert flow.request.headers.get_all("authorization") == [
        mask("Bearer sk-AAAAAAAAAAAAAAAAAAAA"),
        mask("Bearer sk-BBBBBBBBBBBBBBBBBBBB"),
    ]


def test_a_key_that_is_not_utf8_is_masked_and_stays_readable_as_mitmproxy_reads_headers():
    flow = _flow((b"x-goog-api-key", b"AIza\xff\xfeDDDDDDDDDDDDDDDDDD"))
    redact_credentials(flow)
    ((_, value),) = flow.request.headers.fields
    assert b"DDDD" not in value and value.endswith(REDACTED.encode())
    assert flow.request.headers["x-goog-api-key"].endswith(REDACTED)


def test_every_subprotocol_list_is_rewritten_when_one_carries_a_key():
    flow = _flow(
        (b"Sec-WebSocket-Protocol", b"realtime,openai-insecure-api-key.sk-EEEEEEEEEEEEEEEE"),
        (b"sec-websocket-protocol", b"openai-beta.realtime-v1"),
    )
    redact_credentials(flow)
    assert flow.request.headers.fields == (
        (b"Sec-WebSocket-Protocol", b"realtime, openai-insecure-api-key.sk-E" + REDACTED.encode()),
        (b"sec-websocket-protocol", b"openai-beta.realtime-v1"),
    )


def test_a_request_without_credentials_keeps_its_fields_untouched():
    fields = (
        (b"Host", b"api.openai.com"),
        (b"Sec-WebSocket-Protocol", b"realtime"),
        (b"Content-Type", b"a/b"),
    )
    flow = _flow(*fields)
    redact_credentials(flow)
    assert flow.request.headers.fields == fields


def test_a_value_masked_before_is_left_as_it_is():
    masked = b"Bearer sk-AAA" + REDACTED.encode()
    fields = ((b"authorization", masked),)
    flow = _flow(*fields)
    redact_credentials(flow)
    assert flow.request.headers.fields == fields


def test_what_was_masked_is_returned_and_put_back_field_by_field_where_the_mask_still_stands():
    from toolcall_lens.redact import restore_credentials

    flow = _flow(
        (b"Authorization", b"Bearer sk-AAAAAAAAAAAAAAAAAAAA"),
        (b"X-Other", b"kept"),
        (b"authorization", b"Bearer sk-BBBBBBBBBBBBBBBBBBBB"),
        (b"x-api-key", b"sk-ant-CCCCCCCCCCCCCCCC"),
    )
    flow.request.url = "https://example.com/v1/models?alt=sse&key=AIzaSyDDDDDDDDDDDD"
    masked = redact_credentials(flow)
    assert [name for name, _, _ in masked.fields] == [b"authorization", b"authorization", b"x-api-key"]
    assert masked.query == (("key", mask("AIzaSyDDDDDDDDDDDD"), "AIzaSyDDDDDDDDDDDD"),)
    assert redact_credentials(flow) is None  # nothing left to mask
    # One field removed, one edited, one moved: each put back only where its own mask still stands.
    fields = flow.request.headers.fields
    flow.request.headers.fields = (fields[2], (b"X-Other", b"kept"), (b"X-API-Key", b"sk-mine"))
    restore_credentials(flow, masked)
    assert flow.request.headers.fields == (
        (b"authorization", b"Bearer sk-BBBBBBBBBBBBBBBBBBBB"),
        (b"X-Other", b"kept"),
        (b"X-API-Key", b"sk-mine"),
    )
    assert flow.request.query["key"] == "AIzaSyDDDDDDDDDDDD" and flow.request.query["alt"] == "sse"
