"""Local capture of an agent's whole process tree, for ``toolcall-lens run --mode local``: a mitmproxy addon
script loaded into that mitmdump beside addon.py.

mitmproxy's local redirector matches a socket's process by PID or by name, not by ancestry, so a process
the agent starts (an npm launcher's real binary, a wrapper's child) would go straight out. This addon
follows the agent's descendants through ``/proc/PID/task/TID/children`` every ``POLL`` seconds and gives
the redirector the PID of each new one as it appears, with the mode's own spec (the agent's PID, the
names asked for) and mitmproxy's own exclusion. A child that opens a connection within a few milliseconds
of starting can still be missed: ``--capture NAME`` (by name, from the first instruction) or
``--mode transparent`` (a cgroup: the whole tree, always) are the sure ways, and docs/proxy.md says so.
"""

from __future__ import annotations

import asyncio
import logging
import os

from mitmproxy import ctx

logger = logging.getLogger(__name__)

POLL = 0.01  # seconds between two looks at the tree


def descendants(root: int) -> set[int]:
    """The PIDs of every process below ``root`` now (any thread's children, their children, ...)."""
    found: set[int] = set()
    todo = [root]
    while todo:
        pid = todo.pop()
        try:
            threads = os.listdir(f"/proc/{pid}/task")
        except OSError:  # gone
            continue
        for tid in threads:
            try:
                with open(f"/proc/{pid}/task/{tid}/children", "rb") as file:
                    children = file.read().split()
            except OSError:
                continue
            for child in map(int, children):
                if child not in found:
                    found.add(child)
                    todo.append(child)
    return found


def spec(mode_data: str, pids: set[int]) -> str:
    """The redirector's intercept spec: the mode's own, the descendants, and never mitmproxy itself."""
    return ",".join([mode_data, *map(str, sorted(pids)), f"!{os.getpid()}"])


class LocalTree:
    def __init__(self) -> None:
        self.task: asyncio.Task | None = None
        self.followed: set[int] = set()

    def load(self, loader) -> None:
        loader.add_option(
            "toolcall_lens_local_tree",
            int,
            0,
            "Local capture mode: also capture every process this PID starts, and theirs (0: off).",
        )

    def running(self) -> None:
        root = ctx.options.toolcall_lens_local_tree
        modes = [mode for mode in ctx.options.mode if mode.startswith("local:")]
        if root and modes:
            self.task = asyncio.get_running_loop().create_task(self._follow(root, modes[0][len("local:") :]))

    async def _follow(self, root: int, mode_data: str) -> None:
        from mitmproxy.proxy.mode_servers import LocalRedirectorInstance

        try:
            while os.path.exists(f"/proc/{root}"):
                alive = descendants(root)
                if alive - self.followed:
                    self.followed = alive  # the dead are dropped: their PIDs may be reused
                    server = LocalRedirectorInstance._server
                    if server is not None and LocalRedirectorInstance._instance is not None:
                        server.set_intercept(spec(mode_data, alive))
                        logger.info("toolcall-lens: capturing the agent's processes %s", sorted(alive))
                await asyncio.sleep(POLL)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - following the tree must never stop the proxy
            logger.warning("toolcall-lens: stopped following the agent's processes: %s", exc)

    def done(self) -> None:
        if self.task is not None:
            self.task.cancel()
            self.task = None


addons = [LocalTree()]
