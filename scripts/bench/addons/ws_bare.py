"""For the WebSocket benchmark: the core alone on every WebSocket message (no record on the flow, no
trimming, no log, no export), to tell what the addon around it costs.

    mitmdump -s scripts/bench/addons/ws_bare.py
"""

from accumulator import Connection, websocket_format


class BareConnection:
    def __init__(self) -> None:
        self.connections: dict[str, Connection] = {}

    def websocket_start(self, flow) -> None:
        self.connections[flow.id] = Connection(websocket_format(flow.request.path), path=flow.request.path)

    def websocket_message(self, flow) -> None:
        message = flow.websocket.messages[-1]
        self.connections[flow.id].message(
            message.from_client, message.content, message.is_text, message.timestamp
        )

    def websocket_end(self, flow) -> None:
        self.connections.pop(flow.id).finish()


addons = [BareConnection()]
