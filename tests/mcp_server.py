"""A minimal MCP server over stdio (newline-delimited JSON-RPC 2.0), for the agent tests: it offers TOOLS
(`lookup_0` ... `lookup_2`, each taking a `key`) and answers a call with FOUND and the key, appending the
call (name and arguments, a JSON line) to the file its first argument names.

    python tests/mcp_server.py CALLS.jsonl
"""

from __future__ import annotations

import json
import sys

TOOLS = [
    {
        "name": f"lookup_{n}",
        "description": f"Look up a record of kind {n} in the archive by its key",
        "inputSchema": {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
    }
    for n in range(3)
]
FOUND = "archive record found"


def answer(message: dict, log: str) -> dict | None:
    method, params = message.get("method"), message.get("params") or {}
    if method == "initialize":
        version = params.get("protocolVersion", "2025-06-18")
        info = {"name": "archive", "version": "1.0"}
        return {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        with open(log, "a") as calls:
            calls.write(json.dumps({"name": params.get("name"), "arguments": params.get("arguments")}) + "\n")
        key = (params.get("arguments") or {}).get("key")
        return {"content": [{"type": "text", "text": f"{FOUND}: {key}"}]}
    return {}


def main() -> None:
    log = sys.argv[1]
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(message, dict) or message.get("id") is None:
            continue  # a notification: nothing to answer
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": answer(message, log)}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
