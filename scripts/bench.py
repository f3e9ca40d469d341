"""How fast and how lean toolcall-lens is: the benchmark's front door (the parts live in scripts/bench/).

.venv/bin/python scripts/bench.py [core|proxy|rewrite|soak|websocket|all] [--quick] [--repeats N] [--flows N]
"""

import sys
from pathlib import Path

# Run as a script, scripts/ is already first on sys.path (bench, fake_provider, lab); addon.py, which the
# addon's own stream callable is measured from, lives at the repository root.
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(1, str(ROOT))

from bench.cli import main

if __name__ == "__main__":
    sys.exit(main())
