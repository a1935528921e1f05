"""Slurm: what an allocation and a job step say about this process, in Horovod's terms.

A step's ``SLURM_PROCID``, ``SLURM_LOCALID``, ``SLURM_STEP_NODELIST`` and ``SLURM_STEP_TASKS_PER_NODE``
become Horovod's Gloo variables; the ranks and the rendezvous (:mod:`hvdkit.runtime.slurm_gloo`) share
one :func:`host_plan`, host by host as ``horovodrun`` and srun's block distribution order them.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Slot:
    """One rank's place in a job, with the fields of Horovod's ``SlotInfo``."""
    hostname: str
    rank: int
    local_rank: int
    cross_rank: int
    size: int
    local_size: int
    cross_size: int


def expand_hostlist(hostlist: str) -> list[str]:
    """Slurm's compressed host list (``node[1-2,05],gpu-a``) as names, in order (python-hostlist reads it)."""
    import hostlist as _hostlist  # on use: only Slurm jobs need it

    try:
        return _hostlist.expand_hostlist(hostlist, allow_duplicates=True)
    except _hostlist.BadHostlist as e:
        raise ValueError(f"Slurm host list {hostlist!r}: {e} (`scontrol show hostnames` prints the names)") from e


def expand_tasks_per_node(spec: str, variable: str = "SLURM_TASKS_PER_NODE") -> list[int]:
    """Slurm's per-node task counts (``2(x3),1``) as a list (``[2, 2, 2, 1]``), each at least 1."""
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


def host_plan(hosts: list[str], tasks_per_host: list[int]) -> list[Slot]:
    """Every rank's slot: ranks host by host; cross rank = index among hosts with that local rank."""
    if len(hosts) != len(tasks_per_host):
        raise ValueError(f"{len(hosts)} hosts but task counts for {len(tasks_per_host)}: {hosts} / {tasks_per_host}")
    size = sum(tasks_per_host)
    slots = []
    rank = 0
    for h, (host, n) in enumerate(zip(hosts, tasks_per_host)):
        for local_rank in range(n):
            with_rank = [i for i, m in enumerate(tasks_per_host) if m > local_rank]
            slots.append(Slot(host, rank, local_rank, with_rank.index(h), size, n, len(with_rank)))
            rank += 1
    return slots


def summary(plan: list[Slot]) -> str:
    """``host:ranks,...`` in host order: what the rendezvous was sized for, checked again by each task."""
    return ",".join(f"{s.hostname}:{s.local_size}" for s in plan if s.local_rank == 0)


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


def gloo_env(slot: Slot) -> dict[str, str]:
    """Horovod's per-rank Gloo variables for ``slot`` (the contract of horovod.runner.gloo_run)."""
    return {
        "HOROVOD_HOSTNAME": slot.hostname,
        "HOROVOD_RANK": str(slot.rank),
        "HOROVOD_SIZE": str(slot.size),
        "HOROVOD_LOCAL_RANK": str(slot.local_rank),
        "HOROVOD_LOCAL_SIZE": str(slot.local_size),
        "HOROVOD_CROSS_RANK": str(slot.cross_rank),
        "HOROVOD_CROSS_SIZE": str(slot.cross_size),
        "HOROVOD_CONTROLLER": "gloo",
        "HOROVOD_CPU_OPERATIONS": "gloo",
    }


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
