"""``hvdkit bench`` runs its suites for real (quick sizes) and reports measured ratios, plots and JSON."""

import json
import subprocess
import sys

import pytest
from helpers import REPO, requires_horovod

pytestmark = [requires_horovod, pytest.mark.horovod]


@pytest.mark.timeout(600)
def test_bench_allreduce_and_checkpoint_quick(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "hvdkit", "bench", "allreduce", "checkpoint", "--quick", "--out",
                           str(tmp_path)], capture_output=True, text=True, timeout=580, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    res = json.loads((tmp_path / "results.json").read_text())
    rows = res["suites"]["allreduce"]["rows"]
    assert set(rows) == {"hvdkit (MPI, hvdkit defaults)", "horovod (MPI)", "horovod (Gloo)",
                         "torch.distributed (gloo)", "mpi4py (Open MPI)", "hvdkit (MPI, fp16 compression)"}
    for name, r in rows.items():
        assert [x["bytes"] for x in r] == [4096 * 4**i for i in range(7)], name
        assert all(x["busbw_gbps"] > 0 for x in r), name
    assert all(r["fp16_vs_none"] > 0 for r in res["suites"]["allreduce"]["ratios"])  # paired in one job
    assert "fp16 compression vs none" in (tmp_path / "report.md").read_text()
    ck = res["suites"]["checkpoint"]["result"]
    assert ck["save_ratio"] > 0 and ck["load_ratio"] > 0
    assert (tmp_path / "allreduce.png").stat().st_size > 10_000
    report = (tmp_path / "report.md").read_text()
    assert "allreduce bus bandwidth >= torch.distributed gloo" in report and "![allreduce](allreduce.png)" in report
    assert "Targets (measured ratios, this run)" in proc.stdout


def test_bench_rejects_unknown_suites(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "hvdkit", "bench", "nccl", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 2
    assert "suites must be among allreduce, throughput, keras, checkpoint, precision or all, got nccl" in proc.stderr


@pytest.mark.timeout(300)
def test_adapter_overhead_worker_pairs_both_loops_in_one_job(tmp_path):
    from hvdkit.bench.launch import run_worker

    r = run_worker("horovodrun", 2, "hvdkit.bench.workers.adapter_overhead",
                   ["--rounds", "3", "--steps", "4", "--inputs", "16", "--hidden", "16", "--batch", "8"],
                   tuned=True, timeout=280)
    assert r["size"] == 2 and r["steps"] == 4
    assert len(r["epoch_times"]["hvdkit"]) == len(r["epoch_times"]["horovod"]) == 3  # one epoch each per round
    assert len(r["ratios"]) == 2 and all(x > 0 for x in r["ratios"])
    q1, q3 = r["ratio_quartiles"]
    assert q1 <= r["ratio_median"] <= q3


@pytest.mark.timeout(300)
def test_precision_worker_pairs_fp32_and_bf16_in_one_job(tmp_path):
    from hvdkit.bench.launch import run_worker

    r = run_worker("horovodrun", 2, "hvdkit.bench.workers.precision",
                   ["--rounds", "3", "--steps", "4", "--inputs", "16", "--hidden", "16", "--batch", "8"],
                   tuned=True, timeout=280)
    assert r["size"] == 2 and r["steps"] == 4
    assert len(r["epoch_times"]["32"]) == len(r["epoch_times"]["bf16"]) == 3  # one epoch each per round
    q1, q3 = r["time_ratio_quartiles"]
    assert 0 < q1 <= r["time_ratio_median"] <= q3
    assert r["samples_per_s"]["bf16"] > 0 and r["samples_per_s"]["fp32"] > 0
