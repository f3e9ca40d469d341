"""The "toolcall-lens" content view (mitmweb, ``mitmdump --flow-detail 3``): the calls by identity, the
warnings, the verdicts, and each failing strategy's calls beside the right ones."""

from __future__ import annotations

from mitmproxy import contentviews, http

from accumulator import analyze_exchange, classify
from accumulator.report import format_view

METADATA_KEY = "toolcall_lens"


class ToolcallLensView(contentviews.Contentview):
    """It shows the addon's result when the flow has one (which also brings the clock and the client's
    echoes); else it reads the body itself, as the CLI would (flows from a dump made without the addon)."""

    name = "toolcall-lens"

    def prettify(self, data: bytes, metadata: contentviews.Metadata) -> str:
        flow = metadata.flow
        result = flow.metadata.get(METADATA_KEY) if flow is not None else None
        if result is None:
            exchange = _exchange(data, metadata)
            if exchange is None:
                raise ValueError("not an LLM response toolcall-lens reads")
            # The view is given the decoded body: a stream's encoding is already undone.
            response = flow.response if isinstance(flow, http.HTTPFlow) else None
            result = analyze_exchange(
                exchange,
                data,
                request=flow.request.get_content(strict=False) if isinstance(flow, http.HTTPFlow) else None,
                status=response.status_code if response is not None else None,
                reason=response.reason if response is not None else "",
                content_type=response.headers.get("content-type", "") if response is not None else "",
            )
            if result is None:
                raise ValueError("not an LLM stream toolcall-lens reads")
        return format_view(result)

    def render_priority(self, data: bytes, metadata: contentviews.Metadata) -> float:
        if isinstance(metadata.http_message, http.Request):
            return -1
        return 3 if _exchange(data, metadata) is not None else -1


def _exchange(data: bytes, metadata: contentviews.Metadata):
    flow = metadata.flow
    if isinstance(flow, http.HTTPFlow) and flow.response is not None:
        response = flow.response
        exchange = classify(
            path=flow.request.path,
            status=response.status_code,
            content_type=response.headers.get("content-type"),
            request=flow.request.get_content(strict=False),
            head=data,
        )
        if exchange is not None and exchange.format is not None:
            return exchange
    return classify(head=data)  # no flow, or a stream on a path we do not know: its bytes tell
