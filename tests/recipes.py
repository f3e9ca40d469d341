"""The mitmdump and mitmweb command lines the docs give (read by ``doc_commands``), with the ports and hosts
each one makes mitmproxy use, its defaults included. The docs tests check them; the mitmweb live test runs
them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from doc_commands import is_mitm, mode_listen, numbered_commands

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
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
        return [mode_listen(mode)[1] or default for mode in self.values("mode") or ["regular"]]

    @property
    def web_port(self) -> int:
        return int((self.values("web_port") or [DEFAULT_WEB_PORT])[-1])

    @property
    def web_host(self) -> str:
        return (self.values("web_host") or [DEFAULT_WEB_HOST])[-1]


def recipes(tool: str | None = None) -> list[Recipe]:
    """Every command line of a mitmproxy tool in the docs (of ``tool`` only, when given)."""
    return [
        Recipe(f"{path.relative_to(ROOT)}:{line}", command.argv)
        for path in DOCS
        for line, command in numbered_commands(path.read_text())
        if is_mitm(command) and (tool is None or Path(command.argv[0]).name == tool)
    ]
