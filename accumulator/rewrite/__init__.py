"""Rewriting LLM streams on their way to the client: injections that send a client the hostile shapes on
purpose (a test bench with a real provider behind it), repairs that make a provider's stream safe for a
fragile client. Sans-IO, like the rest of the core:

    rewriter = StreamRewriter("openai-chat", inject=["interleave"], encoding="gzip")
    for chunk in chunks:
        send(rewriter.feed(chunk))     # pieces to write now, each non-empty
    send(rewriter.finish())
    rewriter.report()                  # JSON-safe: what was applied, skipped, held, moved

Every transformation keeps the stream valid for its format and the same calls, text and finish for a
correct client; an event no transformation touches leaves with its original bytes.
"""

from .formats import BREAKING_INJECTIONS, INJECTIONS, REPAIRS, supported
from .rewriter import StreamRewriter

__all__ = ["BREAKING_INJECTIONS", "INJECTIONS", "REPAIRS", "StreamRewriter", "supported"]
