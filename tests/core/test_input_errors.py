"""Bad inputs and faults end with a clear error before training, or are named, instead of failing late,
training on wrong data, or running code from a checkpoint folder (#13 items 6, 8, 9). One process each
(Horovod size 1)."""

import os
import subprocess
import sys

import pytest
from helpers import REPO, WORKERS, requires_horovod

pytestmark = [requires_horovod, pytest.mark.timeout(120)]


def run(case, folder=None):
    proc = subprocess.run([sys.executable, str(WORKERS / "input_errors.py"), case, *([str(folder)] if folder else [])],
                          capture_output=True, text=True, timeout=100,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout + proc.stderr


@pytest.mark.parametrize("case,message", [
    ("val-wrong-shape",
     "validation_data does not fit the model, loss or metrics (first batch): RuntimeError: mat1 and mat2"),
    ("val-wrong-labels", "validation_data does not fit the model, loss or metrics (first batch)"),
    ("val-empty", "validation_data must hold at least one sample, got an empty Dataset"),
    ("train-empty", "train_data must hold at least one sample, got an empty Dataset"),
    ("accumulate-too-few", "accumulate_steps=8 needs at least 8 batches per epoch, got 5"),
])
def test_bad_data_fails_before_the_first_step(case, message):
    out = run(case)
    assert f"ERROR ValueError: {message}" in out, out[-3000:]
    assert "steps=0 " in out, out[-3000:]


def test_accumulate_steps_with_an_optimizer_distributed_for_other_passes_is_refused():
    out = run("accumulate-mismatch")
    assert ("ERROR ValueError: accumulate_steps=4 needs an optimizer that communicates once every 4 backward passes, "
            "got one distributed with accumulate_steps=2") in out, out[-3000:]


def test_a_second_fit_that_trains_nothing_says_so():
    out = run("second-fit")
    assert "fit(epochs=2): training is already at epoch 2" in out and "nothing to train" in out, out[-3000:]


def test_an_exception_mid_fit_still_ends_the_run_for_callbacks(tmp_path):
    out = run("exception-mid-fit", tmp_path)
    assert "ERROR RuntimeError: boom at step 3" in out and "train_end=True" in out, out[-3000:]


def test_a_checkpoint_that_names_code_is_refused_and_runs_nothing(tmp_path):
    """#13 item 6: a pickle dropped into the folder (valid manifest and checksum) ran code as root; now the
    tensor file is read as safetensors only."""
    out = run("malicious-checkpoint", tmp_path)
    assert "checkpoint ckpt-000001-0000000005.safetensors cannot be loaded" in out, out[-3000:]
    assert "steps=0 " in out
    assert not (tmp_path / "PWNED").exists()
