"""Kubernetes (Kubeflow MPI Operator, kubeflow.org/v2beta1). No cluster can run here, so:
1. every MPIJob in docker/kubernetes/ (CPU, the GPU overlay's patch applied, elastic) validates against
   the operator's pinned CRD schema with jsonschema, strict about unknown fields as the API server's
   strict field validation is; broken copies are rejected;
2. the operator's contract runs in network namespaces (docker/kubernetes/emulate-mpijob.py): hostfile
   and discover_hosts.sh at /etc/mpi, pod host names, the per-job ssh Secret, key-only sshd workers
   started with the manifest's command, and the launcher's mpirun / elastic horovodrun training to the end."""

import copy
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import REPO, requires_horovod

# namespace clusters on host bridges and iptables: one at a time (and never beside a dockerd starting)
pytestmark = pytest.mark.shares("host-network")

K8S = REPO / "docker/kubernetes"
CRD = K8S / "crd/kubeflow.org_mpijobs.yaml"


def _jsonschema():
    try:
        import jsonschema
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("jsonschema is not installed (it is pinned in requirements/cpu.in)")
        pytest.skip("jsonschema not installed")
    return jsonschema


def strict(schema):
    """The CRD schema, refusing unknown fields (kubectl --validate=strict) where Kubernetes would prune them."""
    schema = copy.deepcopy(schema)

    def walk(node):
        if isinstance(node, dict):
            if ("properties" in node and "additionalProperties" not in node
                    and not node.get("x-kubernetes-preserve-unknown-fields")):
                node["additionalProperties"] = False
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return schema


def validator():
    jsonschema = _jsonschema()
    crd = yaml.safe_load(CRD.read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v2beta1")
    return jsonschema.Draft7Validator(strict(version["schema"]["openAPIV3Schema"]))


def apply_json6902(doc, patch):
    """RFC 6902 add/replace (what the GPU overlay uses), as kustomize applies them."""
    doc = copy.deepcopy(doc)
    for op in patch:
        assert op["op"] in ("add", "replace"), op
        *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        node = doc
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node[p]
        if isinstance(node, list):
            node.insert(len(node) if last == "-" else int(last), op["value"]) if op["op"] == "add" else \
                node.__setitem__(int(last), op["value"])
        else:
            assert op["op"] == "add" or last in node, f"replace of a missing field: {op['path']}"
            node[last] = op["value"]
    return doc


def manifests():
    cpu = yaml.safe_load((K8S / "mpijob.yaml").read_text())
    gpu_kust = yaml.safe_load((K8S / "gpu/kustomization.yaml").read_text())
    (patch,) = gpu_kust["patches"]
    assert patch["target"]["name"] == cpu["metadata"]["name"] and patch["target"]["kind"] == "MPIJob"
    gpu = apply_json6902(cpu, yaml.safe_load((K8S / "gpu" / patch["path"]).read_text()))
    elastic = yaml.safe_load((K8S / "elastic/mpijob-elastic.yaml").read_text())
    return {"cpu": cpu, "gpu": gpu, "elastic": elastic}


def test_crd_is_the_pinned_upstream_file():
    digest = hashlib.sha256(CRD.read_bytes()).hexdigest()
    assert digest in (K8S / "crd/SOURCE.md").read_text()


@pytest.mark.parametrize("name", ["cpu", "gpu", "elastic"])
def test_manifest_validates_against_the_crd(name):
    job = manifests()[name]
    errors = sorted(validator().iter_errors(job), key=str)
    assert not errors, "\n".join(f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors)
    assert job["apiVersion"] == "kubeflow.org/v2beta1" and job["kind"] == "MPIJob"


@pytest.mark.parametrize("breakage, message", [
    (lambda j: j["spec"].update(slotPerWorker=2), "Additional properties are not allowed ('slotPerWorker'"),
    (lambda j: j["spec"].update(mpiImplementation="OpenMPII"), "'OpenMPII' is not one of"),
    (lambda j: j["spec"]["mpiReplicaSpecs"]["Worker"].update(replicas="two"), "'two' is not of type 'integer'"),
    (lambda j: j["spec"]["runPolicy"].update(cleanPodPolicy=7), "7 is not of type 'string'"),
    (lambda j: j["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0].update(comand=["x"]),
     "Additional properties are not allowed ('comand'"),
])
def test_the_schema_check_rejects_broken_manifests(breakage, message):
    job = manifests()["cpu"]
    breakage(job)
    errors = "\n".join(e.message for e in validator().iter_errors(job))
    assert message in errors


def test_manifests_follow_the_operators_contract():
    config = yaml.safe_load((K8S / "config/hvdkit-mpi-config.yaml").read_text())
    sshd = config["data"]["sshd_config"]
    for name, job in manifests().items():
        spec = job["spec"]
        ssh_dir = spec["sshAuthMountPath"]
        assert f"HostKey {ssh_dir}/id_rsa" in sshd and f"AuthorizedKeysFile {ssh_dir}/authorized_keys" in sshd
        assert "PasswordAuthentication no" in sshd
        worker = spec["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
        assert "sshd -De" in " ".join(worker["command"] + worker["args"]), name
        launcher = spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
        assert launcher["command"] == ["/bin/sh", "/etc/hvdkit/launcher.sh"], name
        assert launcher["args"][0] == ("horovodrun" if name == "elastic" else "mpirun"), name
        assert "-H" not in launcher["args"] and "--hostfile" not in launcher["args"], "the operator gives the hosts"
    assert "/etc/mpi/discover_hosts.sh" in manifests()["elastic"]["spec"]["mpiReplicaSpecs"]["Launcher"][
        "template"]["spec"]["containers"][0]["args"]
    gpu_worker = manifests()["gpu"]["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert gpu_worker["resources"]["limits"]["nvidia.com/gpu"] == manifests()["gpu"]["spec"]["slotsPerWorker"]
    for kust in K8S.rglob("kustomization.yaml"):
        for res in yaml.safe_load(kust.read_text())["resources"]:
            assert (kust.parent / res).exists(), f"{kust}: {res} does not exist"


def test_launcher_script_passes_shellcheck(tmp_path):
    if shutil.which("shellcheck") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("shellcheck is not installed (scripts/bootstrap.sh installs it)")
        pytest.skip("shellcheck not installed")
    config = yaml.safe_load((K8S / "config/hvdkit-mpi-config.yaml").read_text())
    script = tmp_path / "launcher.sh"
    script.write_text(config["data"]["launcher.sh"])
    proc = subprocess.run(["shellcheck", str(script)], capture_output=True, text=True, timeout=50)
    assert proc.returncode == 0, proc.stdout


def _leftovers():
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30).stdout
    return [line for line in ns.splitlines() if re.match(r"hk8s\d+-", line)], list(Path("/run").glob("hvdkit-k8s.*"))


def emulate(manifest: str, *args: str, timeout: float = 200, ok: bool = True, script: str = "emulate-mpijob.py") -> str:
    if os.geteuid() != 0:
        pytest.skip("the Kubernetes emulations need root (network namespaces, overlays)")
    env = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2"}
    proc = subprocess.run([sys.executable, str(K8S / script), str(K8S / manifest), *args],
                          capture_output=True, text=True, timeout=timeout, env=env, start_new_session=True)
    out = proc.stdout + proc.stderr
    assert (proc.returncode == 0) == ok, out[-6000:]
    assert _leftovers() == ([], [])
    return out


@requires_horovod
@pytest.mark.horovod
@pytest.mark.timeout(240)
def test_mpijob_contract_trains_to_the_end(tmp_path):
    out = emulate("mpijob.yaml", "--replace", f"/data/checkpoints={tmp_path}/ckpt", "--replace", "12=2",
                  "--timeout", "180")
    assert "hosts: hvdkit-mnist-worker-0.hvdkit-mnist.default.svc slots=2 " \
           "hvdkit-mnist-worker-1.hvdkit-mnist.default.svc slots=2" in out
    assert "4 workers x batch 32" in out and re.search(r"final validation accuracy: 0\.\d+", out)
    for w in (0, 1):  # mpirun reached every worker over ssh with the job's key
        assert re.search(rf"hvdkit-mnist-worker-{w}: Accepted publickey for root from 10\.79\.0\.10", out), out
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir() if p.name.endswith(".json"))  # rank 0 wrote them
    ready = float(re.search(r"workers ready after ([\d.]+) s", out).group(1))
    first = float(re.search(r"\[ *([\d.]+)s\] training on", out).group(1))
    epoch = float(re.search(r"\[ *([\d.]+)s\] epoch +1/2", out).group(1))
    print(f"MPIJob emulation: workers ready {ready:.1f} s, launcher start -> training {first:.1f} s, "
          f"-> epoch 1 done {epoch:.1f} s")


@requires_horovod
@pytest.mark.horovod
@pytest.mark.slow_check  # CI keeps the MPIJob contract run above and the elastic runs of tests/elastic
@pytest.mark.timeout(240)
def test_elastic_mpijob_contract_trains_to_the_end():
    out = emulate("elastic/mpijob-elastic.yaml", "--workers", "2", "--replace", "12=2", "--timeout", "180")
    assert re.search(r"final validation accuracy: 0\.\d+ after 0 reset", out), out[-3000:]
    for w in (0, 1):
        assert re.search(rf"hvdkit-elastic-worker-{w}: Accepted publickey for root", out), out


@pytest.mark.timeout(120)
def test_launcher_refuses_a_worker_whose_host_key_is_not_the_jobs():
    """Key-only and strict: a host answering at worker-1's name with another host key gets no job."""
    out = emulate("mpijob.yaml", "--impostor", "1", "--replace", "12=1", "--timeout", "90", timeout=110, ok=False)
    assert "Host key verification failed" in out, out[-3000:]
    assert "training on" not in out


@requires_horovod
@pytest.mark.horovod
@pytest.mark.timeout(180)
def test_doctor_in_the_launcher_pod_names_the_mpijob():
    out = emulate("mpijob.yaml", "--launcher-command", "hvdkit doctor --json", "--timeout", "150", timeout=170)
    body = out[out.index("{"):out.rindex("}") + 1]
    launcher = json.loads(re.sub(r"^\[ *[\d.]+s\] ", "", body, flags=re.M))["facts"]["launcher"]
    assert launcher["kind"] == "mpijob", launcher
    assert "MPIJob launcher: hostfile /etc/mpi/hostfile, 2 worker(s), 4 slot(s): hvdkit-mnist-worker-0." \
           in launcher["detail"] and "discover_hosts.sh present" in launcher["detail"]
    assert "`mpirun` reads /etc/mpi/hostfile" in launcher["uses"]
