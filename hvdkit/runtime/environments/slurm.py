"""Slurm: what an allocation and a job step say about this process, in Horovod's terms.

A step's ``SLURM_PROCID``, ``SLURM_LOCALID``, ``SLURM_STEP_NODELIST`` and ``SLURM_STEP_TASKS_PER_NODE``
become Horovod's Gloo variables through :mod:`hvdkit.runtime.gloo`'s slot plan, which the ranks and the
rendezvous (:mod:`hvdkit.tools.slurm_gloo`) share.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping

from hvdkit.core.imports import require
from hvdkit.runtime.gloo import Slot, host_plan


def expand_hostlist(hostlist: str) -> list[str]:
    """Slurm's compressed host list (``node[1-2,05],gpu-a``) as names, in order (python-hostlist reads it)."""
    require("hostlist", extra="slurm")  # on use: only Slurm jobs need it
    import hostlist as _hostlist

    try:
        return _hostlist.expand_hostlist(hostlist, allow_duplicates=True)
    except _hostlist.BadHostlist as e:
        raise ValueError(f"Slurm host list {hostlist!r}: {e} (`scontrol show hostnames` prints the names)") from e


def expand_tasks_per_node(spec: str, variable: str = "SLURM_TASKS_PER_NODE") -> list[int]:
    """Slurm's per-node task counts (``2(x3),1``) as a list (``[2, 2, 2, 1]``), each at least 1."""
    require("hostlist", extra="slurm")
    import hostlist as _hostlist

    try:
        counts = _hostlist.parse_slurm_tasks_per_node(spec)
    except _hostlist.BadHostlist as e:
        raise ValueError(f"Slurm tasks per node {spec!r}: cannot read it ({e})") from e
    if not counts or min(counts) < 1:  # srun --ntasks=0 would start nothing and wait
        raise ValueError(f"{variable} must give every node at least 1 task, got {spec!r}")
    return counts


def _required(env: Mapping[str, str], name: str) -> str:
    if not env.get(name):
        raise ValueError(f"{name} is not set: Slurm sets it in every job; run this from an sbatch script or an "
                         "salloc shell (or srun step) of the allocation")
    return env[name]


def in_step(env: Mapping[str, str]) -> bool:
    """True in a task that ``srun`` started (not in the batch script itself)."""
    return "SLURM_STEP_ID" in env and "SLURM_PROCID" in env and "SLURM_STEP_NUM_TASKS" in env


def in_allocation(env: Mapping[str, str]) -> bool:
    """True anywhere inside a Slurm job (batch script, salloc shell or step)."""
    return "SLURM_JOB_ID" in env


def allocation_plan(env: Mapping[str, str]) -> list[Slot]:
    """The plan of the whole allocation (what ``srun`` with no task options starts)."""
    hosts = expand_hostlist(_required(env, "SLURM_JOB_NODELIST"))
    return host_plan(hosts, expand_tasks_per_node(_required(env, "SLURM_TASKS_PER_NODE")))


def step_plan(env: Mapping[str, str]) -> list[Slot]:
    """The plan of this task's step."""
    hosts = expand_hostlist(_required(env, "SLURM_STEP_NODELIST"))
    return host_plan(hosts, expand_tasks_per_node(_required(env, "SLURM_STEP_TASKS_PER_NODE"),
                                                  "SLURM_STEP_TASKS_PER_NODE"))


def step_slot(env: Mapping[str, str]) -> Slot:
    """This task's slot in its step, checked against what Slurm says about it."""
    plan = step_plan(env)
    rank = int(env["SLURM_PROCID"])
    slot = plan[rank]
    node = env.get("SLURMD_NODENAME", slot.hostname)
    if (slot.hostname, slot.local_rank) != (node, int(env.get("SLURM_LOCALID", slot.local_rank))):
        raise RuntimeError(
            f"Slurm placed task {rank} as local task {env.get('SLURM_LOCALID')} on {node}, not block-wise "
            f"(expected local task {slot.local_rank} on {slot.hostname}): start the step with "
            "srun --distribution=block (hvdkit slurm-gloo does)")
    return slot


def describe(env: Mapping[str, str]) -> str:
    """One line about the allocation/step, for ``hvdkit doctor``."""
    where = f"job {env.get('SLURM_JOB_ID')}"
    nodes = env.get("SLURM_JOB_NODELIST", "?")
    tasks = env.get("SLURM_TASKS_PER_NODE", "?")
    if in_step(env):
        return (f"Slurm step {env.get('SLURM_STEP_ID')} of {where}: task {env['SLURM_PROCID']} of "
                f"{env['SLURM_STEP_NUM_TASKS']} on {env.get('SLURMD_NODENAME', '?')} (nodes {nodes})")
    return f"Slurm allocation, {where}: nodes {nodes}, tasks per node {tasks}"


def mpi_plugins() -> list[str]:
    """The MPI plugins of this Slurm (``srun --mpi=list``), or [] without srun."""
    srun = shutil.which("srun")
    if srun is None:
        return []
    try:
        out = subprocess.run([srun, "--mpi=list"], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    text = out.stdout + out.stderr
    return re.findall(r"^\s+(?:srun: )?(\w+)\s*$", text, flags=re.M)
