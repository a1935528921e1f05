"""A NaN loss on one rank (Trainer, fp32): every rank agrees on what to do after the allreduce, the message
names the step and the rank, and no checkpoint of non-finite weights replaces the finite ones."""

import pytest
from helpers import horovodrun, requires_horovod, tagged_json

pytestmark = [requires_horovod, pytest.mark.horovod]
# 64 rows, 4 per rank and step: 8 steps per epoch; rank 1's loss is NaN at step 20 (epoch 2)
NAN = ("--nan-rank", "1", "--nan-step", "20", "--keep", "2")


def run(tmp_path, policy):
    given = () if policy == "stop" else ("--nonfinite", policy)  # "stop" is the default
    proc = horovodrun("numerics_torch.py", *given, "--checkpoint-dir", str(tmp_path / "ckpt"), *NAN,
                      timeout=110)
    rows = sorted(tagged_json(proc.stdout, "RESULT"), key=lambda r: r["rank"])
    assert [r["rank"] for r in rows] == [0, 1], proc.stdout[-3000:]
    return proc, rows


@pytest.mark.timeout(120)
def test_stop_is_the_default_and_raises_on_every_rank_naming_step_and_rank(tmp_path):
    _, rows = run(tmp_path, "stop")
    for r in rows:
        assert r["error"].startswith("NonFiniteError: non-finite gradients (NaN or inf) after the allreduce at "
                                     "step 20 (epoch 2); rank 1's loss was NaN or inf"), r["error"]
        assert r["weights_finite"] and r["step"] == 20  # stopped before the update
    assert rows[0]["weights"] == rows[1]["weights"]
    assert rows[0]["checkpoints"] == [["ckpt-000001-0000000008.safetensors", True],
                                      ["ckpt-000002-0000000016.safetensors", True]]


@pytest.mark.timeout(120)
def test_skip_leaves_out_the_step_on_every_rank(tmp_path):
    _, rows = run(tmp_path, "skip")
    for r in rows:
        assert r["error"] is None and r["skipped"] == 1 and r["weights_finite"]
    assert rows[0]["weights"] == rows[1]["weights"]
    assert rows[0]["checkpoints"] == [["ckpt-000002-0000000016.safetensors", True],
                                      ["ckpt-000003-0000000024.safetensors", True]]


@pytest.mark.timeout(120)
def test_warn_applies_the_step_but_never_checkpoints_the_nan_weights(tmp_path):
    proc, rows = run(tmp_path, "warn")
    for r in rows:
        assert r["error"] is None and r["skipped"] == 0 and not r["weights_finite"]
    assert "rank 1's loss was NaN or inf: update applied (nonfinite='warn')" in proc.stdout + proc.stderr
    assert "not saving epoch 3 (step 24): the model's weights hold NaN or inf" in proc.stdout + proc.stderr
    # keep=2 kept the last two finite checkpoints: the NaN epoch was never written, so nothing pushed them out
    assert rows[0]["checkpoints"] == [["ckpt-000001-0000000008.safetensors", True],
                                      ["ckpt-000002-0000000016.safetensors", True]]
