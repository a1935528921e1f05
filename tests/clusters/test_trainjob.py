"""Kubernetes (Kubeflow Trainer v2, trainer.kubeflow.org/v1alpha1). No cluster can run here, so:
1. every TrainJob, ClusterTrainingRuntime and TrainingRuntime under docker/kubernetes/ (overlay patches
   applied) validates against the pinned v2.3.0 CRD schemas with jsonschema, strict about unknown fields;
   broken copies are rejected;
2. the Trainer's MPI contract runs in network namespaces (docker/kubernetes/emulate-trainjob.py, on the
   MPIJob emulator's pods): /etc/mpi/hostfile, the JobSet's pod names, the per-job ssh Secret with its
   0640/0644 modes, key-only sshd nodes, and the launcher pod's mpirun training to the end."""

import hashlib
import re

import pytest
import yaml
from helpers import REPO
from test_mpijob import _jsonschema, apply_json6902, strict

K8S = REPO / "docker/kubernetes"
CRDS = {kind: K8S / f"crd/trainer.kubeflow.org_{plural}.yaml" for kind, plural in [
    ("TrainJob", "trainjobs"), ("ClusterTrainingRuntime", "clustertrainingruntimes"),
    ("TrainingRuntime", "trainingruntimes")]}
_validators: dict = {}


def validator(kind):
    if kind not in _validators:
        crd = yaml.load(CRDS[kind].read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1")
        _validators[kind] = _jsonschema().Draft7Validator(strict(version["schema"]["openAPIV3Schema"]))
    return _validators[kind]


def trainer_objects() -> dict[str, dict]:
    """Every Trainer object under docker/kubernetes/, and each kustomize overlay's patched copy, by label."""
    found = {}
    for f in sorted(K8S.rglob("*.yaml")):
        if "crd" in f.relative_to(K8S).parts:
            continue
        for i, doc in enumerate(yaml.safe_load_all(f.read_text())):
            if isinstance(doc, dict) and doc.get("kind") in CRDS:
                found[f"{f.relative_to(K8S)}#{i}"] = doc
    for kust in sorted(K8S.rglob("kustomization.yaml")):
        for patch in yaml.safe_load(kust.read_text()).get("patches", []):
            target = patch["target"]
            if target["kind"] not in CRDS:
                continue
            (base,) = [d for d in found.values() if d["kind"] == target["kind"]
                       and d["metadata"]["name"] == target["name"]]
            found[f"{(kust.parent / patch['path']).relative_to(K8S)}"] = apply_json6902(
                base, yaml.safe_load((kust.parent / patch["path"]).read_text()))
    return found


def _errors(doc):
    errors = sorted(validator(doc["kind"]).iter_errors(doc), key=str)
    return "\n".join(f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors)


def test_crds_are_the_pinned_upstream_files():
    note = (K8S / "crd/SOURCE.md").read_text()
    for crd in CRDS.values():
        assert f"`{crd.name}` | `{hashlib.sha256(crd.read_bytes()).hexdigest()}`" in note, crd.name


def test_there_are_trainer_manifests_to_check():
    kinds = [(d["kind"], d["metadata"]["name"]) for d in trainer_objects().values()]
    assert ("ClusterTrainingRuntime", "hvdkit-openmpi") in kinds and ("ClusterTrainingRuntime",
                                                                      "hvdkit-openmpi-cuda") in kinds
    assert sum(k == "TrainJob" for k, _ in kinds) >= 2
    runtimes = [d for d in trainer_objects().values() if d["kind"].endswith("TrainingRuntime")]
    assert any("mpi" in d["spec"].get("mlPolicy", {}) for d in runtimes)


@pytest.mark.parametrize("label", sorted(trainer_objects()))
def test_manifest_validates_against_the_crd(label):
    doc = trainer_objects()[label]
    assert doc["apiVersion"] == "trainer.kubeflow.org/v1alpha1"
    assert not _errors(doc)


def _runtime():
    return next(d for d in trainer_objects().values() if d["metadata"]["name"] == "hvdkit-openmpi")


def _trainjob():
    return next(d for d in trainer_objects().values() if d["metadata"]["name"] == "hvdkit-trainjob")


def _node(doc, job):
    rjob = next(r for r in doc["spec"]["template"]["spec"]["replicatedJobs"] if r["name"] == job)
    return rjob["template"]["spec"]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize("which, breakage, message", [
    (_runtime, lambda d: d["spec"]["mlPolicy"]["mpi"].update(mpiImplementation="IntelMPI"), "'IntelMPI' is not one of"),
    (_runtime, lambda d: d["spec"]["mlPolicy"]["mpi"].update(slotsPerWorker=2),
     "Additional properties are not allowed ('slotsPerWorker'"),
    (_runtime, lambda d: d["spec"]["mlPolicy"].update(elasticPolicy={"maxNodes": 4}),  # removed in v2.2.0
     "Additional properties are not allowed ('elasticPolicy'"),
    (_runtime, lambda d: _node(d, "node").update(comand=["x"]), "Additional properties are not allowed ('comand'"),
    (_trainjob, lambda d: d["spec"]["trainer"].update(numNodes="two"), "'two' is not of type 'integer'"),
    (_trainjob, lambda d: d["spec"].update(podTemplateOverrides=[]),  # replaced by runtimePatches in v2.2.0
     "Additional properties are not allowed ('podTemplateOverrides'"),
    (_trainjob, lambda d: d["spec"].pop("runtimeRef"), "'runtimeRef' is a required property"),
])
def test_the_schema_check_rejects_broken_manifests(which, breakage, message):
    doc = which()
    breakage(doc)
    assert message in _errors(doc)


def test_manifests_follow_the_trainers_mpi_contract():
    config = yaml.safe_load((K8S / "trainer/trainer-config.yaml").read_text())["data"]["pod.sh"]
    for doc in trainer_objects().values():
        if doc["kind"] == "TrainJob":
            trainer = doc["spec"]["trainer"]
            assert trainer["args"][0] == "mpirun" and "-H" not in trainer["args"], "the plugin gives the hosts"
            assert "command" not in trainer, "the runtime's pod.sh must run first (ssh keys)"
            assert "env" not in trainer or not {e["name"] for e in trainer["env"]} & {
                "OMPI_MCA_orte_default_hostfile", "OMPI_MCA_plm_rsh_args", "OMPI_MCA_orte_keep_fqdn_hostnames",
                "OMPI_MCA_orte_set_default_slots"}, "reserved by the MPI plugin"
            for patch in doc["spec"].get("runtimePatches", []):
                assert re.fullmatch(r"[a-z0-9.-]+/[\w./-]+", patch["manager"]), "a domain-prefixed path"
            continue
        mpi = doc["spec"]["mlPolicy"]["mpi"]
        assert mpi["mpiImplementation"] == "OpenMPI" and mpi["sshAuthMountPath"] == "/root/.ssh"
        assert f"secret={mpi['sshAuthMountPath']}" in config
        names = [r["name"] for r in doc["spec"]["template"]["spec"]["replicatedJobs"]]
        assert names == ["node", "launcher"]  # the plugin mounts keys into containers named "node" only
        assert _node(doc, "node")["name"] == _node(doc, "launcher")["name"] == "node"
        assert _node(doc, "node")["command"][-1] == "node" and _node(doc, "launcher")["command"][-1] == "launcher"
        launcher = doc["spec"]["template"]["spec"]["replicatedJobs"][1]
        assert launcher["template"]["metadata"]["labels"]["trainer.kubeflow.org/trainjob-ancestor-step"] == "trainer"
        assert launcher["dependsOn"] == [{"name": "node", "status": "Ready"}]
    gpu = trainer_objects()["trainer/gpu/trainjob-patch.yaml"]
    assert gpu["spec"]["trainer"]["resourcesPerNode"]["limits"]["nvidia.com/gpu"] == gpu["spec"]["trainer"][
        "numProcPerNode"]
    cuda = next(d for d in trainer_objects().values() if d["metadata"]["name"] == gpu["spec"]["runtimeRef"]["name"])
    assert {_node(cuda, j)["image"] for j in ("node", "launcher")} == {"hvdkit:cuda"}
