"""`python scripts/fake_provider`: run the fake provider as a process (see the package's docstring).

Run as a directory, Python puts this package's own folder first on sys.path; scripts/ goes there instead,
so the package imports as `fake_provider` and its modules never shadow top-level names.
"""

import sys
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parents[1])

from fake_provider.server import main

sys.exit(main())
