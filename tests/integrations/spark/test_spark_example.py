"""examples/spark/pytorch_spark.py as a user runs it: its own local[2] Spark session, MPI (the controller
that needs the driver's main guard), the ranks' weights compared by the driver, rank 0's metrics printed."""

import json
import os
import subprocess
import sys

import pytest
from helpers import REPO, requires_horovod

# A slow_check: CI runs the same example's training under horovod.spark.run on Gloo and MPI in
# tests/integrations/spark/test_spark_training.py; this adds only the user's own Spark session around it.
pytestmark = [requires_horovod, pytest.mark.horovod, pytest.mark.slow, pytest.mark.slow_check]


@pytest.mark.timeout(300)
def test_the_example_trains_under_spark_with_mpi_and_prints_rank_0s_metrics(tmp_path):
    if os.environ.get("CI") != "true":
        pytest.importorskip("pyspark")
    cmd = [sys.executable, str(REPO / "examples/spark/pytorch_spark.py"), "--checkpoint-dir", str(tmp_path / "ckpt"),
           "--epochs", "2", "--controller", "mpi"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=270, cwd=tmp_path, start_new_session=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, f"{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}"
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["rank"] == 0 and result["size"] == 2 and result["epochs_run"] == [0, 1]
    assert result["metrics"]["loss"] > 0
    assert any((tmp_path / "ckpt").iterdir())
