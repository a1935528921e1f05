"""Resuming a Trainer checkpoint with other settings: the checkpoint's optimizer settings win, with a warning
naming each; the LR follows the global batch (world size x batch x accumulation); another optimizer class is
refused naming the checkpoint and both classes."""

import json
import os
import re
import subprocess
import sys

import pytest
from helpers import REPO, WORKERS, horovodrun, requires_horovod, tagged_json

pytestmark = [requires_horovod, pytest.mark.horovod]


# A slow_check: CI keeps the torch resume run and the unit tests of the resumed LR and settings below.
@pytest.mark.slow_check
@pytest.mark.timeout(200)
def test_np2_resumed_as_np1_with_twice_the_accumulation_keeps_the_lr(tmp_path):
    ckpt = tmp_path / "ckpt"
    horovodrun("numerics_torch.py", "--checkpoint-dir", str(ckpt), "--epochs", "1", "--batch", "16", timeout=100)
    saved = json.loads(next(ckpt.glob("*.json")).read_text())["state"]["counters"].get("global_batch")
    proc = horovodrun("numerics_torch.py", "--checkpoint-dir", str(ckpt), "--epochs", "2", "--batch", "16",
                      "--accumulate", "2", np=1, timeout=80)
    [row] = tagged_json(proc.stdout, "RESULT")
    assert row["error"] is None and row["step"] == 4  # 2 steps of 32 rows per epoch, before and after
    assert row["lr"] == pytest.approx(0.1) and row["target_lr"] == pytest.approx(0.1)
    assert "rescaled" not in proc.stdout + proc.stderr
    assert saved == {"world_size": 2, "batch_size": 16, "accumulate_steps": 1}


@pytest.fixture(scope="module")
def resumes(tmp_path_factory):
    """The scenarios of workers/resume_settings_torch.py, one process for all."""
    folder = tmp_path_factory.mktemp("resumes")
    proc = subprocess.run([sys.executable, str(WORKERS / "resume_settings_torch.py"), "--dir", str(folder)],
                          capture_output=True, text=True, timeout=100, env={**os.environ, "PYTHONPATH": str(REPO)})
    rows = {r["name"]: r for r in tagged_json(proc.stdout, "RESULT")}
    assert proc.returncode == 0 and len(rows) == 5, proc.stdout[-3000:] + proc.stderr[-3000:]
    return folder, rows


@pytest.mark.timeout(120)
def test_other_settings_in_the_code_are_named_and_the_checkpoint_wins(resumes):
    row = resumes[1]["other settings"]
    assert row["error"] is None and row["lr"] == pytest.approx(0.1) and row["momentum"] == 0.9
    [warning] = [w for w in row["warnings"] if "replace the code's" in w]
    assert "whose optimizer settings replace the code's (the checkpoint wins): " in warning
    assert "momentum 0.5 in the code, 0.9 in the checkpoint" in warning
    assert "learning rate 0.4 in the code, 0.1 in the checkpoint" in warning
    assert not [w for w in resumes[1]["sgd"]["warnings"] if "replace the code's" in w]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name, saved, resumed", [("sgd as adam", "SGD", "Adam"), ("adam as sgd", "Adam", "SGD")])
def test_another_optimizer_class_is_refused_naming_the_checkpoint_and_both(resumes, name, saved, resumed):
    folder, rows = resumes
    error = rows[name]["error"]
    assert re.match(rf"Checkpoint\(directory='{re.escape(str(folder))}/[ab]'\): checkpoint ckpt-\d{{6}}-\d{{10}}"
                    rf"\.safetensors cannot be loaded: it holds the state of optimizer class {saved}, but this run's "
                    rf"optimizer is class {resumed}", error), error
