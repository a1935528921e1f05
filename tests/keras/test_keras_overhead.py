"""Keras ``model.fit`` against the tape loop: the paired worker, and the Keras bench worker's fit input."""

import pytest
from helpers import requires_horovod

pytestmark = [requires_horovod, pytest.mark.horovod]

TINY = ["--inputs", "16", "--hidden", "16", "--batch", "8"]


@pytest.mark.timeout(300)
def test_keras_overhead_worker_pairs_fit_and_tape_in_one_job():
    from hvdkit.bench.launch import run_worker

    r = run_worker("horovodrun", 2, "hvdkit.bench.workers.keras_overhead",
                   ["--rounds", "4", "--steps", "5", "--breakdown", "--thread-report", "--fit-data", "dataset", *TINY],
                   tuned=True, timeout=280)
    assert r["size"] == 2 and r["steps"] == 5
    assert len(r["epoch_times"]["fit"]) == len(r["epoch_times"]["tape"]) == 4  # one epoch each per round
    a, b = r["epoch_times"]["fit"][2:], r["epoch_times"]["tape"][2:]  # the first 2 rounds are warm-up
    assert r["ratios"] == pytest.approx([a[0] / b[0], a[1] / b[1]])
    assert r["block_ratios"] == pytest.approx([(a[0] + a[1]) / (b[0] + b[1])])  # judged: one block of two rounds
    assert r["ratio_median"] == r["ratio_quartiles"][0] == r["ratio_quartiles"][1] == r["block_ratios"][0]
    # Each step function is traced once: 4 epochs of fit and 4 tape epochs reuse one graph each.
    assert r["traces"] == {"fit": 1, "tape": 1}
    b = r["fit_breakdown_ms"]
    assert len(b["before_first_step_per_epoch"]) == len(b["longest_step_per_epoch"]) == 2
    assert 0 < r["fit_inside_ms_per_step"] and r["fit_outside_ms_per_step"] < r["ms_per_step"]["fit"]
    threads = r["thread_ms_per_step"]
    assert threads["fit"]["MainThread"]["cpu_ms"] > 0 and threads["tape"]["MainThread"]["cpu_ms"] > 0


@pytest.mark.timeout(300)
@pytest.mark.parametrize("fit_data", ["dataset", "numpy"])
def test_keras_bench_worker_fits_on_either_input(fit_data):
    from hvdkit.bench.launch import run_worker

    r = run_worker("horovodrun", 2, "hvdkit.bench.workers.train_keras",
                   ["--impl", "hvdkit", "--fit-data", fit_data, "--steps", "4", "--epochs", "3", *TINY],
                   tuned=True, timeout=280)
    assert r["impl"] == "hvdkit" and r["size"] == 2
    assert len(r["epoch_times"]) == 3 and r["ms_per_step"] > 0  # 3 epochs of 4 steps each ran
