"""ruff and mypy pass on the package (skipped where the tools are not installed)."""

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("cmd", [["ruff", "check", "hvdkit", "tests", "examples"], ["mypy"]])
def test_tool_passes(cmd):
    if shutil.which(cmd[0]) is None:
        pytest.skip(f"{cmd[0]} not installed")
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stdout + proc.stderr
