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
                         "torch.distributed (gloo)", "mpi4py (Open MPI)"}
    for name, r in rows.items():
        assert [x["bytes"] for x in r] == [4096 * 4**i for i in range(7)], name
        assert all(x["busbw_gbps"] > 0 for x in r), name
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
    assert "suites must be among allreduce, throughput, keras, checkpoint or all, got nccl" in proc.stderr
