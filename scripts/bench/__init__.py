"""How fast and how lean toolcall-lens is: the core beside the floor and its peers, the addon inside a real
mitmdump, and a soak of many flows. Prints text tables; asserts nothing (the targets table says met or not).

    .venv/bin/python scripts/bench.py [core|proxy|rewrite|soak|all] [--quick] [--repeats N] [--flows N]

core   generated Chat Completions streams (small, medium, large; calls interleaved round-robin), side by side:
       the floor (split lines, orjson.loads each data line), the core with identity routing only, the core
       with every hazard strategy, openai-python's ChatCompletionStreamState fed as its SDK feeds it, and
       LangChain's AIMessageChunk merging when langchain-core is installed; then the cost per event as the
       number of parallel calls grows, and tracemalloc peaks against the argument bytes.
proxy  mitmdump in reverse mode with addon.py against the same mitmdump with an identity stream callable
       (and, for reference, one doing the floor's work), on loopback, upstream writing one event per write:
       throughput (runs interleaved) and the latency each event picks up on its way to the client.
rewrite the stream rewriter (toolcall_lens_inject / _repair) on the medium stream fed one event at a time,
       each injection and repair beside the floor and the core's analysis.
soak   10,000 flows through one mitmdump with the addon: resident memory every 1,000 flows and the live
       accumulator count at the end.
all    every table above, then the targets table.

Rooms: streams.py (the generated streams), contenders.py, measure.py, report.py (tables, FINDINGS), one
module a part (core.py, scaling.py, memory.py, proxy.py, rewrite.py, soak.py), targets.py, upstream.py
(its own upstream, served by the fake provider's h11 server), traffic.py (mitmdump, the clients' requests),
addons/ (the mitmproxy scripts of the comparison proxies and the soak), cli.py (the command line).
"""
