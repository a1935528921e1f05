"""Docker images and the compose cluster: linted and validated with real tools, and the same
topology run for real in network namespaces (launcher + workers, sshd, keys made at start)."""

import os
import re
import shutil
import subprocess
import time
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
    dirs = [*Path("/run").glob("hvdkit-netns.*"), *Path("/etc/netns").glob(f"{tag_prefix}[0-9]*")]
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


@requires_horovod
@pytest.mark.horovod
@pytest.mark.timeout(400)
@pytest.mark.parametrize("example", ["pytorch_elastic.py", "keras_elastic.py"])
def test_netns_cluster_elastic_job_survives_losing_a_host(example):
    """A real host loss: the namespace of worker2 loses its link and every process (sshd, the
    training worker) mid-training, without closing any connection. The survivor notices when
    Gloo's timeout expires, the driver when ssh's keep-alive gives up; the job goes on with 1 worker.
    When the lost host held rank 0, Horovod's driver first tries to notify that (dead) coordinator of
    the host change, which adds 30-60 s here; hence the generous timeout."""
    _netns_ready()
    env = {**os.environ, "HVDKIT_MIN_NP": "1", "HVDKIT_LOSE_NODE": "worker2", "HVDKIT_LOSE_WHEN": r"epoch +3/",
           "HVDKIT_HOROVODRUN_ARGS": "--prefix-output-with-timestamp --gloo-timeout-seconds 10",
           "HOROVOD_ELASTIC_TIMEOUT": "60",
           "HVDKIT_TRAIN_COMMAND": f"python {REPO}/examples/{example} --epochs 8"}
    proc = subprocess.run(["bash", str(REPO / "docker/cluster/netns-cluster.sh")], capture_output=True, text=True,
                          timeout=380, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-5000:]
    assert "--min-np 1 --max-np 2 --host-discovery-script" in out
    lost = re.search(r"losing worker2 at ([0-9.]+)", out)
    assert lost, out[-3000:]
    assert "elastic reset #1: 1 worker(s) now" in out, out[-3000:]
    # Training went on after the loss: epochs 4..8 were trained by the survivor alone.
    after = out[lost.end():]
    assert re.search(r"epoch +8/8", after) and re.search(r"final validation accuracy: 0\.9\d+ after 1 reset", after)
    # Recovery (host lost -> reset done), from horovodrun's per-line timestamps (1 s resolution).
    stamp = re.search(r"(\w{3} \w{3} +\d+ [\d:]{8} \d{4})\[\d\]<stderr>:elastic reset #1", out)
    assert stamp, out[-3000:]
    recovered = time.mktime(time.strptime(stamp.group(1), "%a %b %d %H:%M:%S %Y"))
    print(f"{example}: host loss -> elastic reset done: {recovered - float(lost.group(1)):.0f} s "
          "(+-1 s; Gloo timeout 10 s)")
    assert _leftovers() == ([], [], [])
