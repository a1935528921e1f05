"""The ``slow_check`` marker: CI's run deselects those tests (and says so), ``--slow-checks`` keeps them."""

import subprocess
import sys

from helpers import REPO

UPSTREAM_ELASTIC = "tests/compat/test_upstream_elastic.py"


def _collect(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           UPSTREAM_ELASTIC, *args], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return proc.stdout


def test_ci_deselects_slow_checks_and_names_them():
    collected, sep, summary = _collect().partition("1 slow_check tests deselected (scripts/slow-checks.sh runs them)")
    assert sep, "the summary does not name the deselected slow checks"
    assert "test_upstream_elastic_torch_passes_through_hvdkit" in collected
    assert "test_upstream_elastic_tensorflow2_passes_through_hvdkit" not in collected
    assert f"{UPSTREAM_ELASTIC}::test_upstream_elastic_tensorflow2_passes_through_hvdkit" in summary.splitlines()
    assert "1 deselected" in summary


def test_slow_checks_option_keeps_them():
    out = _collect("--slow-checks", "-m", "slow_check")
    assert "test_upstream_elastic_tensorflow2_passes_through_hvdkit" in out
    assert "test_upstream_elastic_torch_passes_through_hvdkit" not in out
