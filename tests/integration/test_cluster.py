"""Docker images and the compose cluster: linted and validated with real tools, and the same
topology run for real in network namespaces (launcher + workers, sshd, keys made at start)."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import REPO, requires_horovod

DOCKERFILES = sorted(str(p) for p in (REPO / "docker").glob("*/Dockerfile"))
SCRIPTS = [*sorted(str(p) for p in (REPO / "docker/cluster").glob("*.sh")),
           *sorted(str(p) for p in (REPO / "scripts").glob("*.sh")),
           str(REPO / "docker/cluster/bin/ssh"), str(REPO / "run.sh"), str(REPO / ".ci/run")]


def need(tool):
    if shutil.which(tool) is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{tool} is not installed (scripts/bootstrap.sh installs it)")
        pytest.skip(f"{tool} not installed")


@pytest.mark.timeout(120)
def test_hadolint_passes_on_every_dockerfile():
    need("hadolint")
    assert len(DOCKERFILES) == 2
    proc = subprocess.run(["hadolint", "--config", str(REPO / ".hadolint.yaml"), *DOCKERFILES],
                          capture_output=True, text=True, timeout=100)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.timeout(120)
@pytest.mark.parametrize("files", [["docker-compose.yml"], ["docker-compose.yml", "docker-compose.gpu.yml"]])
def test_compose_file_validates(files):
    need("docker-compose")
    args = [a for f in files for a in ("-f", str(REPO / "docker" / f))]
    proc = subprocess.run(["docker-compose", *args, "config"], capture_output=True, text=True, timeout=100,
                          env={**os.environ, "WORKERS": "3"})
    assert proc.returncode == 0, proc.stderr
    assert "replicas: 3" in proc.stdout and "service_healthy" in proc.stdout


@pytest.mark.timeout(120)
def test_shell_scripts_pass_shellcheck():
    need("shellcheck")
    proc = subprocess.run(["shellcheck", "-x", *SCRIPTS], capture_output=True, text=True, timeout=100)
    assert proc.returncode == 0, proc.stdout


def test_no_private_key_or_secret_is_committed():
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True,
                           timeout=60).stdout.split()
    for name in files:
        path = REPO / name
        if path.is_file() and path.stat().st_size < 2_000_000:
            text = path.read_text(errors="ignore")
            assert not re.search(r"-----BEGIN [A-Z ]*PRIVATE KEY-----", text), name


def _leftovers(tag_prefix="hk"):
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30).stdout
    ours = [line for line in ns.splitlines() if re.match(rf"{tag_prefix}\d+-", line)]
    dirs = list(Path("/run").glob("hvdkit-netns.*"))
    sshd = subprocess.run(["pgrep", "-f", "hvdkit-netns"], capture_output=True, text=True, timeout=30).stdout.split()
    return ours, dirs, sshd


def _netns_ready():
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    need("ip")
    if not Path("/usr/sbin/sshd").exists():
        need("sshd")


@requires_horovod
@pytest.mark.horovod
@pytest.mark.timeout(400)
def test_netns_cluster_trains_over_ssh_and_leaves_nothing_behind():
    _netns_ready()
    env = {**os.environ, "HVDKIT_TRAIN_COMMAND": f"python {REPO}/examples/pytorch_mnist.py --epochs 2"}
    proc = subprocess.run(["bash", str(REPO / "docker/cluster/netns-cluster.sh")], capture_output=True, text=True,
                          timeout=380, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-5000:]
    assert "worker worker1: sshd listening on 10.77.0.11:22" in out
    assert "-H 10.77.0.11:1,10.77.0.12:1" in out
    assert re.search(r"final validation accuracy: 0\.\d+", out)
    assert _leftovers() == ([], [], [])


@pytest.mark.timeout(200)
def test_netns_cluster_failure_still_cleans_up():
    _netns_ready()
    need("horovodrun")
    env = {**os.environ, "HVDKIT_TRAIN_COMMAND": "false"}
    proc = subprocess.run(["bash", str(REPO / "docker/cluster/netns-cluster.sh")], capture_output=True, text=True,
                          timeout=180, env=env)
    assert proc.returncode != 0
    assert "launcher exited" in proc.stdout
    assert _leftovers() == ([], [], [])
