"""Which launcher started this process, and what hvdkit does with it.

One module per cluster launcher (:mod:`.slurm`, :mod:`.mpijob`, :mod:`.spark`, :mod:`.ray`). :func:`detect`
names the context for ``hvdkit doctor``; :func:`prepare_process` is what the adapters' ``init()`` call
before ``hvd.init()``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping
from dataclasses import dataclass

from hvdkit.runtime import gloo
from hvdkit.runtime.environments import mpijob, ray, slurm, spark, trainjob

_MPI_RANK_VARS = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK")


@dataclass(frozen=True)
class LauncherContext:
    """What started this process (``kind``), in words (``detail``), and what hvdkit will use."""
    kind: str  # local | horovodrun | mpi | slurm-allocation | slurm-step | slurm-gloo | mpijob | spark | spark-task
    #            | spark-driver | trainjob | ray | ray-driver
    detail: str
    uses: str
    problem: str | None = None  # set when this process cannot train as launched


def _env(environ: MutableMapping[str, str] | None) -> MutableMapping[str, str]:
    return os.environ if environ is None else environ


def detect(environ: MutableMapping[str, str] | None = None, cores: int = 1) -> LauncherContext:
    """The launcher context of this process (nothing is changed)."""
    env = _env(environ)
    if spark.in_horovod_run(env):  # before horovodrun and mpi: Spark's ranks have their variables too
        controller = "Gloo" if "HOROVOD_RANK" in env else "MPI"
        return LauncherContext("spark", spark.describe(env),
                               f"Horovod's {controller} controller, as horovod.spark.run set it up")
    if ray.in_train_worker(env):  # before horovodrun: the backend set Horovod's variables too
        return LauncherContext("ray", ray.describe(env),
                               "Horovod's Gloo controller, as hvdkit.integrations.ray's backend set it up")
    if "HOROVOD_RANK" in env and "HOROVOD_HOSTNAME" in env:
        elastic = ", elastic" if env.get("HOROVOD_ELASTIC") == "1" else ""
        detail = (f"Horovod launcher (Gloo{elastic}): rank {env.get('HOROVOD_RANK')} of {env.get('HOROVOD_SIZE')} on "
                  f"{env.get('HOROVOD_HOSTNAME')}, rendezvous {env.get('HOROVOD_GLOO_RENDEZVOUS_ADDR')}:"
                  f"{env.get('HOROVOD_GLOO_RENDEZVOUS_PORT')}")
        return LauncherContext("horovodrun", detail, "Horovod's Gloo controller, as set")
    mpi_var = next((v for v in _MPI_RANK_VARS if v in env), None)
    if mpi_var:
        how = "srun --mpi=pmix (direct launch)" if slurm.in_step(env) and mpi_var == "PMIX_RANK" and \
            "OMPI_COMM_WORLD_RANK" not in env else "mpirun"
        where = f", inside {slurm.describe(env)}" if slurm.in_allocation(env) else ""
        return LauncherContext("mpi", f"MPI rank {env[mpi_var]} started by {how}{where}",
                               "Horovod's MPI controller: rank, local rank and size from MPI")
    if slurm.in_step(env):
        if "HOROVOD_GLOO_RENDEZVOUS_ADDR" in env:
            return LauncherContext("slurm-gloo", slurm.describe(env),
                                   "Horovod's Gloo controller: HOROVOD_* from SLURM_PROCID/LOCALID/STEP_NODELIST, "
                                   f"rendezvous {env['HOROVOD_GLOO_RENDEZVOUS_ADDR']}:"
                                   f"{env.get('HOROVOD_GLOO_RENDEZVOUS_PORT')}")
        tasks = int(env.get("SLURM_STEP_NUM_TASKS", "1"))
        problem = None if tasks == 1 else (
            f"srun started {tasks} tasks but nothing connects them (no MPI/PMIx variables, no Gloo rendezvous): "
            "each would train alone. Use `srun --mpi=pmix ...` for MPI, or `hvdkit slurm-gloo ...` for Gloo")
        return LauncherContext("slurm-step", slurm.describe(env), "a single process (this step has no wire-up)",
                               problem)
    if slurm.in_allocation(env):
        mpi = ("`srun --mpi=pmix python train.py` (MPI, direct launch)" if "pmix" in slurm.mpi_plugins()
               else "`mpirun python train.py` (this Slurm has no PMIx plugin: Open MPI reads the allocation)")
        return LauncherContext("slurm-allocation", slurm.describe(env),
                               f"{mpi} or `hvdkit slurm-gloo python train.py` (Gloo, no MPI); no host list")
    hostfile = mpijob.hostfile_path(env)
    if hostfile and (name := trainjob.job_name(env, hostfile)):
        return LauncherContext("trainjob", trainjob.describe(hostfile, name), trainjob.USES.format(hostfile=hostfile))
    if hostfile:
        return LauncherContext("mpijob", mpijob.describe(env, hostfile),
                               f"`mpirun` reads {hostfile} (no -H); elastic: horovodrun --host-discovery-script "
                               f"{mpijob.DISCOVER_HOSTS}")
    # A Spark task or driver is this process's state, not its environment: asked only about this process.
    task = spark.task_context() if environ is None else None
    if task is not None:
        return LauncherContext("spark-task", spark.describe_task(task),
                               "one process: start ranks with horovod.spark.run(fn, num_proc=N) from the driver")
    driver = spark.active_driver() if environ is None else None
    if driver is not None:
        return LauncherContext("spark-driver", spark.describe_driver(driver),
                               "one process here; hvdkit.integrations.spark.run(fn, num_proc=N) trains in N "
                               "Spark tasks")
    if "RAY_ADDRESS" in env:
        return LauncherContext("ray-driver", ray.describe(env),
                               "one process here; hvdkit.integrations.ray.HorovodTrainer(train, "
                               "scaling_config=ScalingConfig(num_workers=N)).fit() trains on N Ray workers")
    return LauncherContext("local", f"no launcher: one process on this machine ({cores} core(s))",
                           "one process, or `horovodrun -np N -H localhost:N` for N on this machine",
                           _stray_rank(env))


def _stray_rank(env: MutableMapping[str, str]) -> str | None:
    """Why a process no launcher started cannot train as the rank its HOROVOD_RANK/SIZE name: Horovod
    ignores them without a rendezvous and trains alone, as rank 0 of 1."""
    rank, size = env.get("HOROVOD_RANK", "0").strip(), env.get("HOROVOD_SIZE", "1").strip()
    if (rank, size) == ("0", "1"):
        return None
    named = " and ".join(f"{v}={env[v]}" for v in ("HOROVOD_RANK", "HOROVOD_SIZE") if v in env)
    return (f"{named} set, but no launcher started this process (no HOROVOD_HOSTNAME and Gloo rendezvous from "
            "horovodrun, no MPI rank): Horovod would ignore them and train alone as rank 0 of 1. Start it with "
            f"`horovodrun -np N ...`, or unset {' and '.join(v for v in ('HOROVOD_RANK', 'HOROVOD_SIZE') if v in env)}")


def prepare_process(environ: MutableMapping[str, str] | None = None) -> LauncherContext:
    """Before ``hvd.init()``: under ``hvdkit slurm-gloo`` map ``SLURM_*`` to Horovod's Gloo variables;
    refuse an ``srun`` step of several tasks that nothing wires together. Returns the context."""
    env = _env(environ)
    ctx = detect(env)
    if ctx.kind == "slurm-gloo" and "HOROVOD_RANK" not in env:
        slot = slurm.step_slot(env)
        expected = env.get("HVDKIT_GLOO_PLAN")
        actual = gloo.summary(slurm.step_plan(env))
        if expected and expected != actual:
            raise RuntimeError(f"this srun step runs tasks {actual} but the Gloo rendezvous was sized for "
                               f"{expected}: start it through `hvdkit slurm-gloo` without task options")
        env.update(gloo.gloo_env(slot))
    elif ctx.problem:
        raise RuntimeError(ctx.problem)
    if ctx.kind == "mpi" and environ is None:
        whole_lines()
    return ctx


def whole_lines() -> None:
    """Write stdout and stderr a line at a time. mpirun's ``--tag-output`` (horovodrun's) tags every
    write it reads, so unbuffered streams (``PYTHONUNBUFFERED``, ``python -u``: ``print`` writes the text
    and its newline apart) left a dangling ``[1,0]<stdout>:`` at the end of lines."""
    for stream in (sys.stdout, sys.stderr):
        if getattr(stream, "write_through", False) and hasattr(stream, "reconfigure"):
            stream.reconfigure(line_buffering=True, write_through=False)


__all__ = ["LauncherContext", "detect", "prepare_process"]
