"""Hybrid parallelism with Horovod process sets (#14 item 6): examples/hybrid_process_sets.py under
horovodrun -np 4 (2 data-parallel replicas of a 2-stage pipeline). The replicas of each stage stay
identical, the stages communicate (the loss falls, stage 0's weights move), MetricAverage averages
within each stage's set only, and each stage's Checkpoint folder resumes exactly."""

import json

import pytest
from helpers import REPO, horovodrun, requires_horovod

pytestmark = [requires_horovod, pytest.mark.horovod]
EXAMPLE = REPO / "examples" / "hybrid_process_sets.py"


def _run(tmp_path, name, ckpt, epochs):
    out = tmp_path / name
    horovodrun(EXAMPLE, "--checkpoint-dir", str(ckpt), "--epochs", str(epochs), "--results", str(out), np=4,
               timeout=150)
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(4)]


@pytest.mark.timeout(480)
def test_two_replicas_of_a_two_stage_pipeline_stay_identical_and_resume_per_stage(tmp_path):
    straight = _run(tmp_path, "straight", tmp_path / "ck_straight", 5)
    assert [(r["stage"], r["replica"], r["resumed_epoch"]) for r in straight] == [(0, 0, 0), (1, 0, 0), (0, 1, 0),
                                                                                  (1, 1, 0)]
    for stage in (0, 1):  # ranks {0, 2} hold stage 0, {1, 3} stage 1
        a, b = straight[stage], straight[stage + 2]
        assert [e["sha256"] for e in a["epochs"]] == [e["sha256"] for e in b["epochs"]]  # replicas identical
        assert len({e["sha256"] for e in a["epochs"]}) == 5  # and every epoch changes them
        for ea, eb in zip(a["epochs"], b["epochs"]):  # MetricAverage: the mean of this stage's two replicas
            assert ea["averaged"] == eb["averaged"] == pytest.approx((ea["local"] + eb["local"]) / 2, rel=1e-12)
    loss = [e["averaged"] for e in straight[1]["epochs"]]
    print("stage-1 loss per epoch (mean of the 2 replicas):", [round(v, 4) for v in loss])
    assert loss[-1] < 0.6 * loss[0]  # stage 1 learns from stage 0's activations; stage 0 from its gradients
    assert straight[0]["epochs"][0]["averaged"] != straight[1]["epochs"][0]["averaged"]  # stages average apart

    ckpt = tmp_path / "ck"
    _run(tmp_path, "first", ckpt, 3)
    for stage in (0, 1):  # one folder per stage, written by the stage set's first rank
        assert sorted(p.name for p in (ckpt / f"stage{stage}").glob("*.json")) == [
            "ckpt-000001-0000000008.json", "ckpt-000002-0000000016.json", "ckpt-000003-0000000024.json"]
    resumed = _run(tmp_path, "resumed", ckpt, 5)
    for r in range(4):  # both stages resume at epoch 3 and end exactly where the uninterrupted run ended
        assert resumed[r]["resumed_epoch"] == 3
        assert [e["sha256"] for e in resumed[r]["epochs"]] == [e["sha256"] for e in straight[r]["epochs"][3:]]
