"""ruff and mypy pass on the package. Both are pinned in requirements/cpu.lock (and hvdkit[test]): where
either is missing the test fails, so that a broken environment cannot pass as a clean lint."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


RUFF_PATHS = ["hvdkit", "tests", "examples", "benchmarks", "benchmarks/run", "conftest.py"]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("tool, args", [("ruff", ["check", *RUFF_PATHS]), ("mypy", [])])
def test_tool_passes(tool, args):
    try:
        found = importlib.util.find_spec(tool) is not None
    except ImportError:
        found = False
    assert found, (f"{tool} is not installed in {sys.prefix}: it is pinned in requirements/cpu.lock "
                   "(./run.sh test installs it; or pip install 'hvdkit[test]')")
    proc = subprocess.run([sys.executable, "-m", tool, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=280)
    assert proc.returncode == 0, proc.stdout + proc.stderr
