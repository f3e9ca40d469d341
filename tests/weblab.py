"""mitmweb for the live tests: started on a free web port on 127.0.0.1, and its own HTTP API (the one its
page uses) called with its token: ``GET`` for the flows, ``POST /commands/NAME`` for a command."""

from __future__ import annotations

import json
import re
import secrets
import socket
import urllib.error
import urllib.request
from collections.abc import Callable

from lab import Process, proxy_argv

XSRF_COOKIE = "_mitmproxy_xsrf"  # mitmweb 12's name for tornado's XSRF cookie


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Mitmweb:
    def __init__(self, process: Process, port: int, web_port: int, password: str) -> None:
        self.process, self.port, self.web_port, self.password = process, port, web_port, password
        self.url = f"http://127.0.0.1:{web_port}"

    def api(
        self, path: str, token: str | None = None, body: dict | None = None, method: str | None = None
    ) -> tuple[int, bytes]:
        """mitmweb's own API with ``Authorization: Bearer <token>`` (the web password by default): a GET, or
        with ``body`` a JSON POST (or ``method``: a PUT, as its flow editor sends) carrying the XSRF token as
        its page does (the ``_mitmproxy_xsrf`` cookie echoed in ``X-XSRFToken``; tornado checks that the two
        match)."""
        headers = {"Authorization": f"Bearer {self.password if token is None else token}"}
        data = None
        if body is not None:
            xsrf = secrets.token_hex(16)
            headers |= {
                "Content-Type": "application/json",
                "Cookie": f"{XSRF_COOKIE}={xsrf}",
                "X-XSRFToken": xsrf,
            }
            data = json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as refused:
            return refused.code, refused.read()

    def flows(self) -> list[dict]:
        status, body = self.api("/flows")
        assert status == 200, body
        return json.loads(body)

    def command(self, name: str, *arguments: str) -> tuple[int, dict | bytes]:
        """What mitmweb's command bar does: POST /commands/NAME; its JSON answer (``value`` or ``error``)."""
        status, body = self.api(f"/commands/{name}", body={"arguments": list(arguments)})
        return status, json.loads(body) if status == 200 else body


def start_mitmweb(
    argv_for: Callable[[int], list[str]], password: str | None = None, attempts: int = 3
) -> Mitmweb:
    """Start ``argv_for(web_port)`` on a free web port, picked again if another process took it in between
    (``web_port=0`` would bind but log ``:0``). The proxy's port is read from its log. Without ``password``
    mitmweb makes a token and prints its page's address with ``?token=``: that token is read from it."""
    for attempt in range(attempts):
        web_port = free_port()
        process = Process("mitmweb", argv_for(web_port))
        try:
            port = int(process.wait_for(r"listening at 127\.0\.0\.1:(\d+)").group(1))
            page = process.wait_for(rf"Web server listening at http://127\.0\.0\.1:{web_port}/(\S*)")
        except BaseException:
            process.stop()
            lost_port = any("Web server failed to listen" in line for line in process.lines)
            if lost_port and attempt + 1 < attempts:
                continue
            raise
        if password is None:
            token = re.fullmatch(r"\?token=(\S+)", page.group(1))
            assert token, f"no ?token= in mitmweb's address: {page.group(0)}"
            return Mitmweb(process, port, web_port, token.group(1))
        return Mitmweb(process, port, web_port, password)
    raise AssertionError("unreachable")


def start_mitmweb_proxy(upstream_port: int, *options: str) -> Mitmweb:
    """mitmweb with the addon, a reverse proxy in front of http://127.0.0.1:``upstream_port`` on port 0, its
    page on 127.0.0.1 behind a random web password."""
    password = secrets.token_urlsafe(16)
    return start_mitmweb(
        lambda web_port: proxy_argv(
            upstream_port,
            f"web_port={web_port}",
            "web_host=127.0.0.1",
            "web_open_browser=false",
            f"web_password={password}",
            *options,
            tool="mitmweb",
        ),
        password,
    )
