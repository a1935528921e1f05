"""Spark without starting Spark: how a rank of ``horovod.spark.run`` is recognised, ``hvdkit doctor``'s Spark
line, and ``hvdkit.integrations.spark.run``'s checks (inputs, the driver script's main guard) that fail before any
job."""

import os
import subprocess
import sys
import types

import pytest

from hvdkit.integrations import spark as hk_spark
from hvdkit.runtime.environments import detect, prepare_process
from hvdkit.runtime.environments import spark as spark_env
from hvdkit.tools import doctor

# What the training process of a rank sees (horovod/spark/task/task_service.py adds the work dir; the rest is
# Horovod's Gloo launcher, or Open MPI under mpirun_exec_fn).
GLOO_RANK = {"HOROVOD_SPARK_WORK_DIR": "/spark/work/task-1", "HOROVOD_RANK": "1", "HOROVOD_SIZE": "2",
             "HOROVOD_HOSTNAME": "3f2a9c", "HOROVOD_GLOO_RENDEZVOUS_ADDR": "10.0.0.1",
             "HOROVOD_GLOO_RENDEZVOUS_PORT": "4000"}
MPI_RANK = {"HOROVOD_SPARK_WORK_DIR": "/spark/work/task-0", "OMPI_COMM_WORLD_RANK": "0",
            "OMPI_COMM_WORLD_SIZE": "2", "HOROVOD_HOSTNAME": "3f2a9c"}


@pytest.mark.parametrize("env, controller, rank", [(GLOO_RANK, "Gloo", "rank 1 of 2"),
                                                   (MPI_RANK, "MPI", "rank 0 of 2")])
def test_a_rank_of_horovod_spark_run_is_recognised_before_horovodrun_and_mpi(env, controller, rank):
    ctx = detect(dict(env))
    assert ctx.kind == "spark"
    assert f"horovod.spark.run ({controller}): {rank}" in ctx.detail and "/spark/work/task" in ctx.detail
    assert controller in ctx.uses and ctx.problem is None
    environ = dict(env)
    assert prepare_process(environ).kind == "spark" and environ == env  # nothing to fill in: Horovod set it up


def test_without_the_spark_work_dir_the_same_rank_is_horovodrun_or_mpi():
    gloo = {k: v for k, v in GLOO_RANK.items() if k != "HOROVOD_SPARK_WORK_DIR"}
    mpi = {k: v for k, v in MPI_RANK.items() if k != "HOROVOD_SPARK_WORK_DIR"}
    assert detect(gloo).kind == "horovodrun" and detect(mpi).kind == "mpi"


def test_spark_task_and_driver_are_this_process_only(monkeypatch):
    task = types.SimpleNamespace(stageId=lambda: 3, partitionId=lambda: 1, attemptNumber=lambda: 0)
    driver = types.SimpleNamespace(master="local[2]", appName="app", defaultParallelism=2)
    monkeypatch.setattr(spark_env, "task_context", lambda: task)
    monkeypatch.setattr(spark_env, "active_driver", lambda: driver)
    for var in ("HOROVOD_SPARK_WORK_DIR", "HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                "SLURM_JOB_ID", "OMPI_MCA_orte_default_hostfile", "K_MPI_JOB_ROLE"):
        monkeypatch.delenv(var, raising=False)
    if os.path.isfile("/etc/mpi/hostfile"):
        pytest.skip("this machine looks like an MPIJob launcher (/etc/mpi/hostfile)")
    ctx = detect()
    assert ctx.kind == "spark-task" and "stage 3, partition 1, attempt 0" in ctx.detail
    monkeypatch.setattr(spark_env, "task_context", lambda: None)
    ctx = detect()
    assert ctx.kind == "spark-driver" and "master local[2]" in ctx.detail
    assert "hvdkit.integrations.spark.run" in ctx.uses
    assert detect({}).kind == "local"  # an explicit environment describes some other process


def test_pyspark_is_never_imported_to_look():
    code = ("import sys; from hvdkit.runtime.environments import detect; detect(); from hvdkit.tools import doctor; "
            "doctor._spark(doctor.Report()); print('pyspark' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "False", out.stderr


def test_doctor_reports_the_spark_extra_and_what_it_lacks(monkeypatch):
    versions = {"pyspark": "4.3.0", "pyarrow": None, "pandas": "2.3.3"}
    monkeypatch.setattr(doctor, "_version", lambda dist: versions.get(dist))
    monkeypatch.setattr(doctor.shutil, "which", lambda name: None)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    r = doctor.Report()
    doctor._spark(r)
    assert r.facts["spark"] == {"pyspark": "4.3.0", "pyarrow": None, "pandas": "2.3.3", "java": None}
    problems = " | ".join(p for p, _ in r.problems)
    assert "not pyarrow" in problems and "no Java" in problems
    assert any("hvdkit[spark]" in fix for _, fix in r.problems)
    versions["pyspark"] = None
    r = doctor.Report()
    doctor._spark(r)
    assert r.facts["spark"] is None and not r.problems


GUARDED = """
import horovod.spark
from pyspark.sql import SparkSession

def main():
    horovod.spark.run(train, num_proc=2)     # inside a function: runs only when called

if __name__ == "__main__":
    SparkSession.builder.getOrCreate()
    horovod.spark.run(train, num_proc=2)
    main()
"""


@pytest.mark.parametrize("source, lines", [
    (GUARDED, []),
    ("import horovod.spark\nhorovod.spark.run(train, num_proc=2)\n", [2]),
    ("from horovod.spark import run as go\nimport subprocess\nsubprocess.run(['ls'])\ngo(train)\n", [4]),
    ("from horovod import spark as hs\nif True:\n    hs.run_elastic(train)\n", [3]),
    ("import hvdkit.integrations.spark\nresult = [hvdkit.integrations.spark.run(train)]\n", [2]),
    # the deprecated path is still a run function
    ("import hvdkit.spark\nif __name__ != '__main__':\n    pass\nelse:\n    hvdkit.spark.run(train)\n", [5]),
    ("import horovod.spark\nif __name__ == '__main__':\n    pass\nelse:\n    horovod.spark.run(train)\n", [5]),
    # the usual script: main() calls the run, through another function; a bare main() call starts it
    ("from hvdkit.integrations import spark\ndef go():\n    spark.run(train)\ndef main():\n    go()\ndef other():\n"
     "    pass\nother()\nmain()\n", [9]),
    # a module-level lambda that reaches the run, called bare
    ("import hvdkit.spark\nstart = lambda: hvdkit.spark.run(train)\nstart()\n", [3]),
    # the run assigned to another name, or a function that reaches it
    ("import hvdkit.spark\ngo = hvdkit.spark.run\ngo(train)\n", [3]),
    ("import hvdkit.spark\ndef main():\n    hvdkit.spark.run(train)\nentry = main\nentry()\n", [5]),
    # functools.partial of the run, called later or at once
    ("import functools\nimport hvdkit.spark\ngo = functools.partial(hvdkit.spark.run, train, num_proc=2)\ngo()\n",
     [4]),
    ("from functools import partial\nimport horovod.spark\npartial(horovod.spark.run, train)()\n", [3]),
    # a class's method (through self, a static method, an instance made at module level, a constructor)
    ("import hvdkit.spark\nclass Driver:\n    def start(self):\n        self.go()\n    def go(self):\n"
     "        hvdkit.spark.run(train)\nDriver().start()\nd = Driver()\nd.start()\n", [7, 9]),
    ("import hvdkit.spark\nclass Driver:\n    @staticmethod\n    def go():\n        hvdkit.spark.run(train)\n"
     "Driver.go()\n", [6]),
    ("import hvdkit.spark\nclass Driver:\n    def __init__(self):\n        hvdkit.spark.run(train)\n"
     "Driver()\n", [5]),
    # none of these start it: a method that does not reach the run, a lambda never called
    ("import hvdkit.spark\nclass Driver:\n    def start(self):\n        hvdkit.spark.run(train)\n"
     "    def other(self):\n        pass\nDriver().other()\nstart = lambda: hvdkit.spark.run(train)\n", []),
])
def test_unguarded_run_calls_finds_module_level_runs_under_any_alias(source, lines):
    assert hk_spark.unguarded_run_calls(source) == lines


def test_check_main_guard_names_the_script_and_line(tmp_path):
    script = tmp_path / "driver.py"
    script.write_text("import horovod.spark\n\nhorovod.spark.run(print, num_proc=2)\n")
    with pytest.raises(RuntimeError, match=rf"module level \({script}:3\).*if __name__ == \"__main__\""):
        hk_spark.check_main_guard(types.SimpleNamespace(__file__=str(script)))
    script.write_text(GUARDED)
    hk_spark.check_main_guard(types.SimpleNamespace(__file__=str(script)))
    hk_spark.check_main_guard(types.SimpleNamespace())  # python -c, notebooks: nothing to re-import


@pytest.mark.parametrize("kwargs, message", [
    ({"num_proc": 0}, "num_proc must be a positive int.*got 0"),
    ({"num_proc": "2"}, "num_proc must be a positive int.*got '2'"),
    ({"num_proc": True}, "num_proc must be a positive int.*got True"),
    ({"use_mpi": True, "use_gloo": True}, "choose one controller"),
])
def test_run_refuses_bad_input_before_spark(kwargs, message):
    with pytest.raises(ValueError, match=message):
        hk_spark.run(print, **kwargs)


def test_run_refuses_what_is_not_a_function():
    with pytest.raises(TypeError, match=r"fn must be a function.*got 3"):
        hk_spark.run(3)


def test_run_needs_an_active_spark_context():
    pyspark = pytest.importorskip("pyspark") if os.environ.get("CI") != "true" else __import__("pyspark")
    if pyspark.SparkContext._active_spark_context is not None:
        pytest.skip("a SparkContext is active in this process")
    with pytest.raises(RuntimeError, match="no active SparkContext"):
        hk_spark.run(print, num_proc=2)


def test_the_first_traceback_of_the_ranks_stderr_is_kept_for_the_exception():
    import io

    target = io.StringIO()
    tail = hk_spark._Tail(target, lines=50)
    tail.write("warming up\nTraceback (most recent call last):\n  File \"train.py\", line 3\n")
    tail.write(b"RuntimeError: rank 1 failed on purpose\nTraceback (most recent call last):\n")
    tail.write("ConnectionResetError: rank 0 lost its peer")  # no newline yet: still kept
    tail.close()  # Horovod closes the streams it is given; the target stays open
    assert not target.closed and target.getvalue().startswith("warming up\nTraceback")
    assert tail.first_error() == ('Traceback (most recent call last):\n  File "train.py", line 3\n'
                                  "RuntimeError: rank 1 failed on purpose")
    assert hk_spark._Tail(io.StringIO()).first_error() is None


def test_the_failing_ranks_traceback_wins_over_horovods_shutdown_on_the_others():
    """Rank 0 may print first, but only because rank 1 failed: the cause is rank 1's error."""
    import io

    tail = hk_spark._Tail(io.StringIO(), lines=50)
    tail.write("[0]<stderr>:Traceback (most recent call last):\n[0]<stderr>:  File \"mpi_ops.py\", line 9\n"
               "[0]<stderr>:RuntimeError: Horovod has been shut down. This was caused by an exception\n[0]<stderr>:\n"
               "[0]<stderr>:During handling of the above exception, another exception occurred:\n[0]<stderr>:\n"
               "[1]<stderr>:Traceback (most recent call last):\n"
               "[0]<stderr>:Traceback (most recent call last):\n"
               "[1]<stderr>:  File \"train.py\", line 3\n"
               "[0]<stderr>:horovod.common.exceptions.HorovodInternalError: Horovod has been shut down\n"
               "[1]<stderr>:RuntimeError: rank 1 failed on purpose\n")
    assert tail.first_error() == ('[1]<stderr>:Traceback (most recent call last):\n[1]<stderr>:  File "train.py", '
                                  'line 3\n[1]<stderr>:RuntimeError: rank 1 failed on purpose')


def test_run_checks_the_main_guard_with_mpi_only_and_passes_the_rest_to_horovod(tmp_path, monkeypatch):
    pyspark = pytest.importorskip("pyspark") if os.environ.get("CI") != "true" else __import__("pyspark")
    horovod_spark = pytest.importorskip("horovod.spark")
    script = tmp_path / "driver.py"
    script.write_text("import hvdkit.integrations.spark\nhvdkit.spark.run(print, num_proc=2)\n")
    monkeypatch.setitem(sys.modules, "__main__", types.SimpleNamespace(__file__=str(script)))
    monkeypatch.setattr(pyspark.SparkContext, "_active_spark_context",
                        types.SimpleNamespace(master="local[2]", defaultParallelism=2))
    calls = []
    monkeypatch.setattr(horovod_spark, "run", lambda fn, **kw: calls.append(kw) or ["rank 0", "rank 1"])
    with pytest.raises(RuntimeError, match=rf"module level \({script}:2\)"):
        hk_spark.run(print, num_proc=2, use_mpi=True)
    with pytest.raises(ValueError, match=r"num_proc=3 is more than the 2 task\(s\)"):
        hk_spark.run(print, num_proc=3, use_gloo=True)
    assert not calls
    assert hk_spark.run(print, args=[1], num_proc=2, use_gloo=True, start_timeout=30) == ["rank 0", "rank 1"]
    assert calls[0]["args"] == (1,) and calls[0]["use_gloo"] is True and calls[0]["start_timeout"] == 30
