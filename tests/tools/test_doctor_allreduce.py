"""``hvdkit doctor --allreduce``: a real 2-process horovodrun job against the transport's own allreduce."""

import json
import os
import subprocess
import sys

import pytest
from helpers import REPO, requires_horovod

pytestmark = [requires_horovod, pytest.mark.horovod]


def _doctor(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hvdkit", "doctor", "--allreduce", *args], capture_output=True,
                          text=True, timeout=280, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


@pytest.mark.timeout(300)
def test_doctor_allreduce_compares_horovod_with_mpis_own_allreduce():
    proc = _doctor("--json")
    report = json.loads(proc.stdout)
    res = report["allreduce"]  # beside the report, not instead of it
    assert "horovod_build" in report["facts"]
    assert proc.returncode == (0 if report["ok"] else 1), proc.stdout + proc.stderr
    assert report["ok"] == res["ok"]  # the report itself finds nothing wrong on this machine
    assert res["controller"] == "mpi" and res["transport"] == "mpi4py"  # the patched build, Open MPI's own
    assert [r["bytes"] for r in res["rows"]] == [1 << 20, 4 << 20, 16 << 20, 64 << 20]
    for r in res["rows"]:
        assert r["horovod_gbps"] > 0 and r["transport_gbps"] > 0
        assert r["ratio"] == pytest.approx(r["horovod_gbps"] / r["transport_gbps"])
    ratios = sorted(r["ratio"] for r in res["rows"])
    assert res["ratio_median"] == pytest.approx((ratios[1] + ratios[2]) / 2)
    assert res["ok"] == (res["ratio_median"] >= 0.5) and (res["warning"] is None) == res["ok"]


@pytest.mark.timeout(300)
def test_doctor_allreduce_warns_about_a_slow_horovod_and_names_the_exported_setting():
    # A 100 ms cycle (the user's export wins over hvdkit's 0.1 ms): every allreduce waits for Horovod's next cycle,
    # longer than 16 MiB take over loopback even on a loaded machine (20 ms was not, under load).
    proc = _doctor(env={"HOROVOD_CYCLE_TIME": "100"})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.startswith("hvdkit doctor") and "Horovod build" in proc.stdout  # the report comes first
    assert "WARNING: Horovod's allreduce reached 0." in proc.stdout
    assert "of mpi4py's bandwidth (median over 1-64 MiB), below 0.5" in proc.stdout
    assert "HOROVOD_CYCLE_TIME" in proc.stdout and "(hvdkit doctor)" in proc.stdout
    assert "   1 MiB  horovod" in proc.stdout and "  64 MiB  horovod" in proc.stdout
