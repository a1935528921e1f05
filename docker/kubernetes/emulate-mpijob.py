#!/usr/bin/env python3
"""Run an hvdkit MPIJob manifest the way the Kubeflow MPI Operator (v2beta1) runs it, without Kubernetes.

    sudo python docker/kubernetes/emulate-mpijob.py docker/kubernetes/mpijob.yaml \
        --replace /data/checkpoints=/tmp/ckpt --replace '"12"=2'

What the operator does (pkg/controller/mpi_job_controller.go, v0.8.2), which emulate_pods.py then runs
in network namespaces:
- one Pod per replica, host name <job>-launcher / <job>-worker-<i>, DNS <pod>.<job>.<namespace>.svc;
- a Secret <job>-ssh (ECDSA P-521 key, PEM: id_rsa, id_rsa.pub, authorized_keys) mounted at
  spec.sshAuthMountPath in every pod (mode 0600 here, as for /root/.ssh);
- a ConfigMap <job>-config at /etc/mpi in the launcher: hostfile ("<pod>.<job>.<ns>.svc slots=N")
  and discover_hosts.sh ("echo <pod>.<job>.<ns>.svc" per running worker);
- the manifest's own ConfigMaps (docker/kubernetes/config) at their volumeMounts;
- the launcher's environment: K_MPI_JOB_ROLE, OMPI_MCA_orte_keep_fqdn_hostnames, OMPI_MCA_orte_default_hostfile,
  OMPI_MCA_plm_rsh_args, OMPI_MCA_orte_set_default_slots, NVIDIA_VISIBLE_DEVICES/NVIDIA_DRIVER_CAPABILITIES="";
- workers' containers run their manifest command (sshd -De); the launcher starts once every worker's
  port 22 listens (launcherCreationPolicy WaitForWorkersReady / the readinessProbe) and runs its command.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml
from emulate_pods import KEY_FILES, Plan, Pod, add_arguments, config_maps, run


def plan(job: dict, namespace: str, workers: int | None) -> Plan:
    name, spec = job["metadata"]["name"], job["spec"]
    slots = int(spec.get("slotsPerWorker", 1))
    count = workers if workers is not None else int(spec["mpiReplicaSpecs"]["Worker"].get("replicas", 0))
    names = [f"{name}-worker-{i}" for i in range(count)]

    def pod(host: str, role: str) -> Pod:
        pspec = spec["mpiReplicaSpecs"][role]["template"]["spec"]
        fqdn = f"{host}.{name}.{namespace}.svc"
        return Pod(host, [fqdn, f"{fqdn}.cluster.local"], pspec["containers"][0],
                   {v["name"]: v for v in pspec.get("volumes", [])}, sshd=role == "Worker",
                   env={"K_MPI_JOB_ROLE": role.lower()})

    launcher = pod(f"{name}-launcher", "Launcher")
    fqdns = [f"{w}.{name}.{namespace}.svc" for w in names]
    launcher.files = {"mpi/hostfile": ("".join(f"{h} slots={slots}\n" for h in fqdns), 0o444),
                      "mpi/discover_hosts.sh": ("#!/bin/sh\n" + "".join(f"echo {h}\n" for h in fqdns), 0o555)}
    launcher.env.update({"OMPI_MCA_orte_keep_fqdn_hostnames": "true",
                         "OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile",
                         "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
                         "OMPI_MCA_orte_set_default_slots": str(slots),
                         "NVIDIA_VISIBLE_DEVICES": "", "NVIDIA_DRIVER_CAPABILITIES": ""})
    return Plan("emulate-mpijob", launcher, [pod(w, "Worker") for w in names],
                spec.get("sshAuthMountPath", "/root/.ssh"), dict.fromkeys(KEY_FILES, 0o600), config_maps())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(p)
    p.add_argument("--workers", type=int, help="worker replicas (default: the manifest's)")
    a = p.parse_args()
    manifest: Path = a.manifest
    job = next(d for d in yaml.safe_load_all(manifest.read_text()) if d and d.get("kind") == "MPIJob")
    return run(plan(job, a.namespace, a.workers), a)


if __name__ == "__main__":
    sys.exit(main())
