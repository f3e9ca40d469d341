"""The shell commands the docs show, read as a user copies them: each line of a ```sh block (a trailing
backslash joins the next line) and each code span that runs a mitmproxy tool, split into words as the
shell does (comments dropped), the environment assignments that lead it apart; and what a mitmproxy
command line listens on and writes; and the tables of what a real agent or gateway survives."""

from __future__ import annotations

import re
import shlex
from pathlib import PurePosixPath
from typing import NamedTuple

SH_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`([^`\n]+)`")
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
MITM_TOOLS = ("mitmdump", "mitmweb", "mitmproxy")
EVERY_INTERFACE = ""  # mitmproxy's listen_host default


class Command(NamedTuple):
    """One command line: the variables assigned before it, then its words."""

    env: dict[str, str]
    argv: list[str]


def parse(line: str) -> Command | None:
    """The command on a shell line, or None for a line with no command (blank, a comment). A command run
    through `sudo`, `ip netns exec NS`, `unshare` or `sh -c '... && exec CMD'` is the command it runs."""
    words = unwrap(shlex.split(line, comments=True))
    env = {}
    while words and ASSIGNMENT.match(words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    return Command(env, words) if words else None


def unwrap(words: list[str]) -> list[str]:
    """The command a privilege or namespace wrapper runs (the wrappers the docs' capture recipes use)."""
    while words:
        head = PurePosixPath(words[0]).name
        if head in ("sudo", "unshare"):
            rest = words[1:]
            while rest and rest[0].startswith("-"):
                rest = rest[2:] if rest[0] == "--propagation" else rest[1:]
            words = rest
        elif head == "ip" and words[1:3] == ["netns", "exec"]:
            words = words[4:]
        elif head == "sh" and words[1:2] == ["-c"] and len(words) > 2:
            words = shlex.split(words[2].rpartition("exec ")[2])
        else:
            return words
    return words


def is_mitm(command: Command) -> bool:
    return bool(command.argv) and PurePosixPath(command.argv[0]).name in MITM_TOOLS


def commands(text: str) -> list[Command]:
    """The commands of the ```sh blocks, then the code spans in the prose that run a mitmproxy tool as the
    docs print a command to paste, by its path in the venv (`.venv/bin/mitmdump ...`); a span such as
    `mitmdump -w FILE` names an option in passing."""
    return [command for _, command in numbered_commands(text)]


def numbered_commands(text: str) -> list[tuple[int, Command]]:
    """``commands``, each with the line of the page it starts on."""
    found = []
    for block in SH_BLOCK.finditer(text):
        number = text.count("\n", 0, block.start(1)) + 1
        for line in block.group(1).replace("\\\n", " \x00").splitlines():
            if command := parse(line.replace("\x00", "")):
                found.append((number, command))
            number += 1 + line.count("\x00")
    prose = SH_BLOCK.sub(lambda block: "\n" * block.group(0).count("\n"), text)
    for span in CODE_SPAN.finditer(prose):
        command = parse(span.group(1))
        if command and is_mitm(command) and command.argv[0].startswith(".venv/bin/"):
            found.append((prose.count("\n", 0, span.start()) + 1, command))
    return found


def values(argv: list[str], *flags: str, setting: str | None = None) -> list[str]:
    """The values given to any of ``flags`` (``--flag VALUE`` or ``--flag=VALUE``) or ``--set setting=``."""
    found = []
    for word, following in zip(argv, [*argv[1:], None], strict=True):
        name, eq, value = word.partition("=")
        if word in flags and following is not None:
            found.append(following)
        elif eq and name in flags:
            found.append(value)
        elif setting and word == "--set" and following and following.startswith(setting + "="):
            found.append(following.partition("=")[2])
    return found


def mode_listen(mode: str) -> tuple[str | None, int | None]:
    """(host, port) a mode spec listens on after its `@`; None where it leaves them to the options."""
    if "@" not in mode:
        return None, None
    listen = mode.rpartition("@")[2]
    host, colon, port = listen.rpartition(":")
    return (host if colon else None), int(port) if port.isdigit() else None


def listen_hosts(argv: list[str]) -> list[str]:
    """The address each of a mitmproxy command's servers binds (EVERY_INTERFACE for all of them): one per
    proxy mode, then mitmweb's own web server."""
    default = (values(argv, "--listen-host", setting="listen_host") or [EVERY_INTERFACE])[-1]
    modes = values(argv, "--mode", "-m", setting="mode") or ["regular"]
    # Local capture listens on no port: it takes the connections of the processes it names.
    hosts = [mode_listen(mode)[0] or default for mode in modes if not mode.startswith("local")]
    if PurePosixPath(argv[0]).name == "mitmweb":
        hosts += values(argv, "--web-host", setting="web_host")[-1:] or ["127.0.0.1"]
    return hosts


def binds_to_loopback(argv: list[str]) -> bool:
    return all(host == "127.0.0.1" for host in listen_hosts(argv))


def written_files(text: str) -> list[str]:
    """The files the docs' commands write flows or records to: `-w` dumps, `toolcall_lens_jsonl` exports,
    `toolcall_lens.export` targets, and any other `.flows` or `.jsonl` name in their code; not the
    capitalised placeholders (FILE, PATH)."""
    names = []
    for command in commands(text):
        argv = command.argv
        names += values(argv, "-w", "--wfile", "--save-stream-file", setting="save_stream_file")
        names += values(argv, setting="toolcall_lens_jsonl")
    code = " ".join(SH_BLOCK.findall(text) + CODE_SPAN.findall(SH_BLOCK.sub("", text)))
    names += re.findall(r"toolcall(?:_lens)?\.export @\S+ (\S+)", code)
    names += re.findall(r"[\w~./-]+\.(?:flows|jsonl)\b", code)
    return sorted({name for name in names if not re.fullmatch(r"[A-Z_]+", name)})


def verdict_table(text: str, heading: str) -> dict[tuple[str, str], str]:
    """The table under ``heading`` (a line of the page, up to the next heading of its level or above; a
    line "# ..." is a shell comment in a code block) whose rows start with a code span: {(the row's first
    code span, a column's name): the cell, without a parenthesised remark}, the columns named by the header
    row, code spans unwrapped."""
    section = text[text.index(heading + "\n") + len(heading) :]
    level = len(heading) - len(heading.lstrip("#"))
    end = re.search(rf"^#{{2,{level}}} ", section, re.MULTILINE)
    section = section[: end.start()] if end else section
    lines = [line for line in section.splitlines() if line.startswith("|")]
    columns = [cell.strip().strip("`") for cell in lines[0].strip("|").split("|")][1:]
    found = {}
    for row in (line for line in lines if line.startswith("| `")):
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        name = cells[0].split()[0].strip("`")
        for column, cell in zip(columns, cells[1:], strict=True):
            found[name, column] = re.sub(r"\s*\(.*\)$", "", cell)
    return found
