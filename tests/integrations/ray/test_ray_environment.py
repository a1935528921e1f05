"""``hvdkit doctor``'s Ray contexts and the backend's rank plan (no cluster: plain functions)."""

from __future__ import annotations

import pytest

from hvdkit.runtime.environments import detect


def test_a_rank_of_the_ray_backend_is_named_ray_not_horovodrun():
    env = {"HVDKIT_RAY_WORKER": "1/2", "HOROVOD_RANK": "1", "HOROVOD_SIZE": "2", "HOROVOD_HOSTNAME": "9d15961d462c4f55"}
    ctx = detect(env)
    assert ctx.kind == "ray"
    assert "Horovod rank 1 of 2" in ctx.detail and "9d15961d462c" in ctx.detail


def test_a_process_pointed_at_a_ray_cluster_is_a_ray_driver():
    ctx = detect({"RAY_ADDRESS": "10.0.0.1:6379"})
    assert ctx.kind == "ray-driver" and "10.0.0.1:6379" in ctx.detail and "HorovodTrainer" in ctx.uses


def test_plan_numbers_ranks_node_by_node_whatever_the_worker_order():
    pytest.importorskip("ray")
    from hvdkit.integrations.ray.backend import plan

    slots = plan(["a", "b", "a", "b", "b"])
    assert [(s.hostname, s.rank, s.local_rank, s.local_size) for s in slots] == [
        ("a", 0, 0, 2), ("b", 2, 0, 3), ("a", 1, 1, 2), ("b", 3, 1, 3), ("b", 4, 2, 3)]
    assert [(s.cross_rank, s.cross_size) for s in slots] == [(0, 2), (1, 2), (0, 2), (1, 2), (0, 1)]
    assert {s.size for s in slots} == {5}
