"""Apache Spark: a rank that ``horovod.spark.run`` started, a Spark task, or a Spark driver.

A rank of ``horovod.spark.run`` has ``HOROVOD_SPARK_WORK_DIR``, which Horovod sets for no other
launcher (horovod/spark/task/task_service.py). A Spark task and a driver are recognised through
pyspark only where the process already imported it (``hvdkit doctor`` must not start a JVM).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

WORK_DIR_VAR = "HOROVOD_SPARK_WORK_DIR"


def in_horovod_run(env: Mapping[str, str]) -> bool:
    """True in a training process that ``horovod.spark.run`` started."""
    return WORK_DIR_VAR in env


def _pyspark() -> Any:
    return sys.modules.get("pyspark")  # never imported here: only a process that uses Spark has it


def task_context() -> Any:
    """pyspark's ``TaskContext`` when this process runs a Spark task, else None."""
    pyspark = _pyspark()
    return pyspark.TaskContext.get() if pyspark is not None else None


def active_driver() -> Any:
    """The active ``SparkContext`` of this process (a Spark driver), else None."""
    pyspark = _pyspark()
    return pyspark.SparkContext._active_spark_context if pyspark is not None else None


def describe(env: Mapping[str, str]) -> str:
    """One line about a rank that ``horovod.spark.run`` started, for ``hvdkit doctor``."""
    if "HOROVOD_RANK" in env:
        how, rank, size = "Gloo", env["HOROVOD_RANK"], env.get("HOROVOD_SIZE", "?")
    else:
        how, rank, size = "MPI", env.get("OMPI_COMM_WORLD_RANK", "?"), env.get("OMPI_COMM_WORLD_SIZE", "?")
    return f"horovod.spark.run ({how}): rank {rank} of {size}, Spark task working directory {env[WORK_DIR_VAR]}"


def describe_task(ctx: Any) -> str:
    """One line about the Spark task ``ctx`` (a ``TaskContext``)."""
    return (f"Spark task: stage {ctx.stageId()}, partition {ctx.partitionId()}, attempt {ctx.attemptNumber()} "
            "(not a Horovod rank)")


def describe_driver(sc: Any) -> str:
    """One line about the Spark driver ``sc`` (a ``SparkContext``)."""
    return f"Spark driver: master {sc.master}, application {sc.appName!r}, default parallelism {sc.defaultParallelism}"
