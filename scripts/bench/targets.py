"""The targets table: each target from the issue beside what the parts measured (FINDINGS); a verdict, never
an assertion."""

from __future__ import annotations

from .report import FINDINGS, heading, table


def print_targets() -> None:
    heading("targets (from the issue; measured above, never asserted by a test)")
    rows = []

    def add(target: str, measured: str, met: bool | str | None) -> None:
        said = met if isinstance(met, str) else "not measured" if met is None else "met" if met else "NOT MET"
        rows.append([target, measured, said])

    for feeding in ("64 KiB", "per event"):
        floor = FINDINGS.get(f"core/medium/floor (split lines + orjson.loads) [{feeding}]")
        for label, limit in (("core, identity routing only", 1.5), ("core, every strategy (default)", 2.0)):
            m = FINDINGS.get(f"core/medium/{label} [{feeding}]")
            if floor and m:
                ratio = m.us_per_event / floor.us_per_event
                add(
                    f"{label.removeprefix('core, ')}: <= {limit}x the floor per event (medium, {feeding})",
                    f"{ratio:.2f}x ({m.us_per_event:.2f} vs {floor.us_per_event:.2f} us/event)",
                    ratio <= limit,
                )
            else:
                add(f"{label}: <= {limit}x floor (medium, {feeding})", "-", None)
    scaling = FINDINGS.get("scaling")
    for key, label in (("identity", "identity routing"), ("every", "every strategy")):
        if scaling:
            values = scaling[key]
            growth = values[-1] / values[0]
            add(
                f"{label}: cost per event flat as calls grow (128 calls / 8 calls <= 1.25x)",
                f"{' / '.join(f'{v:.2f}' for v in values)} us/event at 8/32/128: {growth:.2f}x",
                growth <= 1.25,
            )
        else:
            add(f"{label}: flat over 8/32/128 calls", "-", None)
    openai_m = FINDINGS.get("core/medium/openai-python ChatCompletionStreamState [64 KiB]")
    core_m = FINDINGS.get("core/medium/core, every strategy (default) [64 KiB]")
    if openai_m and core_m:
        speedup = openai_m.us_per_event / core_m.us_per_event
        add(
            ">= 30x faster than openai-python's stream state (medium, core with every strategy)",
            f"{speedup:.1f}x ({openai_m.us_per_event:.1f} vs {core_m.us_per_event:.2f} us/event)",
            speedup >= 30,
        )
    else:
        add(">= 30x faster than openai-python's stream state", "-", None)
    # The shares judged against 90% with a decimal: a rounded "90%" beside NOT MET reads as a mistake.
    for source, label in (("upstream", "long streams"), ("provider", "short flows")):
        found = FINDINGS.get(f"proxy/{source}")
        if found:
            share, of_medians, failed, floor_share, line_share = found
            add(
                f"through mitmdump: >= 90% of the identity callable's throughput ({label})",
                f"{_paired(share)}; the ratio of the medians: {of_medians * 100:.1f}%; the floor callable: "
                f"{floor_share.median * 100:.0f}%; identity with a line a flow: {line_share.median * 100:.0f}%"
                + (" (with failures)" if failed else ""),
                share.median >= 0.9 and not failed,
            )
        else:
            add(f"through mitmdump: >= 90% of identity throughput ({label})", "-", None)
        design = FINDINGS.get(f"proxy/{source}/design")
        if design is not None:
            add(
                f"  for reference, the bare core in a worker + a line a flow, no features ({label})",
                _paired(design),
                "reference",
            )
        for probe, share in FINDINGS.get(f"proxy/{source}/without", {}).items():
            add(f"  for reference, {probe} (a probe) ({label})", _paired(share), "reference")
        in_proxy = FINDINGS.get(f"proxy/{source}/in-proxy")
        if in_proxy is not None:
            add(
                f"  the same, toolcall_lens_worker=false (analysed in the proxy) ({label})",
                _paired(in_proxy),
                in_proxy.median >= 0.9,
            )
    inside = FINDINGS.get("core inside")
    if inside:
        added, alone, _busy, cold = inside
        add(
            "the core's cost per event inside mitmdump <= 1.5x its cost alone (fed the same way)",
            f"{added / alone:.2f}x ({added:.1f} vs {alone:.1f} us/event; against the core alone with cold "
            f"caches, {cold:.1f} us: {added / cold:.2f}x)",
            added / alone <= 1.5,
        )
    else:
        add("the core's cost per event inside mitmdump <= 1.5x its cost alone", "-", None)
    in_worker = FINDINGS.get("core in the worker")
    if inside and in_worker is not None:
        alone = inside[1]
        add(
            "  where the addon runs it at its defaults (its worker) <= 1.5x its cost alone",
            f"{in_worker / alone:.2f}x ({in_worker:.1f} us/event, all the worker's CPU, vs {alone:.1f})",
            in_worker / alone <= 1.5,
        )
    latency = FINDINGS.get("latency")
    if latency:
        add(
            "through mitmdump: < 1 ms added per event at p99",
            f"p99 {latency[0.99] * 1e3:+.3f} ms (p50 {latency[0.5] * 1e3:+.3f} ms)",
            latency[0.99] < 1e-3,
        )
    else:
        add("through mitmdump: < 1 ms added per event at p99", "-", None)
    websocket = FINDINGS.get("websocket")
    add(
        "WebSocket: messages/s with the addon >= 90% of the same mitmdump without it",
        _paired(websocket) if websocket else "-",
        websocket.median >= 0.9 if websocket else None,
    )
    in_proxy = FINDINGS.get("websocket/in-proxy")
    if in_proxy is not None:
        add(
            "  the same, toolcall_lens_worker=false (analysed in the proxy)",
            _paired(in_proxy),
            in_proxy.median >= 0.9,
        )
    memory = FINDINGS.get("memory")
    if memory:
        for key, label in (("identity", "identity"), ("every", "every strategy")):
            k_medium = memory[("medium", key)][0] / memory[("medium", key)][1]
            k_large = memory[("large", key)][0] / memory[("large", key)][1]
            ratio = k_large / k_medium
            add(
                f"memory proportional to argument bytes ({label}: peak per argument byte, "
                "large / medium <= 1.5x)",
                f"{k_medium:.2f} -> {k_large:.2f} B per argument byte ({ratio:.2f}x)",
                ratio <= 1.5,
            )
    else:
        add("memory per flow proportional to argument bytes", "-", None)
    soak = FINDINGS.get("soak")
    if soak:
        final = soak["final"]
        zero = final["watches"] == 0 and final["accumulators_alive"] == 0 and final["echo"] == 0
        add(
            f"soak: live accumulators back at zero after {soak['flows']} flows",
            f"watches {final['watches']}, accumulators alive {final['accumulators_alive']}, "
            f"echo {final['echo']}, "
            f"flows alive {final['flows_alive']}; {soak['failures']} failures",
            zero and not soak["failures"],
        )
        add(
            f"soak: resident memory flat (growth from flow {soak['half']} to the end <= 5%)",
            f"{soak['growth'] * 100:+.1f}%; objects the collector follows {soak['objects']:+d}"
            + (" (--quick: too few flows to judge)" if soak["quick"] else ""),
            None if soak["quick"] else soak["growth"] <= 0.05,
        )
    else:
        add("soak: accumulators back at zero, resident memory flat", "-", None)
    print(table(["target", "measured", "verdict"], rows, right=set()))


def _paired(share) -> str:
    """A share judged against a target: its median over the rounds with a decimal, and the rounds' range."""
    return f"{share.median * 100:.1f}% paired by round ({share.low * 100:.0f}-{share.high * 100:.0f})"
