"""How many examples the oracles run: one variable for all of them.

Each example builds real wheels, installs them with real uv and imports them in real
interpreters, so the count is the suite's largest cost on 2 cores. CI runs ORACLE_EXAMPLES
(derandomized: the same examples every run); a longer search on demand:
`CUDATX_ORACLE_EXAMPLES=2000 python3 -m pytest -m oracle`.
"""

from __future__ import annotations

import os

ORACLE_EXAMPLES = int(os.environ.get("CUDATX_ORACLE_EXAMPLES", "100"))
