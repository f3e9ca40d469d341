"""For the WebSocket benchmark: a websocket_message hook that does nothing (what any addon's hook costs).

mitmdump -s scripts/bench/addons/ws_empty.py
"""


class EmptyHook:
    def websocket_message(self, flow) -> None:
        return None


addons = [EmptyHook()]
