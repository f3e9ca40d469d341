"""Loaded at start-up by every Python process that has this folder on PYTHONPATH (``sources_first.install``
puts it there with TOOLCALL_LENS_PURE=1): the core's sources are imported, not its compiled build."""

import sources_first  # noqa: F401
