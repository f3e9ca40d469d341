"""toolcall-lens as a mitmproxy addon (placeholder: the next issue wires flows to the core).

mitmdump -s addon.py
"""

addons: list = []
