"""The distributed optimizer behaves as the torch optimizer it wraps (tests/workers/optimizer_api.py, 2 real
Horovod ranks with different data): zero_grad(set_to_none=...), a parameter used on one rank only, a layer
frozen later, add_param_group, LR schedulers, state_dict round trips, foreach/fused implementations, and a
GradScaler with gradient clipping."""

import pytest
from helpers import requires_horovod, tagged_json

pytestmark = [requires_horovod, pytest.mark.horovod, pytest.mark.timeout(600)]  # may start the shared job


@pytest.fixture(scope="module")
def rows(torch_job):
    rows = sorted(tagged_json(torch_job("optimizer_api").stdout, "OPTAPI"), key=lambda r: r["rank"])
    assert [r["rank"] for r in rows] == [0, 1]
    return rows


def test_distribute_takes_no_optimizer_step_before_training(rows):
    for r in rows:  # AdamW's decay would have moved rank 0's weights by lr * weight_decay, Adam's step be 1
        assert r["no_step_before_training"] == {"moved": 0.0, "steps": []}, r["no_step_before_training"]


def test_zero_grad_set_to_none_both_ways(rows):
    r0, r1 = rows
    for flag in ("True", "False"):
        assert r0["set_to_none"][flag]["sha256"] == r1["set_to_none"][flag]["sha256"], flag
    # True leaves no gradient, False zeros; the next step's hooks average either way: the same weights
    assert all(g is None for step in r0["set_to_none"]["True"]["after_zero_grad"] for g in step)
    assert all(g == 0.0 for step in r0["set_to_none"]["False"]["after_zero_grad"] for g in step)
    assert r0["set_to_none"]["True"]["sha256"] == r0["set_to_none"]["False"]["sha256"]


def test_a_parameter_used_on_one_rank_only_is_averaged_with_zeros_from_the_other(rows):
    for row in rows:
        assert max(row["unused_branch"]["grad_error"].values()) < 1e-7, row["unused_branch"]
    assert rows[0]["unused_branch"]["sha256"] == rows[1]["unused_branch"]["sha256"]


def test_a_layer_frozen_after_distribute_keeps_its_weights(rows):
    for row in rows:
        assert row["frozen_later"]["frozen_moved"] == 0.0
    assert rows[0]["frozen_later"]["sha256"] == rows[1]["frozen_later"]["sha256"]


def test_add_param_group_parameters_are_averaged_with_the_optimizers_defaults(rows):
    r0, r1 = rows[0]["add_param_group"], rows[1]["add_param_group"]
    assert r0["trunk_sha256"] == r1["trunk_sha256"] and r0["sha256"] == r1["sha256"]
    assert r0["lrs"] == [0.05, 0.05]


def test_lr_schedulers_drive_the_distributed_optimizer_as_a_plain_one(rows):
    # *_built_before: built on the plain optimizer, which distribute (or the Trainer) then wraps; torch's
    # "lr_scheduler.step() before optimizer.step()" warning must not fire for steps it cannot see.
    for name in ("onecycle", "plateau", "sequential", "onecycle_built_before", "sequential_built_before"):
        assert rows[0]["schedulers"][name]["sha256"] == rows[1]["schedulers"][name]["sha256"], name
        for row in rows:
            assert row["schedulers"][name]["same_lrs"], name
            assert not row["schedulers"][name]["warnings"], (name, row["schedulers"][name]["warnings"])


def test_state_dict_round_trip_continues_as_the_original(rows):
    for row in rows:
        runs = row["state_dict"]
        assert runs["continued"] == runs["reloaded"] == runs["rank0_before_distribute"]


def test_foreach_and_fused_adam_adamw_sgd_train_with_identical_ranks(rows):
    r0, r1 = rows[0]["implementations"], rows[1]["implementations"]
    for name, run in r0.items():
        assert run["sha256"] == r1[name]["sha256"], name
        if "diff_to_default" in run:
            assert run["diff_to_default"] < 1e-5, (name, run)


def test_grad_scaler_with_clipping_documented_loop_and_trainer_agree(rows):
    r0, r1 = rows[0]["scaler_and_clip"], rows[1]["scaler_and_clip"]
    assert r0["hand"]["sha256"] == r1["hand"]["sha256"]
    assert r0["trainer"]["sha256"] == r1["trainer"]["sha256"] == r0["hand"]["sha256"]
    assert all(n <= 0.05 * (1 + 1e-5) for n in r0["hand"]["norms"])
    assert r0["bad_clip"] == "clip_grad_norm must be a finite number > 0.0, got -1"


def test_distributing_a_model_again_retires_the_first_optimizers_hooks(rows):
    for row in rows:
        runs = row["second_distribute"]
        assert runs["again"] == runs["twin"], runs
    assert rows[0]["second_distribute"] == rows[1]["second_distribute"]


def test_sparse_embedding_gradients_are_averaged_as_their_dense_twins(rows):
    for row in rows:
        assert row["sparse_embedding"]["error"] < 1e-6, row["sparse_embedding"]
    assert rows[0]["sparse_embedding"]["sha256"] == rows[1]["sparse_embedding"]["sha256"]
    assert rows[0]["sparse_embedding"]["trainer_sha256"] == rows[1]["sparse_embedding"]["trainer_sha256"]


def test_rank0_loads_a_state_a_scheduler_wrote_and_distribute_hands_it_to_every_rank(rows):
    # Horovod's recipe: only rank 0 loads; the scheduler's initial_lr in the groups is no structural difference.
    r0, r1 = rows[0]["rank0_resume_with_scheduler"], rows[1]["rank0_resume_with_scheduler"]
    assert r0["error"] is None and r1["error"] is None, (r0, r1)
    assert "initial_lr" in r1["keys"] and r0["keys"] == r1["keys"]
    assert r0["momentum_sha256"] == r1["momentum_sha256"]


def test_the_trainer_starts_every_rank_from_rank_0_with_horovods_own_optimizer(rows):
    # hvd.DistributedOptimizer broadcasts nothing; given to the Trainer, ranks trained on apart, silently
    assert rows[0]["horovod_optimizer_in_trainer"] == rows[1]["horovod_optimizer_in_trainer"]
