"""Keras: a NaN sample weight on one rank. DistributedOptimizer(nonfinite=...) checks the averaged gradients
(the same on every rank): "stop" ends fit on every rank naming the step and the rank, "skip" leaves the update
out on every rank. A resumed checkpoint's optimizer settings replace the code's, with a warning naming each."""

import os
import subprocess
import sys

import pytest
from helpers import REPO, WORKERS, requires_horovod, tagged_json

pytestmark = [requires_horovod, pytest.mark.horovod, pytest.mark.shares("keras_workers"),
              pytest.mark.shares("keras_torch_workers")]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("backend", ["tensorflow", "torch"])
def test_nan_sample_weight_on_one_rank_stops_or_skips_on_every_rank(request, backend):
    # numerics_keras.py, in the shared Keras launch of its backend (tests/conftest.py)
    workers = request.getfixturevalue("keras_workers" if backend == "tensorflow" else "keras_torch_workers")
    proc = workers("numerics")
    rows = {(r["name"], r["rank"]): r for r in tagged_json(proc.stdout, "RESULT") if "name" in r}
    assert len(rows) == 4, proc.stdout[-3000:] + proc.stderr[-3000:]
    for rank in (0, 1):
        skip, stop = rows["skip", rank], rows["stop", rank]
        assert skip["error"] is None and skip["finite"], skip["error"]
        assert "NonFiniteError: non-finite gradients (NaN or inf) after the allreduce at step 1; the local " \
               "gradients of this step were non-finite on rank(s) [1]" in stop["error"], stop["error"]
        assert stop["finite"]  # stopped before the update
    assert rows["skip", 0]["weights"] == rows["skip", 1]["weights"]
    assert "update skipped on every rank (nonfinite='skip')" in proc.stdout + proc.stderr


def test_a_bad_nonfinite_value_is_refused_before_training():
    import keras

    import hvdkit.keras as hk

    with pytest.raises(ValueError, match="nonfinite must be one of 'stop', 'skip', 'warn', got 'ignore'"):
        hk.DistributedOptimizer(keras.optimizers.SGD(0.1), nonfinite="ignore")


@pytest.mark.timeout(120)
def test_resumed_settings_come_from_the_checkpoint_with_a_warning(tmp_path):
    proc = subprocess.run([sys.executable, str(WORKERS / "resume_settings_keras.py"), str(tmp_path / "ckpt")],
                          capture_output=True, text=True, timeout=110, env={**os.environ, "PYTHONPATH": str(REPO)})
    rows = {r["name"]: r for r in tagged_json(proc.stdout, "RESULT")}
    assert proc.returncode == 0 and len(rows) == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert rows["first"]["warnings"] == []
    row = rows["other settings"]
    assert row["momentum"] == 0.9 and row["lr"] == pytest.approx(0.1)
    [warning] = row["warnings"]
    assert "whose optimizer settings replace the code's (the checkpoint wins): momentum 0.5 in the code, 0.9 in " \
           "the checkpoint; learning rate 0.4 in the code, 0.1 in the checkpoint" in warning
