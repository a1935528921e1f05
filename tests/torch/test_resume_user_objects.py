"""A resume loads the checkpoint into the user's optimizer and keeps the LR schedulers attached to it working: the
resumed epochs train with the LRs of an uninterrupted run, for torch's schedulers and hvdkit's LR callbacks.

torch's ``Optimizer.load_state_dict`` replaces the parameter-group dicts, which Horovod's DistributedOptimizer
shares with the user's optimizer: a scheduler then moved an orphan while training kept the checkpoint's LR.
"""

import pytest
from helpers import horovodrun, requires_horovod, tagged_json

SCHEDULERS = ["StepLR", "StepLR(step_size=3)", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "LambdaLR",
              "LearningRateWarmup+cosine"]


@requires_horovod
@pytest.mark.horovod
@pytest.mark.timeout(400)
def test_a_resumed_run_trains_with_the_users_optimizer_and_scheduler(tmp_path):
    proc = horovodrun("resume_user_objects_torch.py", "--dir", str(tmp_path), timeout=360)
    rows = tagged_json(proc.stdout, "RESULT")
    assert sorted((r["scheduler"], r["rank"]) for r in rows) == sorted((s, r) for s in SCHEDULERS for r in (0, 1))
    for row in rows:
        assert row["shared"], row  # the user's optimizer holds the groups that train
        assert row["user_lr"] == row["trained_lr"], row
        assert len(row["whole"]) == 8 and row["resumed"] == pytest.approx(row["whole"], rel=1e-12), row
    # the schedules did move the LR in the resumed epochs (the comparison is not between two constant LRs)
    assert all(len(set(r["whole"])) > 1 for r in rows)


@requires_horovod
@pytest.mark.horovod
@pytest.mark.timeout(400)
def test_a_resumed_keras_run_trains_with_the_users_optimizer_and_schedules(tmp_path):
    pytest.importorskip("horovod.tensorflow")
    proc = horovodrun("resume_user_objects_keras.py", "--dir", str(tmp_path), timeout=360)
    rows = tagged_json(proc.stdout, "RESULT")
    assert len(rows) == 6, proc.stdout[-3000:]
    for row in rows:
        assert row["same_optimizer"], row
        assert len(row["whole"]) == 8 and row["resumed"] == pytest.approx(row["whole"], rel=1e-6), row
        assert len(set(row["whole"])) > 1, row
