"""The CLI on HAR files (a browser's DevTools, Playwright, Charles, Proxyman, Fiddler, mitmproxy's own
``hardump``): every LLM exchange in them read as a dump's flow is, each entry on its own. The HARs here are
written as Chrome writes them (HTTP/2 pseudo-headers, the body as decoded text or base64, ``timings`` in
milliseconds, a WebSocket's messages in ``_webSocketMessages``); tests/live/test_har.py reads the HARs
real producers wrote."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from urllib.parse import urlsplit

import fake_provider
import pytest
from chat_flows import chat_stream, follow_up
from schemas import check_result
from streams import DATA
from websocket_turns import response_events

from accumulator.cli import main

PRODUCTION = (DATA / "production_interleaved.sse").read_bytes()
REQUEST = (DATA / "production_request.json").read_bytes()
STARTED = datetime(2026, 12, 7, 9, 0, tzinfo=UTC).timestamp()
TIMINGS = {"blocked": 1.5, "dns": -1, "ssl": -1, "connect": -1, "send": 0.5, "wait": 420.0, "receive": 1300.0}


def entry(
    url: str,
    request: bytes,
    body: bytes,
    content_type: str,
    *,
    started: float = STARTED,
    headers: dict | None = None,
    binary: bool = False,
) -> dict:
    """One HAR entry, as Chrome's DevTools saves it "with content"."""
    parts = urlsplit(url)
    content = {"size": len(body), "mimeType": content_type}
    if binary:
        content.update(text=base64.b64encode(body).decode(), encoding="base64")
    else:
        content["text"] = body.decode()
    return {
        "startedDateTime": datetime.fromtimestamp(started, UTC).isoformat().replace("+00:00", "Z"),
        "time": sum(v for v in TIMINGS.values() if v > 0),
        "request": {
            "method": "POST",
            "url": url,
            "httpVersion": "http/2.0",
            "headers": [
                {"name": ":authority", "value": parts.netloc},
                {"name": ":method", "value": "POST"},
                {"name": ":path", "value": parts.path},
                {"name": "content-type", "value": "application/json"},
                *({"name": k, "value": v} for k, v in (headers or {}).items()),
            ],
            "queryString": [],
            "cookies": [],
            "headersSize": -1,
            "bodySize": len(request),
            "postData": {"mimeType": "application/json", "text": request.decode()},
        },
        "response": {
            "status": 200,
            "statusText": "",
            "httpVersion": "http/2.0",
            "headers": [{"name": "content-type", "value": content_type}],
            "cookies": [],
            "content": content,
            "redirectURL": "",
            "headersSize": -1,
            "bodySize": -1,
        },
        "cache": {},
        "timings": dict(TIMINGS),
        "serverIPAddress": "127.0.0.1",
    }


def har(*entries: dict) -> dict:
    return {
        "log": {
            "version": "1.2",
            "creator": {"name": "WebInspector", "version": "537.36"},
            "entries": list(entries),
        }
    }


def write(tmp_path, document: dict, name: str = "capture.har"):
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return str(path)


def run_json(capsys, *args) -> tuple[int, dict, str]:
    code = main([*args, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def test_every_format_in_a_har_is_read_as_it_was_streamed(tmp_path, capsys):
    entries = []
    for format in fake_provider.FORMATS:
        body = fake_provider.body(format, "interleaved")
        url = "https://api.example.com" + fake_provider.path(format, "interleaved")
        binary = format.startswith("bedrock")  # a binary event stream: base64, as browsers save it
        request = fake_provider.request_body(format, "interleaved")
        entries.append(entry(url, request, body, fake_provider.content_type(format), binary=binary))
    code, doc, err = run_json(capsys, write(tmp_path, har(*entries)))
    assert err == "" and code == 1  # the interleaved streams carry recency warnings
    results = doc["results"]
    assert [r["format"] for r in results] == list(fake_provider.FORMATS)
    for number, (format, result) in enumerate(zip(fake_provider.FORMATS, results, strict=True), 1):
        check_result(result)
        expected = fake_provider.expected_calls("interleaved", format)
        assert [(c["name"], json.loads(c["arguments"])) for c in result["choices"][0]["tool_calls"]] == [
            (c["name"], json.loads(c["arguments"])) for c in expected
        ], format
        assert result["complete"] is True, format
        assert result["source"]["entry"] == number and result["source"]["flow_id"] == f"entry-{number}"
        # Its timing is the entry's: sent after blocked + send, the first byte after wait.
        assert result["timing"]["time_to_first_byte"] == pytest.approx(0.42)
        assert result["timing"]["duration"] == pytest.approx(1.72)
        assert result["source"]["timing"].startswith("the flow's timestamps")


def test_a_compressed_response_is_read_from_the_text_the_har_keeps(tmp_path, capsys):
    # DevTools keeps the decoded text and the headers as they came: content-encoding gzip.
    one = entry("https://api.openai.com/v1/chat/completions", REQUEST, PRODUCTION, "text/event-stream")
    one["response"]["headers"].append({"name": "content-encoding", "value": "gzip"})
    code, doc, _ = run_json(capsys, write(tmp_path, har(one)))
    assert code == 1
    (result,) = doc["results"]
    assert [w["code"] for w in result["warnings"]] == ["recency-misroute"]
    assert [c["name"] for c in result["choices"][0]["tool_calls"]] == ["search_circulars", "get_user_profile"]


def test_an_entry_that_cannot_be_read_is_told_and_the_others_are_read(tmp_path, capsys):
    good = entry("https://api.openai.com/v1/chat/completions", REQUEST, PRODUCTION, "text/event-stream")
    broken = {"startedDateTime": "2026-12-07T09:00:00Z", "time": 1}  # no request, no response
    page = entry("https://example.com/app.js", b"", b"console.log(1)", "text/javascript")
    code, doc, err = run_json(capsys, write(tmp_path, har(page, broken, good)))
    assert code == 1
    assert [r["source"]["entry"] for r in doc["results"]] == [3]  # the page is no LLM exchange
    assert "entry 2 could not be read (KeyError: 'request'); skipped" in err


def test_a_stream_saved_without_its_content_says_how_to_save_it(tmp_path, capsys):
    bare = entry("https://api.openai.com/v1/chat/completions", REQUEST, b"", "text/event-stream")
    del bare["response"]["content"]["text"]  # "Save all as HAR" without content
    code, doc, err = run_json(capsys, write(tmp_path, har(bare)))
    assert doc["results"] == [] and code == 0
    assert "entry 1 (https://api.openai.com/v1/chat/completions) has no body in the HAR file" in err
    assert "no LLM exchanges with a body in this HAR file" in err


def test_a_websocket_connection_a_browser_saved_is_read_response_by_response(tmp_path, capsys):
    upgrade = entry("wss://api.openai.com/v1/responses", b"", b"", "")
    upgrade["request"]["method"] = "GET"
    del upgrade["request"]["postData"]
    upgrade["response"].update(status=101, statusText="Switching Protocols")
    upgrade["response"]["headers"] = [{"name": "upgrade", "value": "websocket"}]
    messages = []
    moment = STARTED + 1
    for rid in ("r1", "r2"):
        messages.append(
            {"type": "send", "time": moment, "opcode": 1, "data": json.dumps({"type": "response.create"})}
        )
        for event in response_events(rid, 2, interleaved=True):
            moment += 0.05
            messages.append({"type": "receive", "time": moment, "opcode": 1, "data": json.dumps(event)})
    upgrade["_webSocketMessages"] = messages
    code, doc, err = run_json(capsys, write(tmp_path, har(upgrade)))
    assert err == "" and code == 1  # interleaved: recency-misroute
    results = doc["results"]
    assert [len(r["choices"][0]["tool_calls"]) for r in results] == [2, 2]
    assert [r["source"]["position"] for r in results] == [1, 2]
    assert {(r["source"]["entry"], r["source"]["url"]) for r in results} == {
        (1, "wss://api.openai.com/v1/responses")
    }
    # Its clock: the messages' own times.
    assert results[0]["timing"]["duration"] == pytest.approx(0.5)


def test_the_sessions_of_a_har_are_its_turns(tmp_path, capsys):
    turn = [("call_1", "get_weather", '{"city": "Paris"}')]
    url = "https://api.openai.com/v1/chat/completions"
    first = entry(url, json.dumps(follow_up([])).encode(), chat_stream(turn), "text/event-stream")
    second = entry(
        url, json.dumps(follow_up([turn])).encode(), chat_stream([]), "text/event-stream", started=STARTED + 5
    )
    path = write(tmp_path, har(first, second))
    assert main([path, "--json"], sessions_view=True) == 0  # `toolcall-lens sessions capture.har`
    (session,) = json.loads(capsys.readouterr().out)["sessions"]
    assert session["id"] == "entry-1" and len(session["turns"]) == 2
