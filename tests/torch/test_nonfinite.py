"""A NaN loss on one rank (Trainer, fp32): every rank agrees on what to do after the allreduce, the message
names the step and the rank, and no checkpoint of non-finite weights replaces the finite ones."""

import pytest
from helpers import requires_horovod, tagged_json

pytestmark = [requires_horovod, pytest.mark.horovod]


@pytest.fixture(scope="module")
def policies(torch_job):
    """The shared job (conftest.py) trained once per policy (the default, skip, warn), each from the same weights
    into its own folder, rank 1's loss NaN at step 20 (8 steps an epoch, keep=2): ``(output, {policy: rows in
    rank order})``."""
    proc = torch_job("nonfinite")
    rows = {}
    for row in sorted(tagged_json(proc.stdout, "RESULT"), key=lambda r: r["rank"]):
        rows.setdefault(row["policy"], []).append(row)
    assert {p: [r["rank"] for r in rs] for p, rs in rows.items()} == {p: [0, 1] for p in ("default", "skip", "warn")}, \
        proc.stdout[-3000:]
    return proc.stdout + proc.stderr, rows


@pytest.mark.timeout(480)  # the shared job (conftest.py) may start in this test
def test_stop_is_the_default_and_raises_on_every_rank_naming_step_and_rank(policies):
    rows = policies[1]["default"]
    for r in rows:
        assert r["error"].startswith("NonFiniteError: non-finite gradients (NaN or inf) after the allreduce at "
                                     "step 20 (epoch 2); rank 1's loss was NaN or inf"), r["error"]
        assert r["weights_finite"] and r["step"] == 20  # stopped before the update
    assert rows[0]["weights"] == rows[1]["weights"]
    assert rows[0]["checkpoints"] == [["ckpt-000001-0000000008.safetensors", True],
                                      ["ckpt-000002-0000000016.safetensors", True]]


@pytest.mark.timeout(480)  # the shared job (conftest.py) may start in this test
def test_skip_leaves_out_the_step_on_every_rank(policies):
    rows = policies[1]["skip"]
    for r in rows:
        assert r["error"] is None and r["skipped"] == 1 and r["weights_finite"]
    assert rows[0]["weights"] == rows[1]["weights"]
    assert rows[0]["checkpoints"] == [["ckpt-000002-0000000016.safetensors", True],
                                      ["ckpt-000003-0000000024.safetensors", True]]


@pytest.mark.timeout(480)  # the shared job (conftest.py) may start in this test
def test_warn_applies_the_step_but_never_checkpoints_the_nan_weights(policies):
    output, rows = policies[0], policies[1]["warn"]
    for r in rows:
        assert r["error"] is None and r["skipped"] == 0 and not r["weights_finite"]
    # only the warn run can say either: the default stops at step 20, skip never holds NaN weights
    assert "rank 1's loss was NaN or inf: update applied (nonfinite='warn')" in output
    assert "not saving epoch 3 (step 24): the model's weights hold NaN or inf" in output
    # keep=2 kept the last two finite checkpoints: the NaN epoch was never written, so nothing pushed them out
    assert rows[0]["checkpoints"] == [["ckpt-000001-0000000008.safetensors", True],
                                      ["ckpt-000002-0000000016.safetensors", True]]


@pytest.mark.timeout(480)  # the shared job (conftest.py) may start in this test
def test_a_nan_loss_with_finite_gradients_is_stopped_or_skipped_too(torch_job):
    rows: dict[str, list[dict]] = {}
    for row in sorted(tagged_json(torch_job("nonfinite_loss").stdout, "RESULT"), key=lambda r: r["rank"]):
        rows.setdefault(row["policy"], []).append(row)
    for r in rows["default"]:
        assert (r["error"] or "").startswith("NonFiniteError: a non-finite loss (NaN or inf) at step 20 (epoch 2), "
                                             "its gradients finite; rank 1's loss was NaN or inf"), r["error"]
        assert r["weights_finite"] and r["step"] == 20  # stopped before the update
    for r in rows["skip"]:
        assert r["error"] is None and r["skipped"] == 1 and r["weights_finite"]
    assert rows["skip"][0]["weights"] == rows["skip"][1]["weights"]
