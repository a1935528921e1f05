"""Ray: a Horovod rank that ``hvdkit.integrations.ray`` wired on a Ray Train worker, or a process pointed at a
Ray cluster.

The backend of :mod:`hvdkit.integrations.ray` sets ``HVDKIT_RAY_WORKER`` (``rank/size``) beside Horovod's
variables, so a
rank is told apart from one ``horovodrun`` started. ``RAY_ADDRESS`` is how Ray names the cluster to a driver
(``ray job submit`` sets it; users export it). Ray is never imported here.
"""

from __future__ import annotations

from collections.abc import Mapping

WORKER_VAR = "HVDKIT_RAY_WORKER"  # hvdkit.integrations.ray.backend sets it


def in_train_worker(env: Mapping[str, str]) -> bool:
    """True in a Ray Train worker that hvdkit's backend made a Horovod rank."""
    return WORKER_VAR in env


def describe(env: Mapping[str, str]) -> str:
    """One line about the Ray worker or the cluster, for ``hvdkit doctor``."""
    if in_train_worker(env):
        rank, _, size = env[WORKER_VAR].partition("/")
        return (f"Ray Train worker (hvdkit.integrations.ray.HorovodTrainer): Horovod rank {rank} of {size}, Ray node "
                f"{env.get('HOROVOD_HOSTNAME', '?')[:12]}")
    return f"Ray cluster at {env['RAY_ADDRESS']} (RAY_ADDRESS)"
