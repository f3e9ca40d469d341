"""A probe of the benchmark, loaded after addon.py: the thread CPU of each part of the addon's own work,
timed where mitmdump calls it. Each part is wrapped once the proxy runs; at the end the totals per flow
(and the calls per flow) are printed, one line each, as ``addon_parts: NAME US CALLS``. The wrappers cost
a clock reading or two per call (~0.5 us each), counted in the parts they wrap.

    mitmdump -s addon.py -s scripts/bench/addons/addon_parts.py --mode reverse:http://127.0.0.1:PORT
"""

from __future__ import annotations

import logging
import time

from mitmproxy import ctx

# (where, attribute, the part's name): the hooks first, then what they call.
_HOOKS = ("request", "responseheaders", "response")
_INSIDE = (
    ("lens", "_classify", "responseheaders: classify"),
    ("module", "redact_credentials", "responseheaders: redact credentials"),
    ("lens", "_asked", "responseheaders: the request's time and model to price with"),
    ("module", "open_watch", "responseheaders: open the flow (in the worker)"),
    ("watch", "__call__", "the stream callable (every chunk)"),
    ("worker", "_on_readable", "the worker's answers (read, each to who waits for it)"),
    ("worker_module", "unpacked", "the worker's answers: the result read back from its JSON"),
    ("lens", "_annotate", "annotate (all below)"),
    ("lines", "say", "annotate: the log line (a record, or held for a shared one)"),
    ("logger", "log", "the log records (as the flow is annotated, or shared a tenth of a second later)"),
    ("lens", "_price_and_place", "annotate: the session (and the price, in the proxy)"),
    ("module", "summary_line", "annotate: the summary line"),
)


class AddonParts:
    def __init__(self) -> None:
        self.spent: dict[str, int] = {}
        self.calls: dict[str, int] = {}
        self.flows = 0

    def _wrap(self, owner, attribute: str, name: str) -> None:
        real = owner[attribute] if isinstance(owner, dict) else getattr(owner, attribute)
        clock = time.thread_time_ns
        spent, calls = self.spent, self.calls
        spent[name] = calls[name] = 0

        def timed(*args, **kwargs):
            start = clock()
            try:
                return real(*args, **kwargs)
            finally:
                spent[name] += clock() - start
                calls[name] += 1

        if isinstance(owner, dict):
            owner[attribute] = timed
        else:
            setattr(owner, attribute, timed)

    def running(self) -> None:
        from toolcall_lens import worker as worker_module
        from toolcall_lens.watch import StreamWatch
        from toolcall_lens.worker import AnalysisWorker

        lens = ctx.master.addons.get("toolcalllens")
        owners = {
            "lens": lens,
            "module": type(lens).response.__globals__,  # the names addon.py's hooks call
            "watch": StreamWatch,
            "worker": AnalysisWorker,
            "worker_module": vars(worker_module),  # unpacked, as RemoteAccumulator.finish calls it
            "lines": lens.lines,
            "logger": logging.getLogger("toolcall_lens"),
        }
        for hook in _HOOKS:
            whole = "until it awaits the worker's result" if hook == "response" else "whole"
            self._wrap(lens, hook, f"the {hook} hook ({whole})")
        for where, attribute, name in _INSIDE:
            self._wrap(owners[where], attribute, name)

    def response(self, flow) -> None:
        self.flows += 1

    def done(self) -> None:
        for name, spent in self.spent.items():
            flows = self.flows or 1
            print(
                f"addon_parts: {name}\t{spent / flows / 1000:.1f}\t{self.calls[name] / flows:.2f}", flush=True
            )


addons = [AddonParts()]
