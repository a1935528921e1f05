"""Bad inputs and faults end with a clear error before training, or are named, instead of failing late,
training on wrong data, or running code from a checkpoint folder (#13 items 6, 8, 9). One process (Horovod
size 1) runs every case, each on a fresh model."""

import os
import re
import subprocess
import sys

import pytest
from helpers import REPO, WORKERS, requires_horovod

pytestmark = [requires_horovod, pytest.mark.timeout(120)]


CASES = ["val-wrong-shape", "val-wrong-labels", "val-empty", "train-empty", "accumulate-too-few",
         "accumulate-mismatch", "second-fit", "exception-mid-fit", "malicious-checkpoint"]
NEEDS_FOLDER = ("exception-mid-fit", "malicious-checkpoint")


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    """Each case's output (stdout and stderr in the order written) and the folders of those that need one."""
    folders = {c: tmp_path_factory.mktemp(c) for c in NEEDS_FOLDER}
    proc = subprocess.run([sys.executable, str(WORKERS / "input_errors.py"),
                           *(f"{c}={folders[c]}" if c in folders else c for c in CASES)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=100,
                          env={**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"})
    assert proc.returncode == 0, proc.stdout[-3000:]
    parts = re.split(r"^=== case (\S+)\n", proc.stdout, flags=re.M)
    out = dict(zip(parts[1::2], parts[2::2]))
    assert sorted(out) == sorted(CASES), proc.stdout[-3000:]
    return out, folders


@pytest.mark.parametrize("case,message", [
    ("val-wrong-shape",
     "validation_data does not fit the model, loss or metrics (first batch): RuntimeError: mat1 and mat2"),
    ("val-wrong-labels", "validation_data does not fit the model, loss or metrics (first batch)"),
    ("val-empty", "validation_data must hold at least one sample, got an empty Dataset"),
    ("train-empty", "train_data must hold at least one sample, got an empty Dataset"),
    ("accumulate-too-few", "accumulate_steps=8 needs at least 8 batches per epoch, got 5"),
])
def test_bad_data_fails_before_the_first_step(cases, case, message):
    out = cases[0][case]
    assert f"ERROR ValueError: {message}" in out, out[-3000:]
    assert "steps=0 " in out, out[-3000:]


def test_accumulate_steps_with_an_optimizer_distributed_for_other_passes_is_refused(cases):
    out = cases[0]["accumulate-mismatch"]
    assert ("ERROR ValueError: accumulate_steps=4 needs an optimizer that communicates once every 4 backward passes, "
            "got one distributed with accumulate_steps=2") in out, out[-3000:]


def test_a_second_fit_that_trains_nothing_says_so(cases):
    out = cases[0]["second-fit"]
    assert "fit(epochs=2): training is already at epoch 2" in out and "nothing to train" in out, out[-3000:]


def test_an_exception_mid_fit_still_ends_the_run_for_callbacks(cases):
    out = cases[0]["exception-mid-fit"]
    assert "ERROR RuntimeError: boom at step 3" in out and "train_end=True" in out, out[-3000:]


def test_a_checkpoint_that_names_code_is_refused_and_runs_nothing(cases):
    """#13 item 6: a pickle dropped into the folder (valid manifest and checksum) ran code as root; now the
    tensor file is read as safetensors only."""
    out, folder = cases[0]["malicious-checkpoint"], cases[1]["malicious-checkpoint"]
    assert "checkpoint ckpt-000001-0000000005.safetensors cannot be loaded" in out, out[-3000:]
    assert "steps=0 " in out
    assert not (folder / "PWNED").exists()
