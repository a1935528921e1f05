"""Kubernetes (Kubeflow Trainer v2, trainer.kubeflow.org/v1alpha1). No cluster can run here, so:
1. every TrainJob, ClusterTrainingRuntime and TrainingRuntime under docker/kubernetes/ (overlay patches
   applied) validates against the pinned v2.3.0 CRD schemas with jsonschema, strict about unknown fields;
   broken copies are rejected;
2. the Trainer's MPI contract runs in network namespaces (docker/kubernetes/emulate-trainjob.py, on the
   MPIJob emulator's pods): /etc/mpi/hostfile, the JobSet's pod names, the per-job ssh Secret with its
   0640/0644 modes, key-only sshd nodes, and the launcher pod's mpirun training to the end."""

import hashlib
import json
import os
import re
import shutil
import subprocess

import pytest
import yaml
from helpers import REPO, requires_horovod
from test_mpijob import _jsonschema, apply_json6902, emulate, strict

from hvdkit.runtime.environments import detect, mpijob, trainjob

# namespace clusters on host bridges and iptables: one at a time (and never beside a dockerd starting)
pytestmark = pytest.mark.shares("host-network")

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



def test_pod_script_passes_shellcheck(tmp_path):
    if shutil.which("shellcheck") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("shellcheck is not installed (scripts/bootstrap.sh installs it)")
        pytest.skip("shellcheck not installed")
    script = tmp_path / "pod.sh"
    script.write_text(yaml.safe_load((K8S / "trainer/trainer-config.yaml").read_text())["data"]["pod.sh"])
    proc = subprocess.run(["shellcheck", str(script)], capture_output=True, text=True, timeout=50)
    assert proc.returncode == 0, proc.stdout

# -- the contract, emulated -------------------------------------------------------------------------------
TRAINJOB = "trainer/trainjob.yaml"


def emulate_trainjob(*args: str, timeout: float = 200, ok: bool = True) -> str:
    return emulate(TRAINJOB, *args, timeout=timeout, ok=ok, script="emulate-trainjob.py")


@requires_horovod
@pytest.mark.horovod
@pytest.mark.timeout(240)
def test_trainjob_contract_trains_to_the_end(tmp_path):
    """numNodes 2 with runLauncherAsNode: one node pod and the launcher, 2 ranks each, in the hostfile's order."""
    out = emulate_trainjob("--replace", f"/data/checkpoints={tmp_path}/ckpt", "--replace", "12=2", "--timeout", "180")
    assert "hosts: hvdkit-trainjob-node-0-0.hvdkit-trainjob slots=2 " \
           "hvdkit-trainjob-launcher-0-0.hvdkit-trainjob slots=2" in out
    assert "4 workers x batch 32" in out and re.search(r"final validation accuracy: 0\.\d+", out)
    assert re.search(r"hvdkit-trainjob-node-0-0: Accepted publickey for root from 10\.79\.0\.10", out), out
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir() if p.name.endswith(".json"))  # rank 0 wrote them
    ready = float(re.search(r"nodes ready after ([\d.]+) s", out).group(1))
    first = float(re.search(r"\[ *([\d.]+)s\] training on", out).group(1))
    done = float(re.search(r"launcher exited 0 after ([\d.]+) s \(([\d.]+) s in all\)", out).group(2))
    print(f"TrainJob emulation: nodes ready {ready:.1f} s, launcher start -> training {first:.1f} s, "
          f"trained (2 epochs) {done:.1f} s in all")


@pytest.mark.timeout(120)
def test_trainjob_launcher_refuses_a_node_whose_host_key_is_not_the_jobs():
    out = emulate_trainjob("--impostor", "0", "--replace", "12=1", "--timeout", "90", timeout=110, ok=False)
    assert "Host key verification failed" in out, out[-3000:]
    assert "training on" not in out


@requires_horovod
@pytest.mark.horovod
@pytest.mark.timeout(180)
def test_launcher_pod_has_the_trainers_files_and_doctor_names_the_trainjob():
    command = ("sh -c 'stat -c \"%a %n\" /root/.ssh/id_rsa /root/.ssh/id_rsa.pub /root/.ssh/authorized_keys "
               "/etc/mpi/hostfile; env | grep ^OMPI_MCA_ | sort; hvdkit doctor --json'")
    out = emulate_trainjob("--launcher-command", command, "--timeout", "150", timeout=170)
    for mode_path in ("640 /root/.ssh/id_rsa", "644 /root/.ssh/id_rsa.pub", "644 /root/.ssh/authorized_keys",
                      "444 /etc/mpi/hostfile"):
        assert f"] {mode_path}\n" in out, out[-3000:]
    for var in ("OMPI_MCA_orte_default_hostfile=/etc/mpi/hostfile", "OMPI_MCA_orte_keep_fqdn_hostnames=true",
                "OMPI_MCA_orte_set_default_slots=2", "OMPI_MCA_plm_rsh_args=-o ConnectionAttempts=10"):
        assert f"] {var}\n" in out, out[-3000:]
    assert "K_MPI_JOB_ROLE" not in out
    body = out[out.index("{"):out.rindex("}") + 1]
    launcher = json.loads(re.sub(r"^\[ *[\d.]+s\] ", "", body, flags=re.M))["facts"]["launcher"]
    assert launcher["kind"] == "trainjob", launcher
    assert launcher["detail"] == (
        "Kubeflow Trainer v2 TrainJob hvdkit-trainjob launcher: hostfile /etc/mpi/hostfile, 2 node(s), 4 slot(s): "
        "hvdkit-trainjob-node-0-0.hvdkit-trainjob, hvdkit-trainjob-launcher-0-0.hvdkit-trainjob "
        "(runLauncherAsNode: the launcher trains too)")


# -- hvdkit doctor's view, without the emulation --------------------------------------------------------
@pytest.mark.parametrize("lines, env, kind", [
    ("tj-node-0-0.tj slots=4\ntj-node-0-1.tj slots=4\n", {}, "trainjob"),
    ("tj-node-0-0.tj slots=2\ntj-launcher-0-0.tj slots=2\n", {}, "trainjob"),
    ("tj-node-0-0.tj slots=2\n", {"K_MPI_JOB_ROLE": "launcher"}, "mpijob"),  # the MPI Operator sets it
    ("job-worker-0.job.default.svc slots=2\n", {}, "mpijob"),
    ("tj-node-0-0.tj slots=2\nother-node-0-0.other slots=2\n", {}, "mpijob"),  # two jobs: not one TrainJob's
])
def test_detect_tells_a_trainjob_from_an_mpijob(tmp_path, monkeypatch, lines, env, kind):
    monkeypatch.setattr(mpijob, "HOSTFILE", "/nonexistent/hostfile")
    hostfile = tmp_path / "hostfile"
    hostfile.write_text(lines)
    ctx = detect({"OMPI_MCA_orte_default_hostfile": str(hostfile), **env})
    assert ctx.kind == kind
    if kind == "trainjob":
        assert ctx.detail.startswith(f"Kubeflow Trainer v2 TrainJob tj launcher: hostfile {hostfile}, 2 node(s)")
        assert ("launcher trains too" in ctx.detail) == ("launcher" in lines)
        assert ctx.uses == trainjob.USES.format(hostfile=hostfile)
