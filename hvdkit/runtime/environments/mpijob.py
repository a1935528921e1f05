"""Kubeflow MPI Operator (``MPIJob``, kubeflow.org/v2beta1): the launcher's view of its job.

The operator mounts ``hostfile`` (``<job>-worker-<i>.<job>.<ns>.svc slots=N`` per worker) and, for
elastic jobs, ``discover_hosts.sh`` at ``/etc/mpi``, and sets ``K_MPI_JOB_ROLE`` and
``OMPI_MCA_orte_default_hostfile`` (operator v0.8.2), so ``mpirun`` needs no host list.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

CONFIG_DIR = "/etc/mpi"
HOSTFILE = f"{CONFIG_DIR}/hostfile"
DISCOVER_HOSTS = f"{CONFIG_DIR}/discover_hosts.sh"


def hostfile_path(env: Mapping[str, str]) -> str | None:
    """The MPIJob hostfile this process sees, or None outside an MPIJob launcher."""
    path = env.get("OMPI_MCA_orte_default_hostfile") or HOSTFILE
    return path if os.path.isfile(path) else None


def read_hostfile(path: str) -> list[tuple[str, int]]:
    """``(host, slots)`` per line of an Open MPI hostfile (``host slots=N``; ``host:N`` for Intel/MPICH)."""
    hosts = []
    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            fields = line.split()
            host, slots = fields[0], 1
            if ":" in host:
                host, _, n = host.partition(":")
                slots = int(n)
            for opt in fields[1:]:
                key, _, value = opt.partition("=")
                if key == "slots":
                    if not value.isdigit():
                        raise ValueError(f"{path}:{number}: slots must be an integer, got {value!r}")
                    slots = int(value)
            hosts.append((host, slots))
    return hosts


def describe(env: Mapping[str, str], path: str) -> str:
    """One line about the MPIJob, for ``hvdkit doctor``."""
    hosts = read_hostfile(path)
    role = env.get("K_MPI_JOB_ROLE", "launcher")
    total = sum(n for _, n in hosts)
    names = ", ".join(h for h, _ in hosts[:3]) + (", ..." if len(hosts) > 3 else "")
    elastic = " (elastic: discover_hosts.sh present)" if os.path.isfile(os.path.join(os.path.dirname(path),
                                                                                       "discover_hosts.sh")) else ""
    return f"MPIJob {role}: hostfile {path}, {len(hosts)} worker(s), {total} slot(s): {names}{elastic}"
