"""A probe of the benchmark, loaded after addon.py: the addon with some of its per-flow work switched off,
to tell what the rest costs mitmdump (issue 21: how far short flows are from 90% of the identity callable,
and why). ``--set addon_without=PART,PART`` names the parts, switched off once the proxy runs:

- ``request``: the request hook (the echo check and the session facts); no hook at all, so mitmproxy
  calls nothing (the worker then reads the request's tool declarations from its body);
- ``session``: placing each result in its agent session (loop warnings);
- ``summary``: the summary line (the comment and the log line say a constant);
- ``redact``: taking the API keys out of the stored request;
- ``annotate``: everything done with a result (metadata, comment, marker, log line, session, echo index);
- ``result``: the result taken off the flow once the addon's response hook is done (as if mitmproxy let
  each flow go at once: what keeping it on the flow costs the collector).

What is left always runs as the addon runs it: classification, the worker's round trip, the body kept.
Not a configuration to use: the flows lose what was switched off.

    mitmdump -s addon.py -s scripts/bench/addons/addon_without.py --set addon_without=request,session \
        --mode reverse:http://127.0.0.1:PORT
"""

from __future__ import annotations

from mitmproxy import ctx

from toolcall_lens.view import METADATA_KEY

PARTS = ("request", "session", "summary", "redact", "annotate", "result")


class Unplaced:
    """The addon's sessions with placing switched off. (The compiled ``Sessions``' method cannot be
    replaced on its instance: the probe wraps it.)"""

    def __init__(self, sessions) -> None:
        self.sessions = sessions

    def place(self, *args, **kwargs) -> None:
        return None

    def __len__(self) -> int:
        return len(self.sessions)

    def __getattr__(self, name: str):
        return getattr(self.sessions, name)


class AddonWithout:
    def __init__(self) -> None:
        self.parts: set[str] = set()

    def load(self, loader) -> None:
        loader.add_option("addon_without", str, "", f"Parts of addon.py switched off: {', '.join(PARTS)}.")

    def running(self) -> None:
        parts = {part.strip() for part in ctx.options.addon_without.split(",") if part.strip()}
        unknown = parts - set(PARTS)
        if unknown:
            raise ValueError(f"addon_without: unknown parts {sorted(unknown)}; known: {PARTS}")
        self.parts = parts
        lens = ctx.master.addons.get("toolcalllens")
        module = type(lens).response.__globals__  # the names addon.py's hooks call
        if "request" in parts:
            lens.request = None  # mitmproxy skips an addon whose hook is not callable
        if "session" in parts:
            lens.sessions = Unplaced(lens.sessions)
        if "summary" in parts:
            module["summary_line"] = lambda result: "a summary"
        if "redact" in parts:
            module["redact_credentials"] = lambda flow: None
        if "annotate" in parts:  # the flow's state is let go as annotating would
            lens._annotate = lambda flow, *args, **kwargs: lens._forget(flow)
        print(f"addon_without: {', '.join(sorted(parts)) or 'nothing'} switched off", flush=True)

    def response(self, flow) -> None:
        # Loaded after addon.py: its response hook, awaited, is done by now.
        if "result" in self.parts:
            flow.metadata.pop(METADATA_KEY, None)

    def done(self) -> None:
        lens = ctx.master.addons.get("toolcalllens")
        print(f"addon_without: {len(lens.sessions)} agent sessions kept", flush=True)


addons = [AddonWithout()]
