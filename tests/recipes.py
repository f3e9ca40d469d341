"""The mitmdump and mitmweb command lines the docs give (README.md and docs/*.md: their ``sh`` code blocks,
and inline code that starts with ``.venv/bin/``), with the ports and hosts each one makes mitmproxy use,
its defaults included. The docs tests check them; the mitmweb live test runs them."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TOOLS = ("mitmdump", "mitmweb", "mitmproxy")
DEFAULT_PROXY_PORT = 8080  # mitmproxy's, for a mode without @PORT and no --listen-port
DEFAULT_WEB_PORT = 8081  # mitmweb's page
DEFAULT_WEB_HOST = "127.0.0.1"
# --flag VALUE forms and the option each sets (--set NAME=VALUE sets NAME itself).
FLAGS = {
    "--mode": "mode",
    "-m": "mode",
    "-p": "listen_port",
    "--listen-port": "listen_port",
    "--listen-host": "listen_host",
    "--web-port": "web_port",
    "--web-host": "web_host",
    "-s": "scripts",
    "-w": "save_stream_file",
}
MODE_PORT = re.compile(r"@(?:(?P<host>[^@:]+):)?(?P<port>\d+)$")


@dataclass
class Recipe:
    source: str  # file:line, for messages
    argv: list[str]

    @property
    def tool(self) -> str:
        return Path(self.argv[0]).name

    def values(self, option: str) -> list[str]:
        """Every value given to ``option``, as ``--flag VALUE`` or ``--set option=VALUE``."""
        found, args = [], iter(self.argv[1:])
        for arg in args:
            if arg == "--set":
                name, _, value = next(args).partition("=")
                if name == option:
                    found.append(value)
            elif FLAGS.get(arg) == option:
                found.append(next(args))
        return found

    @property
    def listen_host(self) -> str | None:
        return (self.values("listen_host") or [None])[-1]

    @property
    def proxy_ports(self) -> list[int]:
        """The port each mode listens on: its own @PORT, else --listen-port, else mitmproxy's default."""
        default = int((self.values("listen_port") or [DEFAULT_PROXY_PORT])[-1])
        modes = self.values("mode") or ["regular"]
        return [int(m["port"]) if (m := MODE_PORT.search(mode)) else default for mode in modes]

    @property
    def web_port(self) -> int:
        return int((self.values("web_port") or [DEFAULT_WEB_PORT])[-1])

    @property
    def web_host(self) -> str:
        return (self.values("web_host") or [DEFAULT_WEB_HOST])[-1]


def recipes(tool: str | None = None) -> list[Recipe]:
    """Every command line of a mitmproxy tool in the docs (of ``tool`` only, when given)."""
    found = []
    for path in DOCS:
        text = path.read_text()
        candidates = []
        for block in re.finditer(r"^```(?:sh|bash|console)\n(.*?)^```", text, re.DOTALL | re.MULTILINE):
            start = text.count("\n", 0, block.start(1)) + 1
            joined, first = "", None
            for number, line in enumerate(block.group(1).splitlines(), start):
                first = first or number
                joined += line.removesuffix("\\")
                if not line.endswith("\\"):
                    candidates.append((first, joined))
                    joined, first = "", None
        for span in re.finditer(r"`(\.venv/bin/[^`\n]+)`", text):
            candidates.append((text.count("\n", 0, span.start()) + 1, span.group(1)))
        for line, command in candidates:
            argv = shlex.split(command, comments=True)
            if argv and Path(argv[0]).name in TOOLS and (tool is None or Path(argv[0]).name == tool):
                found.append(Recipe(f"{path.relative_to(ROOT)}:{line}", argv))
    return found
