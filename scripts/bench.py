"""How fast and how lean toolcall-lens is: the benchmark's front door (the parts live in scripts/bench/).

.venv/bin/python scripts/bench.py [core|proxy|rewrite|soak|websocket|all] [--quick] [--repeats N] [--flows N]
"""

import os
import sys
from pathlib import Path

# Run as a script, scripts/ is already first on sys.path (bench, fake_provider, lab); addon.py, which the
# addon's own stream callable is measured from, lives at the repository root.
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(1, str(ROOT))

# TOOLCALL_LENS_PURE=1 measures the pure-Python core where the compiled one is built (scripts/pure).
if os.environ.get("TOOLCALL_LENS_PURE"):
    sys.path.insert(0, str(ROOT / "scripts" / "pure"))
    import sources_first  # noqa: F401  (installs itself)

from bench.cli import main

if __name__ == "__main__":
    sys.exit(main())
