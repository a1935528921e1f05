#!/usr/bin/env python3
"""Run an hvdkit TrainJob the way Kubeflow Trainer v2 (v2.3.0, an MPI runtime) runs it, without Kubernetes.

    sudo python docker/kubernetes/emulate-trainjob.py docker/kubernetes/trainer/trainjob.yaml \
        --replace /data/checkpoints=/tmp/ckpt --replace '"12"=2'

The TrainJob's runtime (spec.runtimeRef) is looked up among the manifests under docker/kubernetes/. What
the Trainer does (pkg/runtime/framework/plugins/{mpi,jobset}, pkg/runtime/core/trainingruntime.go), which
emulate_pods.py then runs in network namespaces:
- the runtime's JobSet with the TrainJob's runtimePatches (volumes, volumeMounts) merged in; the
  "trainer" ancestor job (the launcher) gets the TrainJob's image, command, args; its env goes there and,
  with runLauncherAsNode, to the node job too;
- numNodes pods run ranks: the node job gets numNodes pods (numNodes-1 with runLauncherAsNode, the launcher
  being one), host names <tj>-<job>-0-<i>, DNS <host>.<tj> (the JobSet's subdomain);
- a Secret <tj>-mpi-ssh-auth mounted at mlPolicy.mpi.sshAuthMountPath in the containers named "node":
  id_rsa 0640, id_rsa.pub and authorized_keys 0644;
- in the launcher, /etc/mpi/hostfile (0444): "<host>.<tj> slots=<numProcPerNode>" for each node pod and,
  with runLauncherAsNode, the launcher, in the order of the replicatedJobs; and the environment
  OMPI_MCA_orte_default_hostfile, OMPI_MCA_orte_keep_fqdn_hostnames, OMPI_MCA_orte_set_default_slots,
  OMPI_MCA_plm_rsh_args (no K_MPI_JOB_ROLE, unlike the MPI Operator);
- the launcher starts once the node pods are ready (dependsOn: node Ready; their port 22 listens).
"""

from __future__ import annotations

import argparse
import copy
import sys

import yaml
from emulate_pods import Plan, Pod, add_arguments, config_maps, documents, run

NODE, LAUNCHER = "node", "launcher"
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"


def _merge(items: list[dict], patch: list[dict], key: str) -> None:
    """A strategic merge of lists keyed by ``key`` (volumes, volumeMounts, env): patch entries win."""
    for item in patch:
        items[:] = [x for x in items if x[key] != item[key]] + [item]


def runtime_for(job: dict) -> dict:
    ref = job["spec"]["runtimeRef"]
    kind = ref.get("kind", "ClusterTrainingRuntime")
    found = [d for d in documents(kind) if d["metadata"]["name"] == ref["name"]]
    if not found:
        raise SystemExit(f"emulate-trainjob: no {kind} {ref['name']!r} under docker/kubernetes/")
    return found[0]


def plan(job: dict, runtime: dict, namespace: str, num_nodes: int | None) -> Plan:
    name, trainer = job["metadata"]["name"], job["spec"].get("trainer", {})
    spec = copy.deepcopy(runtime["spec"])
    mpi = spec["mlPolicy"]["mpi"]
    as_node = mpi.get("runLauncherAsNode", False)
    nodes = num_nodes or trainer.get("numNodes") or spec["mlPolicy"].get("numNodes", 1)
    slots = trainer.get("numProcPerNode") or mpi.get("numProcPerNode", 1)
    jobset = spec["template"]["spec"]
    subdomain = jobset.get("network", {}).get("subdomain", name)
    rjobs = {r["name"]: r for r in jobset["replicatedJobs"]}
    for patch in job["spec"].get("runtimePatches", []):
        for rpatch in patch.get("trainingRuntimeSpec", {}).get("template", {}).get("spec", {}).get(
                "replicatedJobs", []):
            pspec = rjobs[rpatch["name"]]["template"]["spec"]["template"]["spec"]
            ppatch = rpatch.get("template", {}).get("spec", {}).get("template", {}).get("spec", {})
            _merge(pspec.setdefault("volumes", []), ppatch.get("volumes", []), "name")
            for cpatch in ppatch.get("containers", []):
                container = next(c for c in pspec["containers"] if c["name"] == cpatch["name"])
                _merge(container.setdefault("volumeMounts", []), cpatch.get("volumeMounts", []), "name")
    pods: dict[str, list[Pod]] = {}
    hostfile = ""
    for rname, rjob in rjobs.items():
        pspec = rjob["template"]["spec"]["template"]["spec"]
        container = next(c for c in pspec["containers"] if c["name"] == NODE)
        ancestor = rjob["template"].get("metadata", {}).get("labels", {}).get(ANCESTOR) == "trainer"
        if ancestor:
            container.update({k: trainer[k] for k in ("image", "command", "args") if k in trainer})
        if ancestor or (as_node and rname == NODE):
            _merge(container.setdefault("env", []), trainer.get("env", []), "name")
        count = (max(nodes - 1, 1) if as_node else nodes) if rname == NODE else 1
        probe = container.get("readinessProbe", {}).get("tcpSocket", {}).get("port")
        pods[rname] = []
        for i in range(count):
            host = f"{name}-{rname}-0-{i}"
            dns = [f"{host}.{subdomain}", f"{host}.{subdomain}.{namespace}.svc",
                   f"{host}.{subdomain}.{namespace}.svc.cluster.local"]
            pods[rname].append(Pod(host, dns, container, {v["name"]: v for v in pspec.get("volumes", [])},
                                   sshd=probe == 22))
            if rname == NODE or (as_node and rname == LAUNCHER):
                hostfile += f"{host}.{subdomain} slots={slots}\n"
    (launcher,) = pods.pop(LAUNCHER)
    launcher.files = {"mpi/hostfile": (hostfile, 0o444)}
    launcher.env = {"OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile", "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
                    "OMPI_MCA_orte_set_default_slots": str(slots), "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10"}
    return Plan("emulate-trainjob", launcher, [p for group in pods.values() for p in group],
                mpi.get("sshAuthMountPath", "/root/.ssh"),
                {"id_rsa": 0o640, "id_rsa.pub": 0o644, "authorized_keys": 0o644}, config_maps(), "nodes")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(p)
    p.add_argument("--num-nodes", type=int, help="the TrainJob's spec.trainer.numNodes (default: the manifest's)")
    a = p.parse_args()
    job = next(d for d in yaml.safe_load_all(a.manifest.read_text()) if d and d.get("kind") == "TrainJob")
    return run(plan(job, runtime_for(job), a.namespace, a.num_nodes), a)


if __name__ == "__main__":
    sys.exit(main())
