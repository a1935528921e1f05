"""Horovod's Gloo slots: which rank runs where, and the variables each rank's process needs.

Every launcher that starts Gloo ranks without ``horovodrun`` (Slurm's ``srun``, Ray's workers) plans its
ranks here, host by host in the order ``horovodrun`` and srun's block distribution use.
"""

from __future__ import annotations

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
