"""Reports the loaded toolcall-lens addon's live per-flow state, for the benchmark's soak: GET STATE_PATH
through the proxy answers it (without going upstream) and logs a toolcall-lens-state line.

    mitmdump -s addon.py -s scripts/bench/addons/bench_state.py
"""

import gc
import json
import logging

from mitmproxy import ctx, http

STATE_PATH = "/__bench/state"
logger = logging.getLogger("bench_state")


class BenchState:
    def __init__(self) -> None:
        self.responses = 0
        self.annotated = 0

    def state(self, current) -> dict:
        lens = ctx.master.addons.get("toolcalllens")
        gc.collect()
        objects = gc.get_objects()
        alive = sum(1 for o in objects if type(o).__name__ == "StreamAccumulator")
        flows = sum(1 for o in objects if isinstance(o, http.HTTPFlow) and o is not current)
        return {
            "watches": len(lens.watches),
            "echo": len(lens.echo_warnings),
            "observed": len(lens.observed),
            "accumulators_alive": alive,
            "flows_alive": flows,
            # Every container the collector follows: a per-flow leak of small objects (a list a flow
            # kept by the echo index, until issue 21's third session of 2026-12-06) shows here long
            # before it shows in the resident memory.
            "objects": len(objects),
            "responses": self.responses,
            "annotated": self.annotated,
        }

    def request(self, flow: http.HTTPFlow) -> None:
        if flow.request.path == STATE_PATH:
            state = self.state(flow)
            logger.info("toolcall-lens-state " + " ".join(f"{k}={v}" for k, v in state.items()))
            flow.response = http.Response.make(200, json.dumps(state), {"content-type": "application/json"})

    def response(self, flow: http.HTTPFlow) -> None:
        if flow.request.path != STATE_PATH:
            self.responses += 1
            self.annotated += "toolcall_lens" in flow.metadata


addons = [BenchState()]
