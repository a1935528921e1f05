"""``helpers`` (tests/helpers.py) and ``benchmarks`` import from this checkout (benchmarks/ is not installed).
The environment reset and the ``--slow-checks`` rules apply from the root conftest.py."""

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]
os.environ.setdefault("PYTHONHASHSEED", "0")
