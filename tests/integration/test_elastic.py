"""Elastic training (PyTorch and Keras 3) with Horovod's elastic driver on one machine ("hosts" localhost and
127.0.0.1, see hvdkit.elastic_local): a worker SIGKILLed mid-epoch, a host removed and added back,
and a whole-job restart from a checkpoint. Every run is bounded by a timeout."""

import itertools
import json
import os
import subprocess
import sys
from collections import Counter

import pytest
from helpers import REPO, WORKERS, read_json, requires_horovod

from hvdkit.elastic_local import command, write_discovery

pytestmark = [requires_horovod, pytest.mark.horovod, pytest.mark.timeout(400)]
N, BATCH, COMMIT = 96, 4, 5


FRAMEWORKS = pytest.mark.parametrize("worker", ["torch_elastic.py", "keras_elastic.py"], ids=["torch", "keras"])


def elastic_run(tmp_path, worker, *args, timeout=300):
    results = tmp_path / "results"
    results.mkdir(parents=True, exist_ok=True)
    hosts_file, script = write_discovery(tmp_path / "disc")
    cmd = command(2, 1, script, [sys.executable, str(WORKERS / worker), "--results", str(results),
                                 "--hosts-file", str(hosts_file), "--batch", str(BATCH), "--samples", str(N),
                                 "--commit-every", str(COMMIT), *args])
    env = {**os.environ, "PYTHONPATH": str(REPO), "HOROVOD_ELASTIC_TIMEOUT": "60", "TF_CPP_MIN_LOG_LEVEL": "2"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, start_new_session=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    steps = []
    for f in sorted(results.glob("steps-*.jsonl")):
        steps += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    return read_json(results / "summary.json"), steps, proc


@FRAMEWORKS
def test_worker_killed_mid_epoch_job_finishes_from_last_commit(tmp_path, worker):
    kill_at = 17  # epoch 0 has 12 steps at 2 workers (96 / (4 x 2)): step 17 is mid-epoch 1
    summary, steps, _proc = elastic_run(tmp_path, worker, "--epochs", "3", "--kill-at-step", str(kill_at))
    assert summary["final_epoch"] == 3 and summary["size"] == 1 and summary["resets"] >= 1
    reset = summary["events"]["resets"][0]
    last_commit = (kill_at // COMMIT) * COMMIT  # commits every 5 steps (15) and at epoch ends (12)
    assert reset["size"] == 1 and reset["step"] == last_commit and reset["epoch"] == 1
    # The survivor's steps after the reset start right after the last commit: nothing committed is lost.
    rank0 = [s for s in steps if s["rank"] == 0]
    after = [s["step"] for s in rank0 if s["size"] == 1]
    assert after[0] == last_commit
    assert after == list(range(last_commit, last_commit + len(after)))
    # Every epoch trained every sample; repeats only from the rolled-back steps (< one commit interval).
    for epoch in range(3):
        seen = Counter(i for s in steps if s["epoch"] == epoch for i in s["samples"])
        assert set(seen) == set(range(N)), epoch
        repeats = sum(c - 1 for c in seen.values())
        assert repeats <= COMMIT * BATCH * 2, (epoch, repeats)
    # LR follows the scaling rule: 0.1 at 2 workers, 0.05 at 1
    assert [s["lr"] for s in rank0 if s["size"] == 2] == pytest.approx([0.1] * sum(s["size"] == 2 for s in rank0))
    assert [s["lr"] for s in rank0 if s["size"] == 1] == pytest.approx([0.05] * len(after))
    print(f"{worker}: recovery (failure -> first completed step after reset): {summary['recovery_seconds']} s")
    assert summary["recovery_seconds"] and summary["recovery_seconds"][0] < 60


@FRAMEWORKS
def test_host_removed_and_added_back_world_2_1_2_with_lr_following(tmp_path, worker):
    summary, steps, _proc = elastic_run(tmp_path, worker, "--epochs", "12", "--remove-at-step", "8", "--add-back",
                                       "--warmup-epochs", "1")
    sizes = [r["size"] for r in summary["events"]["resets"]]
    assert sizes[:2] == [1, 2], sizes
    rank0 = sorted((s for s in steps if s["rank"] == 0), key=lambda s: s["step"])
    seq = [s["size"] for s in rank0]
    changes = [seq[0]] + [b for a, b in itertools.pairwise(seq) if a != b]
    assert changes[:3] == [2, 1, 2], changes
    # LR at every step: target lr x size under warm-up (1 epoch of S(size) steps), for the size then in force
    for s in rank0:
        n = s["size"]
        target = 0.05 * n
        warm = -(-N // (BATCH * n))
        expected = target * (1 / n + (1 - 1 / n) * s["step"] / warm) if s["step"] < warm else target
        assert s["lr"] == pytest.approx(expected, rel=1e-9 if worker.startswith("torch") else 1e-6), s  # Keras: f32
    assert summary["final_epoch"] == 12
    print(f"{worker}: recovery times (host change noticed -> first step after reset): {summary['recovery_seconds']} s")


@FRAMEWORKS
def test_whole_job_killed_and_restarted_resumes_from_checkpoint(tmp_path, worker):
    ckpt = tmp_path / "ckpt"
    first, _, _ = elastic_run(tmp_path / "a", worker, "--epochs", "2", "--checkpoint-dir", str(ckpt))
    assert first["final_epoch"] == 2 and first["resumed_from"] is None
    second, steps, _ = elastic_run(tmp_path / "b", worker, "--epochs", "4", "--checkpoint-dir", str(ckpt))
    assert second["resumed_from"] == 2 and second["final_epoch"] == 4 and second["epochs_run"] == 2
    assert min(s["epoch"] for s in steps) == 2
