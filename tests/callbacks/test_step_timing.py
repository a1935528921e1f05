"""Per-step timing into the loggers (MetricsLogger's JSON lines, TensorBoard's batch scalars) for the PyTorch
Trainer and Keras fit, and the straggler hint: a warning naming a rank slowed on purpose, silence without one."""

import json

import pytest
from helpers import SharedJob, requires_horovod, tagged_json
from tb_events import read_scalars

pytestmark = [requires_horovod, pytest.mark.horovod]

FIGURES = ["step_time_s", "rank_samples_per_s", "total_samples_per_s"]


@pytest.fixture(scope="module")
def torch_runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("step-timing-torch")
    return SharedJob(out, {mode: ("step_timing.py", "torch", "{out}", mode) for mode in ("timing", "even", "slow")},
                     timeout=200)


@pytest.fixture(scope="module")
def keras_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("step-timing-keras")
    return SharedJob(out, {"timing": ("step_timing.py", "keras", "{out}", "timing")}, timeout=200)


def _batch_rows(folder):
    return [r for r in map(json.loads, (folder / "metrics.jsonl").read_text().splitlines()) if "batch" in r]


def _total_is_every_ranks_samples_over_the_mean_step_time(run):
    for r in tagged_json(run.stdout, "TIMING"):
        ranks = r["ranks"]  # the last exchange, every rank's figures
        mean_time = sum(x["step_time"] for x in ranks) / 2
        assert r["latest"]["total_samples_per_s"] == pytest.approx(16 / mean_time), r
        assert r["latest"]["step_time_s"] == ranks[r["rank"]]["step_time"]


@pytest.mark.timeout(240)
def test_torch_timing_reaches_the_json_lines_and_tensorboard(torch_runs):
    torch_runs("timing")  # both ranks finished
    rows = _batch_rows(torch_runs.folder)
    assert [r["global_step"] for r in rows] == list(range(2, 17, 2))  # 2 epochs of 8 steps, a row every 2
    timed = [r for r in rows if "step_time_s" in r]
    # the first exchange (step 2) publishes from step 3 on: rows from global step 4
    assert [r["global_step"] for r in timed] == list(range(4, 17, 2)), rows
    for r in timed:
        assert 0 < r["step_time_s"] < 5 and 0 <= r["comm_wait_s"] <= r["step_time_s"], r
        assert r["rank_samples_per_s"] == pytest.approx(8 / r["step_time_s"])  # 8 rows per rank and step
        assert r["total_samples_per_s"] > 0, r
    _total_is_every_ranks_samples_over_the_mean_step_time(torch_runs("timing"))
    scalars = read_scalars(torch_runs.folder / "tb")
    for key in [*FIGURES, "comm_wait_s"]:
        assert [step for step, _ in scalars[f"batch/{key}"]] == list(range(4, 17, 2)), (key, sorted(scalars))


@pytest.mark.timeout(240)
def test_keras_timing_reaches_the_json_lines_and_tensorboard_without_a_comm_wait(keras_run):
    keras_run("timing")
    rows = _batch_rows(keras_run.folder)
    timed = [r for r in rows if "step_time_s" in r]
    assert [r["global_step"] for r in timed] == list(range(4, 17, 2)), rows
    for r in timed:
        assert 0 < r["step_time_s"] < 5 and "comm_wait_s" not in r, r  # not measured under Keras: absent
        assert r["rank_samples_per_s"] == pytest.approx(8 / r["step_time_s"])
        assert r["total_samples_per_s"] > 0, r
    _total_is_every_ranks_samples_over_the_mean_step_time(keras_run("timing"))
    scalars = read_scalars(keras_run.folder / "tb")
    for key in FIGURES:
        assert [step for step, _ in scalars[f"batch/{key}"]] == list(range(4, 17, 2)), (key, sorted(scalars))
    assert "batch/comm_wait_s" not in scalars


@pytest.mark.timeout(240)
def test_a_slowed_rank_is_named_once_by_rank_0(torch_runs):
    run = torch_runs("slow")
    results = {r["rank"]: r for r in tagged_json(run.stdout, "TIMING")}
    assert results[0]["warned"] and results[1]["warned"]
    straggler = [w for w in results[0]["warnings"] if "straggler" in w]
    host = results[1]["ranks"][1]["host"]
    assert len(straggler) == 1 and straggler[0].startswith(f"rank 1 on host {host} is a straggler"), straggler
    assert "over the last 8 steps" in straggler[0]
    assert not results[1]["warnings"]  # rank 0 alone logs it
    # rank 0 waits for rank 1's gradients: the sleep shows as its wait, not as rank 1's
    ranks = results[0]["ranks"]
    assert ranks[0]["comm_wait"] > 0.03 > ranks[1]["comm_wait"], ranks


@pytest.mark.timeout(240)
def test_no_straggler_warning_without_a_slow_rank(torch_runs):
    run = torch_runs("even")
    results = tagged_json(run.stdout, "TIMING")
    assert len(results) == 2
    for r in results:
        assert not r["warned"] and not [w for w in r["warnings"] if "straggler" in w], r
        assert r["latest"]["step_time_s"] > 0  # the exchanges ran
