"""The mitmproxy-facing parts of toolcall-lens, beside ``addon.py`` (which only wires them to hooks): the
options and the settings parsed from them, the watches that feed a flow's bytes to the core, the content
view, credential redaction and the JSONL export."""
