"""The ``slow_check`` marker: CI's run deselects those tests (and says so), ``--slow-checks`` keeps them."""

import subprocess
import sys

from helpers import REPO

EXAMPLES = "tests/compat/test_horovod_examples.py"


def _collect(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           EXAMPLES, *args], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return proc.stdout


def test_ci_deselects_slow_checks_and_names_them():
    collected, sep, summary = _collect().partition("5 slow_check tests deselected (scripts/slow-checks.sh runs them)")
    assert sep, "the summary does not name the deselected slow checks"
    assert f"{EXAMPLES}::test_pytorch_mnist" in collected.splitlines()
    assert "test_pytorch_mnist_elastic" not in collected
    assert f"{EXAMPLES}::test_pytorch_mnist_elastic" in summary.splitlines()
    assert "5 deselected" in summary


def test_slow_checks_option_keeps_them():
    out = _collect("--slow-checks", "-m", "slow_check")
    assert "test_pytorch_mnist_elastic" in out
    assert f"{EXAMPLES}::test_pytorch_mnist" not in out.splitlines()
    assert "slow_check tests deselected" not in out
