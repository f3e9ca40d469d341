"""The `agent` scenario: a model turn made for a real coding agent from that agent's own request. A request
that declares tools and carries no tool result gets two parallel calls, interleaved as `interleaved` sends
them, to tools it declared: its shell tool (`echo hi`) and its file-read tool (the --agent-file path; an
agent without one, Codex, gets a second shell call that cats the file); Gemini's calls carry no id, as the
Gemini API sends them (Gemini CLI then makes its own). An agent that declares a custom (free-form) `apply_patch`
tool, as Codex does to the GPT-5 models (--agent-model names them), gets a patch instead of the file read:
a custom tool's call adding PATCHED to its working directory. With --agent-search NAME, the second call is
to the tool NAME instead (an MCP server's, which Codex declares in a namespace, or defers behind a
client-executed tool search for the GPT-5 models): a request that declares a client `tool_search` tool
but neither declares NAME nor carries a tool search's output loading it first gets a lone tool search
for it; so does one declaring Claude Code's `ToolSearch` tool but not NAME (`select:NAME`; the result of
a search is no tool's work: the calls follow it, once the next request declares NAME). A Responses request
that declares OpenAI's built-in `shell` tool by its type (the client runs it: no environment or a local
one; the OpenAI Agents SDK's ShellTool) and no shell function gets a built-in shell call instead, and, where
it declares the built-in `apply_patch` tool, a built-in patch adding PATCHED for the second call (else a
second shell call cat-ing the file). A request that carries tool results, or declares no tool (a title, a
summary), gets a final text. GET /agent lists every answer made, with the tool results and the calls (by
id, their names) each request sent back."""

from __future__ import annotations

import itertools
from typing import Any

import orjson

from .renderers import WIRE_FORMATS, Render

AGENT = "agent"
ABOUT = (
    "for real agents: a request declaring tools gets parallel calls to its shell and file-read tools "
    "(interleaved; Gemini's without ids, as the Gemini API sends them), one carrying tool results a final "
    "text; GET /agent lists what was sent"
)
# The tools each agent declares, found by name: Claude Code, opencode, Gemini CLI, Codex (no read tool).
SHELL_TOOLS = ("Bash", "bash", "run_shell_command", "exec_command", "shell_command", "shell")
READ_TOOLS = ("Read", "read", "read_file")
COMMAND_KEYS = ("command", "cmd")
PATH_KEYS = ("file_path", "filePath", "absolute_path", "path")
COMMAND = "echo hi"
FINAL_TEXT = "Both tools ran: the shell said hi, and the file was read."
# The custom tool's call: a patch adding a file, in the grammar of Codex's apply_patch.
PATCH_TOOL = "apply_patch"
PATCHED, PATCHED_TEXT = "patched.txt", "patched by the fake provider\n"
PATCH = f"*** Begin Patch\n*** Add File: {PATCHED}\n+{PATCHED_TEXT}*** End Patch\n"

# Responses' client-executed tool search: the tool has no name, its call is named by its type.
SEARCH_TOOL = "tool_search"
# Claude Code's own tool search: a tool like any, whose result gives the schemas of the tools it selects.
CLIENT_SEARCH_TOOLS = ("ToolSearch",)
SEARCH_VALUE = "k1"  # what the searched-for tool is asked for (every string its schema requires)

# OpenAI's built-in tools a Responses request declares by type, whose calls the client runs: a shell call's
# text is its command, a patch's the JSON of its operation (a file created with PATCHED_TEXT).
BUILTIN_SHELL, BUILTIN_PATCH = "shell", "apply_patch"
PATCH_OPERATION = {"type": "create_file", "path": PATCHED, "diff": "+" + PATCHED_TEXT}
# The answers to them in a Responses request's input (a local shell's names its call by `id`).
BUILTIN_OUTPUTS = ("shell_call_output", "apply_patch_call_output", "local_shell_call_output")

# Set by the process (--agent-file, --agent-model, --agent-search); one provider process serves one agent's
# working directory. "models": more model names than `agent` that get this scenario; "search": the tool the
# second call goes to (None: the file read or the patch).
settings: dict[str, Any] = {"file": "notes.txt", "models": (), "search": None}


def is_agent(name) -> bool:
    """Whether a request's model names this scenario."""
    return name == AGENT or (isinstance(name, str) and name in settings["models"])


# Every answer made, in order: what GET /agent returns.
log: list[dict[str, Any]] = []
_turns = itertools.count(1)
_searches: set[str] = set()  # the ids of the tool searches sent: their results are no tool's work


def declared_tools(payload: dict) -> dict[str, dict]:
    """{name: parameter schema} of the tools a request of any format declares."""
    found: dict[str, dict] = {}
    tools = payload.get("tools")
    if isinstance(payload.get("toolConfig"), dict):  # Bedrock Converse
        tools = payload["toolConfig"].get("tools")
    for tool in tools if isinstance(tools, list) else ():
        if not isinstance(tool, dict):
            continue
        entries = tool.get("functionDeclarations")  # Gemini: a list of declarations per tool
        for entry in entries if isinstance(entries, list) else [tool.get("toolSpec") or tool]:
            entry = entry.get("function", entry) if isinstance(entry.get("function"), dict) else entry
            name = entry.get("name")
            schema = next(
                (
                    entry[key]
                    for key in ("input_schema", "parameters", "parametersJsonSchema", "inputSchema")
                    if isinstance(entry.get(key), dict)
                ),
                {},
            )
            if isinstance(name, str):
                found[name] = schema.get("json", schema) if "json" in schema else schema
    return found


def _items(payload: dict) -> list:
    for key in ("messages", "input", "contents"):
        if isinstance(payload.get(key), list):
            return payload[key]
    return []


def tool_results(payload: dict) -> list[str]:
    """The call ids (Gemini: ids, else names) of the tool results a request of any format carries."""
    ids: list[str] = []
    for item in _items(payload):
        if not isinstance(item, dict):
            continue
        if item.get("type") in ("function_call_output", "custom_tool_call_output", *BUILTIN_OUTPUTS):
            ids.append(item.get("call_id") or item.get("id"))  # Responses
        elif item.get("role") == "tool":  # Chat Completions, Ollama
            ids.append(item.get("tool_call_id") or item.get("name"))
        parts = item.get("content") if isinstance(item.get("content"), list) else item.get("parts")
        for part in parts if isinstance(parts, list) else ():
            if not isinstance(part, dict):
                continue
            if part.get("type") == "tool_result":  # Anthropic
                ids.append(part.get("tool_use_id"))
            elif isinstance(part.get("functionResponse"), dict):  # Gemini
                ids.append(part["functionResponse"].get("id") or part["functionResponse"].get("name"))
    return [str(i) for i in ids]


def echoed_names(payload: dict) -> dict[str, str]:
    """{call id: name} of the calls a request of any format echoes back (a call without an id: left out):
    what the agent says it ran, beside the results it sends."""
    found: dict[str, str] = {}

    def add(call_id, name) -> None:
        if isinstance(call_id, str) and call_id and isinstance(name, str):
            found[call_id] = name

    for item in _items(payload):
        if not isinstance(item, dict):
            continue
        for call in item.get("tool_calls") if isinstance(item.get("tool_calls"), list) else ():
            if isinstance(call, dict):  # Chat, Cohere, Ollama
                body = call.get("function") if isinstance(call.get("function"), dict) else call.get("custom")
                add(call.get("id"), body.get("name") if isinstance(body, dict) else None)
        if item.get("type") in ("function_call", "custom_tool_call"):  # Responses
            add(item.get("call_id"), item.get("name"))
        parts = item.get("content") if isinstance(item.get("content"), list) else item.get("parts")
        for part in parts if isinstance(parts, list) else ():
            if not isinstance(part, dict):
                continue
            if part.get("type") == "tool_use":  # Anthropic
                add(part.get("id"), part.get("name"))
            elif isinstance(part.get("toolUse"), dict):  # Bedrock Converse
                add(part["toolUse"].get("toolUseId"), part["toolUse"].get("name"))
            elif isinstance(part.get("functionCall"), dict):  # Gemini (an id only where the client made one)
                add(part["functionCall"].get("id"), part["functionCall"].get("name"))
    return found


def _arguments(schema: dict, key_names: tuple[str, ...], value: str, extra: dict) -> dict:
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    key = next((k for k in key_names if k in properties), key_names[0])
    arguments = {key: value}
    required = schema.get("required") if isinstance(schema.get("required"), list) else []
    for name, text in extra.items():
        if name in properties or name in required:
            arguments[name] = text
    return arguments


def _halves(text: str) -> tuple[str, str]:
    middle = len(text) // 2
    return text[:middle], text[middle:]


def custom_tools(payload: dict) -> set[str]:
    """The custom (free-form) tools a request declares: Responses' and Chat's shapes."""
    tools = payload.get("tools")
    names = set()
    for tool in tools if isinstance(tools, list) else ():
        if isinstance(tool, dict) and tool.get("type") == "custom":
            body = tool.get("custom") if isinstance(tool.get("custom"), dict) else tool
            if isinstance(body.get("name"), str):
                names.add(body["name"])
    return names


def builtin_tools(payload: dict) -> set[str]:
    """The built-in tools (shell, apply_patch) a Responses request declares by type for its client to run."""
    tools = payload.get("tools")
    found = set()
    for tool in tools if isinstance(tools, list) else ():
        if not isinstance(tool, dict) or tool.get("type") not in (BUILTIN_SHELL, BUILTIN_PATCH):
            continue
        environment = tool.get("environment")
        if not isinstance(environment, dict) or environment.get("type") == "local":  # not a hosted shell
            found.add(tool["type"])
    return found


def searchable(payload: dict) -> bool:
    """Whether a Responses request declares a client-executed tool search."""
    tools = payload.get("tools")
    return any(
        isinstance(tool, dict) and tool.get("type") == SEARCH_TOOL and tool.get("execution") == "client"
        for tool in (tools if isinstance(tools, list) else ())
    )


def reachable(payload: dict, name: str) -> tuple[str | None, dict] | None:
    """(its namespace or None, its parameter schema) where a Responses request declares the tool ``name``,
    in ``tools`` (flat or in a namespace) or loaded by a tool search's output in its input; else None."""
    groups = [payload.get("tools")]
    groups += [item.get("tools") for item in _items(payload) if isinstance(item, dict)
               and item.get("type") == "tool_search_output"]  # fmt: skip
    for tools in groups:
        for tool in tools if isinstance(tools, list) else ():
            if not isinstance(tool, dict):
                continue
            inner = tool.get("tools") if tool.get("type") == "namespace" else None
            for entry in inner if isinstance(inner, list) else [tool]:
                if isinstance(entry, dict) and entry.get("name") == name:
                    schema = entry.get("parameters")
                    namespace = tool.get("name") if inner is not None else None
                    return namespace, schema if isinstance(schema, dict) else {}
    return None


def _required(schema: dict, value: str) -> dict:
    """Arguments giving ``value`` to every property the schema requires (to its first one if none)."""
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    required = [k for k in schema.get("required") or () if isinstance(k, str)] or list(properties)[:1]
    return {key: value for key in required}


def plan(
    tools: dict[str, dict],
    results: list[str],
    custom: set[str] = frozenset(),
    payload: dict | None = None,
    searched: bool = False,
) -> tuple[dict[str, Any], str]:
    """(the script to send, why): parallel calls on a first request (or a tool search before them, with
    settings["search"]; ``searched``: the request answers one), else a final text."""
    builtins = builtin_tools(payload or {})
    shell = next((name for name in SHELL_TOOLS if name in tools), None)
    if shell is None and BUILTIN_SHELL in builtins:
        shell = BUILTIN_SHELL
    if results or not (tools or builtins) or shell is None:
        why = "results" if results else ("no tools" if not (tools or builtins) else "no shell tool")
        return {"steps": tuple(("text", piece) for piece in _halves(FINAL_TEXT))}, why
    read = next((name for name in READ_TOOLS if name in tools), None)
    turn = next(_turns)
    scripted: dict[str, Any] = {}
    if shell == BUILTIN_SHELL and shell not in tools:  # the built-in tools: a shell call and a patch
        builtin = scripted["builtin"] = {f"a{turn}sh": BUILTIN_SHELL}
        key, first_text = f"a{turn}pt", COMMAND
        if BUILTIN_PATCH in builtins:
            second_name, second_text = BUILTIN_PATCH, orjson.dumps(PATCH_OPERATION).decode()
        else:
            second_name, second_text = BUILTIN_SHELL, f"cat {settings['file']}"
        builtin[key] = second_name
        return _calls(turn, shell, first_text, key, second_name, second_text, scripted), "calls"
    first = _arguments(tools[shell], COMMAND_KEYS, COMMAND, {"description": "Say hi"})
    wanted = settings["search"]
    found = None
    if wanted:  # declared flat in any format's shape (Claude Code adds a tool its search loaded), or not
        found = (None, tools[wanted]) if wanted in tools else reachable(payload or {}, wanted)
    if wanted and found is None and searchable(payload or {}):  # not declared: search for it, alone
        key, query = f"a{turn}ts", orjson.dumps({"query": wanted, "limit": 8}).decode()
        steps = [("call", 0, key, SEARCH_TOOL, ""), ("args", 0, query)]
        return {"search": (key,), "steps": tuple(steps)}, "search"
    client_search = next((name for name in CLIENT_SEARCH_TOOLS if name in tools), None)
    if wanted and found is None and client_search and not searched:  # Claude Code: its ToolSearch, alone
        query = orjson.dumps({"query": f"select:{wanted}"}).decode()
        steps = [("call", 0, f"a{turn}ts", client_search, ""), ("args", 0, query)]
        return {"steps": tuple(steps)}, "search"
    if found is not None:  # the tool searched for (or declared): its call, in its namespace
        namespace, schema = found
        key, second_name = f"a{turn}lk", wanted
        second_text = orjson.dumps(_required(schema, SEARCH_VALUE)).decode()
        if namespace:
            scripted["namespace"] = {key: namespace}
    elif PATCH_TOOL in custom:  # a patch, its text as it is: a custom tool's call
        key, second_name, second_text = f"a{turn}pt", PATCH_TOOL, PATCH
        scripted["custom"] = (key,)
    else:
        if read is not None:
            second = _arguments(tools[read], PATH_KEYS, settings["file"], {})
        else:
            read = shell
            second = _arguments(
                tools[shell], COMMAND_KEYS, f"cat {settings['file']}", {"description": "Read it"}
            )
        key, second_name, second_text = f"a{turn}rd", read, orjson.dumps(second).decode()
    return _calls(turn, shell, orjson.dumps(first).decode(), key, second_name, second_text, scripted), "calls"


def _calls(turn, shell: str, first: str, key: str, second_name: str, second: str, scripted: dict) -> dict:
    """The script of two parallel calls, their texts in halves, interleaved."""
    steps: list[tuple] = [("call", 0, f"a{turn}sh", shell, ""), ("call", 1, key, second_name, "")]
    pieces = [_halves(first), _halves(second)]
    steps += [("args", slot, pieces[slot][half]) for half in (0, 1) for slot in (0, 1)]
    return {**scripted, "steps": tuple(steps)}


def render(fmt: str, payload: dict) -> Render:
    """The answer to one request of the `agent` scenario, logged for GET /agent."""
    tools, answered = declared_tools(payload), tool_results(payload)
    results = [i for i in answered if i not in _searches]
    scripted, why = plan(tools, results, custom_tools(payload), payload, len(results) < len(answered))
    wire = WIRE_FORMATS[fmt]
    if fmt == "gemini":  # as the Gemini API streams them: calls without ids (Gemini CLI makes its own)
        wire = wire._replace(call_id="")
    rendered = wire.render(wire, AGENT, scripted)
    if why == "search":
        _searches.update(block.id for block in rendered.calls)
    log.append(
        {
            "format": fmt,
            "transport": "http",
            "answer": why,
            "tools": sorted(tools),
            "results": results,
            "echoed": echoed_names(payload),
            "calls": [{"id": b.id or None, "name": b.name, "arguments": b.full} for b in rendered.calls],
        }
    )
    return rendered


def payloads(fmt: str, payload: dict | None) -> tuple[dict, ...]:
    """The answer's events unframed (a WebSocket message each); None: a prewarm's, neither made nor logged."""
    if payload is None:
        wire = WIRE_FORMATS[fmt]
        return tuple(event for _, event in wire.render(wire, AGENT, {"steps": ()}).out)
    return tuple(event for _, event in render(fmt, payload).out)
