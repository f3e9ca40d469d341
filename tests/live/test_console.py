"""mitmproxy's console UI with the addon, all real: ``mitmproxy -s addon.py`` on a pseudo-terminal of 160 by
40, its screen read as a terminal would show it (pyte, a VT100 emulator), the openai SDK through it to
scripts/fake_provider. The console is a front door as mitmweb is: the flow list carries the warning's
marker, the flow's Detail tab its comment, the Response tab the toolcall-lens view, the command bar the
addon's commands, and its Replay key (r) sends the request again with its API key."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import pty
import signal
import struct
import subprocess
import termios
import threading
import time

import openai
import pyte
from lab import BIN, ROOT, settle, start_fake_provider
from mitmproxy import io as mio
from weblab import free_port

COLUMNS, LINES = 160, 40
KEY = "sk-test-0123456789abcdefghijklmnop"
SENT = hashlib.sha256(f"Bearer {KEY}\n\n\n\n".encode()).hexdigest()  # as the fake provider hashes it
TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("search_circulars", "get_user_profile")
]


class Console:
    """``mitmproxy`` (the console UI) on a pseudo-terminal; ``screen()`` is what a person would see."""

    def __init__(self, argv: list[str]) -> None:
        leader, follower = pty.openpty()
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", LINES, COLUMNS, 0, 0))
        self.process = subprocess.Popen(
            argv,
            stdin=follower,
            stdout=follower,
            stderr=follower,
            cwd=ROOT,
            env={**os.environ, "TERM": "xterm-256color"},
            start_new_session=True,
        )
        os.close(follower)
        self.leader = leader
        self._screen = pyte.Screen(COLUMNS, LINES)
        self._stream = pyte.ByteStream(self._screen)
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.leader, 65536)
            except OSError:  # the console exited: its side of the terminal is gone
                return
            if not data:
                return
            with self._lock:
                self._stream.feed(data)

    def screen(self) -> str:
        with self._lock:
            return "\n".join(line.rstrip() for line in self._screen.display)

    def wait_for(self, *texts: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while not all(text in (shown := self.screen()) for text in texts):
            assert self.process.poll() is None, f"the console exited ({self.process.returncode}):\n{shown}"
            assert time.monotonic() < deadline, f"not on the screen: {texts}\n{shown}"
            time.sleep(0.1)
        return shown

    def press(self, keys: bytes) -> None:
        os.write(self.leader, keys)
        time.sleep(0.3)  # the console takes each key on its own event loop's turn

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(5)
        os.close(self.leader)
        self._reader.join(5)


def ask(port: int) -> None:
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY, max_retries=0)
    messages = [{"role": "user", "content": "Find the RBI circulars and my profile."}]
    with client.chat.completions.stream(model="interleaved", messages=messages, tools=TOOLS) as stream:
        assert len(stream.get_final_completion().choices[0].message.tool_calls) == 2


def test_the_console_shows_the_marker_comment_view_and_report_and_replays_with_the_key(tmp_path):
    jsonl, dump = tmp_path / "lens.jsonl", tmp_path / "flows.mitm"
    provider, provider_port = start_fake_provider(delay=0.0)
    port = free_port()
    console = Console(
        [
            str(BIN / "mitmproxy"),
            "-s",
            str(ROOT / "addon.py"),
            "--mode",
            f"reverse:http://127.0.0.1:{provider_port}",
            "--listen-host",
            "127.0.0.1",
            "-p",
            str(port),
            "-w",
            str(dump),
            "--set",
            "console_mouse=false",
            "--set",
            f"toolcall_lens_jsonl={jsonl}",
        ]
    )
    try:
        console.wait_for("Flows", f"[127.0.0.1:{port}]")
        ask(port)
        shown = console.wait_for("/v1/chat/completions", "⚠")  # the marker of a flow with a warning
        (row,) = [line for line in shown.splitlines() if line.startswith(">>")]  # the flow list's one row
        assert "POST" in row and row.endswith("⚠") and "event-stream" in row, row

        console.press(b"\r")  # the flow: its Request tab
        console.press(b"\t")  # its Response tab, in the toolcall-lens view
        shown = console.wait_for(
            "== openai-chat, model interleaved, complete ==", f"Credentials-SHA256:  {SENT}"
        )
        assert (
            "  [0] search_circulars  id=call_abc" in shown and "  [1] get_user_profile  id=call_xyz" in shown
        )
        assert "  WARNING recency-misroute: recency routing would have built different calls" in shown
        assert any(line.startswith("toolcall-lens ") and "[m:auto]" in line for line in shown.splitlines())
        console.press(b"\t")  # its Detail tab
        console.wait_for(
            "Comment: openai-chat interleaved: 2 calls: search_circulars, get_user_profile | warning: recency-misroute"
        )

        console.press(b"r")  # Replay
        settle(lambda: jsonl.exists() and len(jsonl.read_bytes().splitlines()) == 2, what=console.screen)
        first, replayed = (json.loads(line) for line in jsonl.read_bytes().splitlines())
        assert (first["replay"], replayed["replay"]) == (None, "request")
        assert replayed["result"]["session"]["by"] == "replay"

        console.press(b"q")  # back to the list
        console.press(b":toolcall_lens.report @all\r")
        console.wait_for("calls: search_circulars, get_user_profile  warnings: recency-misroute")
    finally:
        console.stop()
        provider.stop()
    with dump.open("rb") as file:
        saved = list(mio.FlowReader(file).stream())
    # The flow as -w saved it at each end: the provider got the agent's key both times; the file holds none.
    assert len(saved) == 2
    for flow in saved:
        assert flow.response.headers["X-Received-Credentials-SHA256"] == SENT
        assert flow.request.headers["authorization"].endswith("...[redacted]")
