"""A driver script that starts the Spark job at module level through a ``functools.partial`` (which the main-guard
check used to miss) is refused by a real run, naming the line, before any Spark job: with MPI, Horovod's spawn
process would import the script again and start Spark a second time (a real run failed after 131 s with 16
multiprocessing "bootstrapping phase" errors)."""

import os
import subprocess
import sys
import time

import pytest
from helpers import REPO

pytestmark = [pytest.mark.slow]

DRIVER = """\
import functools

from pyspark.sql import SparkSession

import hvdkit.spark

SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
start = functools.partial(hvdkit.spark.run, print, num_proc=2, use_mpi=True)
start()
"""


@pytest.mark.timeout(180)
def test_a_driver_starting_the_job_through_a_partial_is_refused_before_spark_runs_it(tmp_path):
    if os.environ.get("CI") != "true":
        pytest.importorskip("pyspark")
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=150, cwd=tmp_path,
                          start_new_session=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode != 0
    assert f"RuntimeError: the Spark job is started at module level ({script}:9)" in proc.stderr, proc.stderr[-4000:]
    assert "bootstrapping phase" not in proc.stderr
    assert time.perf_counter() - t0 < 120
