"""Upstream Horovod v0.28.1's own elastic scenarios (``test/integration/test_elastic_torch.py`` and
``test_elastic_tensorflow2.py``) pass with their training scripts on ``hvdkit.torch`` and ``hvdkit.tensorflow``.

The upstream files (vendored unedited in ``third_party/horovod-0.28.1-test``, or ``$HVDKIT_UPSTREAM_TESTS``)
are copied into a temporary folder, never edited in place. Upstream's tests launch Horovod's elastic driver
themselves (``horovodrun`` with a host discovery script over ``localhost`` and ``127.0.0.1``, in the pytest
process) on the training scripts ``integration/data/elastic_{torch,tensorflow2}_main.py``, and check what
rank 0 logs each epoch: hosts added and removed, a single rank failing (by exception and by kill), fault
tolerance without scaling, all ranks failing, the reset limit, blacklisted hosts coming back (deselected
here; see below).

The copy's changes, each asserted to match exactly once:
- both training scripts: the import line (``import horovod.torch as hvd`` -> ``import hvdkit.torch as hvd``,
  ``import horovod.tensorflow as hvd`` -> ``import hvdkit.tensorflow as hvd``), as the parallel conformance
  tests do. The tests' own code (``elastic_common.py``) drives ``horovod.runner``, the launcher, which hvdkit
  does not replace.
- ``elastic_tensorflow2_main.py``'s reset callback: ``optimizer.lr.assign(`` -> ``optimizer.learning_rate
  .assign(``. Forced by Keras 3 (TF 2.16+'s ``tf.optimizers``), whose optimizers have no ``lr`` alias: without
  it every scenario with a reset fails with "AttributeError: 'SGD' object has no attribute 'lr'" (5 of the 6
  that run). (The raw ``horovod.tensorflow`` never gets that far on Keras 3: its ``TensorFlowKerasState``
  calls ``optimizer.variables()``, a list in Keras 3, and fails when the state is created.)
- a one-line ``mock`` module maps the ``mock`` backport onto ``unittest.mock``.

Both are ``slow_check`` tests, run by ``scripts/slow-checks.sh``: about 2 and 7 minutes on CI's 2-core machine
(docs/benchmarks.md, "Slow checks"). CI's own elastic tests are tests/elastic/test_elastic.py.

Deselected here (``--deselect``, nothing edited): ``test_resurrecting_blacklisted_hosts_exponential_backoff``
in both files. Its outcome depends on wall-clock timing that upstream assumes, not on the training script:
the blacklisted host comes back 2 s after the failure (``--blacklist-cooldown-range 1 2``), and the test
passes only if the driver's notice reaches rank 0 during the 0.25 s ``--epoch-wait`` at the end of epoch 2.
On a machine where ten batches take longer than that sleep the notice lands inside epoch 3 instead, the
host rejoins after the ``(3, 0)`` failure point, and epoch 4 runs at size 4 where the test expects 2. On
this 2-core CI machine (AMD EPYC, 2026-11-26) it failed that way 3 times out of 3 with raw
``horovod.torch`` (upstream's script unedited: 46, 43 and 58 s); through hvdkit it failed in CI (both
files), in a rerun and once in that harness, and passed twice there, both times while other tests loaded
the machine (34 and 36 s): it passes or fails with the load, not with the library. It passed in every
earlier CI run on a faster CPU. Blacklisting and resurrection are Horovod's driver's (``horovod.runner``),
which hvdkit does not replace.

Skipped by upstream itself, and left so (``skipTest`` in upstream's files, with these reasons): in both files
``test_all_hosts_blacklisted`` and ``test_min_hosts_timeout`` (horovod/horovod#2030); in the torch file also
``test_single_rank_failure`` and ``test_fault_tolerance_without_scaling`` (horovod/horovod#2908). The
TensorFlow 2 file runs those two. (Run once with the skips removed, through hvdkit: the torch
``test_single_rank_failure``, ``test_fault_tolerance_without_scaling`` and ``test_all_hosts_blacklisted``, and
the TF2 ``test_all_hosts_blacklisted`` passed; ``test_min_hosts_timeout`` cannot run: it calls
``self._run(..., np=4)``, which ``_run`` does not accept, a TypeError in upstream's test code.)
"""

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, requires_horovod

pytestmark = [requires_horovod, pytest.mark.horovod, pytest.mark.slow]

UPSTREAM = Path(os.environ.get("HVDKIT_UPSTREAM_TESTS", REPO / "third_party" / "horovod-0.28.1-test"))
KERAS3_LR = ("optimizer.lr.assign(", "optimizer.learning_rate.assign(")
TIMING_BOUND = "test_resurrecting_blacklisted_hosts_exponential_backoff"  # see the module docstring


@pytest.fixture
def upstream_copy(tmp_path):
    assert (UPSTREAM / "integration" / "elastic_common.py").is_file(), \
        f"no upstream Horovod v0.28.1 tests at {UPSTREAM}"
    shutil.copytree(UPSTREAM / "utils", tmp_path / "utils")
    (tmp_path / "utils" / "mock.py").write_text("from unittest.mock import *  # noqa: F403\n")
    shutil.copytree(UPSTREAM / "integration", tmp_path / "integration")
    return tmp_path


def edit_once(path, old, new):
    src = path.read_text()
    assert src.count(old) == 1, f"{old!r} occurs {src.count(old)} times in {path}"
    path.write_text(src.replace(old, new))


def run_upstream_elastic(copy, test_file, test_class, timeout):
    """``pytest integration/<test_file>`` in ``copy`` (upstream's tests start horovodrun themselves), less the
    timing-bound scenario; returns pytest's output."""
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{copy / 'utils'}", "TF_CPP_MIN_LOG_LEVEL": "2",
           # the tests launch `python ...`: this interpreter's, wherever the suite was started from
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    cmd = [sys.executable, "-m", "pytest", "-q", "--color=no", "-p", "no:cacheprovider", "-rfEs", "--durations=0",
           "--timeout=240", f"integration/{test_file}",
           "--deselect", f"integration/{test_file}::{test_class}::{TIMING_BOUND}"]
    proc = subprocess.Popen(cmd, cwd=copy, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # pytest and the workers horovodrun started in its session
        out, err = proc.communicate()
        raise AssertionError(f"upstream's {test_file} ran past {timeout} s\n{out[-8000:]}{err[-2000:]}") from None
    assert proc.returncode == 0, out[-8000:] + err[-2000:]
    print(out[out.find("slowest durations") - 40:])  # each scenario's time (pytest -rP shows it)
    return out


def assert_summary(out, passed, skipped_2030, skipped_2908):
    summary = out.strip().splitlines()[-1]
    expected = f"{passed} passed, {skipped_2030 + skipped_2908} skipped, 1 deselected"
    assert re.fullmatch(rf"=* ?{expected} in .*", summary), summary
    assert out.count("horovod/horovod/issues/2030") == skipped_2030, out[-3000:]
    assert out.count("horovod/horovod/issues/2908") == skipped_2908, out[-3000:]


# a slow_check (see the module docstring): CI proves elastic recovery with tests/elastic/test_elastic.py
@pytest.mark.slow_check
@pytest.mark.timeout(420)
def test_upstream_elastic_torch_passes_through_hvdkit(upstream_copy):
    edit_once(upstream_copy / "integration" / "data" / "elastic_torch_main.py",
              "\nimport horovod.torch as hvd\n", "\nimport hvdkit.torch as hvd\n")
    out = run_upstream_elastic(upstream_copy, "test_elastic_torch.py", "ElasticTorchTests", timeout=400)
    # hosts added and removed, all ranks failure, reset limit
    assert_summary(out, passed=3, skipped_2030=2, skipped_2908=2)


@pytest.mark.slow_check  # minutes on CI's 2-core machine: scripts/slow-checks.sh runs it
@pytest.mark.timeout(900)  # 531 s for all eight on this machine's current CPU (stop 24's CI)
def test_upstream_elastic_tensorflow2_passes_through_hvdkit(upstream_copy):
    script = upstream_copy / "integration" / "data" / "elastic_tensorflow2_main.py"
    edit_once(script, "\nimport horovod.tensorflow as hvd\n", "\nimport hvdkit.tensorflow as hvd\n")
    edit_once(script, *KERAS3_LR)
    out = run_upstream_elastic(upstream_copy, "test_elastic_tensorflow2.py", "ElasticTensorFlow2Tests",
                               timeout=880)
    # also single rank failure and fault tolerance without scaling, each by exception and by kill
    assert_summary(out, passed=5, skipped_2030=2, skipped_2908=0)
