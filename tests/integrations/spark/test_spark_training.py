"""hvdkit under a real local Spark (``local[2]``, one session for the module): ``horovod.spark.run`` with
hvdkit's Horovod names on Gloo (in the training job) and on MPI, the example's training (identical weights
on both ranks), a failing rank failing the job with its own error, and a checkpoint written under Spark
resumed under ``horovodrun``. Needs Java (scripts/bootstrap.sh installs default-jre-headless) and
``hvdkit[spark]``."""

from __future__ import annotations

import json
import os
import re
import sys
import time

import pytest
from helpers import REPO, horovodrun, requires_horovod

EXAMPLE_DIR = REPO / "examples" / "spark"
EXAMPLE = EXAMPLE_DIR / "pytorch_spark.py"
START_TIMEOUT = 120  # seconds for the Spark tasks to start and register; a hang fails the test instead

pytestmark = [requires_horovod, pytest.mark.horovod, pytest.mark.slow]


@pytest.fixture(scope="module")
def spark():
    """One local[2] session for the whole module (starting Spark's JVM costs seconds)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("pyspark is not installed (it is pinned in requirements/cpu.in: the hvdkit[spark] extra)")
        pytest.skip("pyspark not installed (pip install 'hvdkit[spark]')")
    # The executors' Python workers inherit the JVM's environment, which is this one: they import hvdkit and
    # the example from this checkout.
    os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), str(EXAMPLE_DIR), os.environ.get("PYTHONPATH", "")])
    sys.path.insert(0, str(EXAMPLE_DIR))
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # its functions, by value: executors cannot import it
    t0 = time.perf_counter()
    session = (SparkSession.builder.master("local[2]").appName("hvdkit-tests")
               .config("spark.ui.enabled", "false").config("spark.driver.memory", "1g").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    print(f"Spark session started in {time.perf_counter() - t0:.1f} s")
    yield session
    session.stop()
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    sys.path.remove(str(EXAMPLE_DIR))


def allreduce_and_where(values):
    """A Horovod 0.28.1-style function written against hvdkit's names."""
    import hvdkit.torch as hvd
    from hvdkit.runtime.environments import detect

    hvd.init()
    import torch

    total = hvd.allreduce(torch.tensor(values[hvd.rank()], dtype=torch.float64), op=hvd.Sum)
    return {"rank": hvd.rank(), "size": hvd.size(), "sum": float(total), "launcher": detect().kind,
            "detail": detect().detail}


def train_then_names(checkpoint_dir, epochs):
    """The example's training, then :func:`allreduce_and_where` in the same ranks: one Spark job for both."""
    from pytorch_spark import train

    result = train(checkpoint_dir, epochs)
    result["names"] = allreduce_and_where([1.5, 2.5])
    return result


@pytest.fixture(scope="module")
def trained(spark, tmp_path_factory):
    """The example's training, 2 ranks x 2 epochs under Spark (Gloo), with checkpoints in a shared folder;
    each rank then runs the Horovod-names function as well."""
    import hvdkit.integrations.spark

    ckpt = tmp_path_factory.mktemp("spark-ckpt")
    t0 = time.perf_counter()
    results = hvdkit.integrations.spark.run(train_then_names, args=(str(ckpt), 2), num_proc=2, use_gloo=True,
                               start_timeout=START_TIMEOUT, verbose=0)
    print(f"2-rank training under Spark took {time.perf_counter() - t0:.1f} s")
    return results, ckpt


@pytest.mark.timeout(240)
@pytest.mark.parametrize("controller", ["gloo", "mpi"])
def test_horovod_names_under_horovod_spark_run(spark, controller, request):
    import horovod.spark

    # in the training job: hvdkit.integrations.spark.run is horovod.spark.run, inputs checked first
    if controller == "gloo":
        results = [r["names"] for r in request.getfixturevalue("trained")[0]]
    else:
        results = horovod.spark.run(allreduce_and_where, args=([1.5, 2.5],), num_proc=2,
                                    start_timeout=START_TIMEOUT, use_gloo=False, use_mpi=True, verbose=0)
    assert [r["rank"] for r in results] == [0, 1] and {r["size"] for r in results} == {2}
    assert [r["sum"] for r in results] == [4.0, 4.0]
    assert {r["launcher"] for r in results} == {"spark"}
    expected = {"gloo": "horovod.spark.run (Gloo)", "mpi": "horovod.spark.run (MPI)"}[controller]
    assert all(expected in r["detail"] for r in results), results


@pytest.mark.timeout(240)
def test_two_ranks_train_to_identical_weights(trained):
    results, ckpt = trained
    assert [r["rank"] for r in results] == [0, 1] and {r["size"] for r in results} == {2}
    assert all(r["epochs_run"] == [0, 1] and r["resumed_from_epoch"] is None for r in results)
    assert results[0]["weights_sha256"] == results[1]["weights_sha256"]
    assert results[0]["metrics"] == results[1]["metrics"]  # MetricAverage: both ranks report the averages
    assert any(ckpt.iterdir()), "rank 0 wrote no checkpoint"


@pytest.mark.timeout(240)
def test_a_checkpoint_written_under_spark_resumes_under_horovodrun(trained):
    _, ckpt = trained
    proc = horovodrun(EXAMPLE, "--no-spark", "--checkpoint-dir", str(ckpt), "--epochs", "3", timeout=180)
    out = re.sub(r"\[\d+,\d+\]<std(?:out|err)>:", "", proc.stdout)
    resumed = json.loads(next(line for line in out.splitlines() if line.startswith('{"rank": 0')))
    assert resumed["resumed_from_epoch"] == 2 and resumed["epochs_run"] == [2]
    assert resumed["size"] == 2


@pytest.mark.timeout(240)
# Horovod's thread that ran the Spark job raises once the job is cancelled: expected here.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_rank_that_raises_fails_the_job_with_its_error(spark, tmp_path):
    from pytorch_spark import train

    import hvdkit.integrations.spark

    t0 = time.perf_counter()
    with pytest.raises(RuntimeError) as failure:
        hvdkit.integrations.spark.run(train, args=(str(tmp_path / "ckpt"),), kwargs={"fail_on_rank": 1}, num_proc=2,
                         use_gloo=True, start_timeout=START_TIMEOUT, verbose=0)
    elapsed = time.perf_counter() - t0
    said = str(failure.value)
    # Horovod's own message names the process whose exit it saw first: rank 0 as often as rank 1, which
    # raised. The first traceback in the ranks' stderr is rank 1's.
    assert "exited with non-zero status" in said, said
    assert "[1]<stderr>:RuntimeError: rank 1 failed on purpose (fail_on_rank=1)" in said, said
    assert elapsed < 180, f"the job took {elapsed:.0f} s to fail"
