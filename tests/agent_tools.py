"""What the Python agents of the tests share (tests/openai_agents_client.py, langchain_client.py,
pydantic_ai_client.py): their command line, and the two function tools each framework wraps, `bash` (a
command run in the working folder) and `read_file` (a path in it), which record what they did."""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path


def arguments(apis: tuple[str, ...], *extra: tuple[str, dict]) -> argparse.Namespace:
    """BASE_URL [--dir WORKDIR] [--api API] and the client's own options (name, argparse keywords)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("base_url")
    parser.add_argument("--dir", default=".")
    parser.add_argument("--api", choices=apis, default=apis[0])
    for name, keywords in extra:
        parser.add_argument(name, **keywords)
    return parser.parse_args()


class Workdir:
    """The agent's working folder, and what its tools did there (``done``), printed at the end."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        self.done: list[dict] = []

    def run(self, command: str) -> str:
        ran = subprocess.run(
            command, shell=True, cwd=self.path, capture_output=True, text=True, timeout=30, check=False
        )
        self.done.append({"tool": "shell", "command": command, "exit": ran.returncode})
        return ran.stdout + ran.stderr

    def tools(self) -> list:
        """The two function tools, plain functions named and documented for a framework to wrap."""

        def bash(command: str) -> str:
            """Run a shell command in the working folder."""
            return self.run(command)

        def read_file(path: str) -> str:
            """Read a file."""
            self.done.append({"tool": "read_file", "path": path})
            return (self.path / path).read_text()

        return [bash, read_file]

    def report(self, final: str) -> None:
        print(json.dumps({"done": self.done, "final": final}))
