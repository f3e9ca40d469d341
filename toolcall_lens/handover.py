"""The addon's state across a reload of its script.

mitmproxy reloads a script whose file changed (``-s addon.py``: an edit, a ``git checkout``, a ``touch``):
it removes the running addon (its ``done`` hook, called as mitmproxy does at the end), imports the file
anew and registers the new addon, all in one step of its event loop. Without a hand-over, the streams in
flight, the open WebSocket connections, the agent sessions, the echo index and the analysis worker of
the first addon were dropped with it: a stream that was passing ended with no result and, in a dump, with
no body. The addon removed while the proxy runs parks itself here instead of shutting down; the next one
loaded takes it over (``take``), at once. Parked and not taken by the end of that step (the new file did
not load, or the script was removed from ``scripts``), it is shut down as at the end (``expire``).

This module is not reloaded with the script (Python keeps the modules a script imports), so it is the
place both addons see. One slot per master: two proxies in one process (tests) never share one.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from collections.abc import Callable
from pathlib import Path

_parked: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # master -> the addon it removed
# The packages a reload does not read again (this one and the core), under the project's root.
_PACKAGES = [Path(__file__).resolve().parent, Path(__file__).resolve().parent.parent / "accumulator"]


def park(master, addon, expire: Callable[[], None]) -> None:
    """Keep ``addon`` for the next one ``master`` loads; ``expire`` ends it if none takes it within the
    current step of the event loop (at once where no loop runs: no script is reloaded without one)."""
    _parked[master] = addon

    def unclaimed() -> None:
        if _parked.get(master) is addon:
            del _parked[master]
            expire()

    try:
        asyncio.get_running_loop().call_soon(unclaimed)
    except RuntimeError:
        unclaimed()


def take(master):
    """The addon ``master`` removed in this step of its event loop, if any (once)."""
    return _parked.pop(master, None)


def code_stamp() -> dict[str, float]:
    """Each module file of the packages a reload does not read again, and when it was last changed."""
    stamp = {}
    for package in _PACKAGES:
        for folder, _, files in os.walk(package):
            for name in files:
                if name.endswith((".py", ".so")):
                    path = os.path.join(folder, name)
                    try:
                        stamp[path] = os.stat(path).st_mtime
                    except OSError:  # removed as we looked
                        pass
    return stamp


# As they were when the proxy imported them (this module is imported with them, once).
LOADED = code_stamp()


def stale() -> list[str]:
    """The module files changed, added or removed since the proxy imported them: code a reload of the
    script does not run (Python keeps the modules it imported), relative to the project's root."""
    now = code_stamp()
    root = _PACKAGES[0].parent
    changed = {path for path in LOADED.keys() | now.keys() if LOADED.get(path) != now.get(path)}
    return sorted(os.path.relpath(path, root) for path in changed)
