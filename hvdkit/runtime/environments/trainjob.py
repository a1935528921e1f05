"""Kubeflow Trainer v2 (``TrainJob`` on an MPI runtime, trainer.kubeflow.org/v1alpha1): the launcher's view.

The Trainer's MPI plugin (v2.3.0) mounts ``/etc/mpi/hostfile`` in the launcher, one line per pod that runs
ranks, named as the JobSet names its pods: ``<trainjob>-node-0-<i>.<trainjob> slots=N`` (and
``<trainjob>-launcher-0-0.<trainjob>`` with ``runLauncherAsNode``), and sets ``OMPI_MCA_orte_default_hostfile``;
unlike the MPI Operator it sets no ``K_MPI_JOB_ROLE``. Those two differences tell a TrainJob from an MPIJob.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from hvdkit.runtime.environments import mpijob

_POD = re.compile(r"(?P<job>[a-z0-9][-a-z0-9]*)-(?P<rjob>node|launcher)-\d+-\d+\.[a-z0-9][-a-z0-9]*")
USES = "`mpirun` reads {hostfile} (no -H); no elastic mode (Trainer v2.2 removed ElasticPolicy)"


def job_name(env: Mapping[str, str], hostfile: str) -> str | None:
    """The TrainJob whose launcher this is, or None (an MPIJob's launcher, or another hostfile)."""
    if "K_MPI_JOB_ROLE" in env:
        return None
    matches = [_POD.fullmatch(host) for host, _ in mpijob.read_hostfile(hostfile)]
    names = {m["job"] for m in matches if m}
    return names.pop() if matches and all(matches) and len(names) == 1 else None


def describe(hostfile: str, name: str) -> str:
    """One line about the TrainJob, for ``hvdkit doctor``."""
    hosts = mpijob.read_hostfile(hostfile)
    total = sum(n for _, n in hosts)
    names = ", ".join(h for h, _ in hosts[:3]) + (", ..." if len(hosts) > 3 else "")
    roles = {m["rjob"] for h, _ in hosts if (m := _POD.fullmatch(h))}
    trains = " (runLauncherAsNode: the launcher trains too)" if "launcher" in roles else ""
    return (f"Kubeflow Trainer v2 TrainJob {name} launcher: hostfile {hostfile}, {len(hosts)} node(s), "
            f"{total} slot(s): {names}{trains}")
