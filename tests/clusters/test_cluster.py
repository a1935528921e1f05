"""Docker images and the compose cluster: linted and validated with real tools, and the same
topology run for real in network namespaces (launcher + workers, sshd, keys made at start)."""

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from helpers import REPO, WORKERS, requires_horovod

# namespace clusters on host bridges and iptables: one at a time (and never beside a dockerd starting)
pytestmark = pytest.mark.shares("host-network")

DOCKERFILES = sorted(str(p) for p in (REPO / "docker").glob("*/Dockerfile"))
SCRIPTS = [*sorted(str(p) for p in (REPO / "docker").glob("*.sh")),
           *sorted(str(p) for p in (REPO / "docker/base").glob("*.sh")),
           *sorted(str(p) for p in (REPO / "docker/cluster").glob("*.sh")),
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


def _private_keys_under(folder: Path) -> list[str]:
    return sorted(str(p) for p in folder.rglob("*")
                  if p.is_file() and "PRIVATE KEY-----" in p.read_text(errors="ignore"))


@pytest.mark.timeout(60)
def test_launcher_client_private_key_is_not_on_the_folder_workers_share(tmp_path):
    """keygen.sh puts the client private key in the launcher's own folder; the shared folder gets only
    the public key (before: the private key sat on the shared volume, readable by the training user
    of every worker, who could then log in to every other worker)."""
    need("ssh-keygen")
    shared, private = tmp_path / "cluster", tmp_path / "launcher"
    env = {**os.environ, "HVDKIT_CLUSTER_DIR": str(shared), "HVDKIT_LAUNCHER_DIR": str(private)}
    proc = subprocess.run(["bash", str(REPO / "docker/cluster/keygen.sh")], capture_output=True, text=True,
                          timeout=50, env=env)
    assert proc.returncode == 0, proc.stderr
    assert _private_keys_under(shared) == []
    assert (shared / "ssh/id_ed25519.pub").read_text().startswith("ssh-ed25519 ")
    assert _private_keys_under(private) == [str(private / "id_ed25519")]
    assert (private / "id_ed25519").stat().st_mode & 0o077 == 0 and private.stat().st_mode & 0o077 == 0
    # A private folder inside the shared one is refused, naming both.
    proc = subprocess.run(["bash", str(REPO / "docker/cluster/keygen.sh")], capture_output=True, text=True,
                          timeout=50, env={**env, "HVDKIT_LAUNCHER_DIR": str(shared / "launcher")})
    assert proc.returncode == 1
    assert f"HVDKIT_LAUNCHER_DIR={shared}/launcher is inside the shared HVDKIT_CLUSTER_DIR={shared}" in proc.stderr
    assert _private_keys_under(shared) == []


@pytest.mark.timeout(60)
def test_worker_refuses_to_keep_its_host_private_key_on_the_shared_folder(tmp_path):
    """Before: each worker's host private key was made on the shared volume, so any worker could
    impersonate any other. Now the host key lives in the node's own folder, never in the shared one."""
    shared = tmp_path / "cluster"
    (shared / "ssh").mkdir(parents=True)
    env = {**os.environ, "HVDKIT_CLUSTER_DIR": str(shared), "HVDKIT_NODE_STATE": str(shared / "nodes/worker1"),
           "HVDKIT_NODE_NAME": "worker1", "HVDKIT_NODE_ADDR": "127.0.0.1", "HVDKIT_FOREGROUND": "0"}
    proc = subprocess.run(["bash", str(REPO / "docker/cluster/worker-entrypoint.sh")], capture_output=True,
                          text=True, timeout=50, env=env)
    assert proc.returncode == 1
    assert "the host private key must stay on the node" in proc.stderr
    assert _private_keys_under(shared) == []


@pytest.mark.timeout(120)
def test_compose_mounts_the_launcher_key_volume_on_keygen_and_launcher_only():
    """Compose: the client private key is on a volume no worker mounts; the launcher sees the shared
    volume read-only; a worker's host key stays in the container (no volume at its folder)."""
    need("docker-compose")
    proc = subprocess.run(["docker-compose", "-f", str(REPO / "docker/docker-compose.yml"), "config"],
                          capture_output=True, text=True, timeout=100)
    assert proc.returncode == 0, proc.stderr
    services = yaml.safe_load(proc.stdout)["services"]

    def mounts(name):  # target -> {"source", "read_only"}, from the short ("src:dst:ro") or long syntax
        out = {}
        for v in services[name].get("volumes", []):
            if isinstance(v, str):
                src, dst, *mode = v.split(":")
                v = {"source": src, "target": dst, "read_only": mode == ["ro"]}
            out[v["target"]] = v
        return out

    key_dir = services["keygen"]["environment"].get("HVDKIT_LAUNCHER_DIR")
    assert key_dir, "keygen has no HVDKIT_LAUNCHER_DIR: the client key would go to the shared volume"
    assert services["launcher"]["environment"]["HVDKIT_LAUNCHER_DIR"] == key_dir
    volume = mounts("keygen")[key_dir]["source"]
    assert mounts("launcher")[key_dir]["source"] == volume
    assert volume not in {v["source"] for v in mounts("worker").values()}
    shared = services["worker"]["environment"]["HVDKIT_CLUSTER_DIR"]
    assert mounts("keygen")[shared]["source"] != volume
    assert mounts("launcher")[shared].get("read_only") is True
    state = services["worker"]["environment"].get("HVDKIT_NODE_STATE", "/run/hvdkit-node")
    assert not any(state == t or state.startswith(t.rstrip("/") + "/") for t in mounts("worker"))


FAKE_HOROVODRUN = """#!/bin/sh
echo "fake-horovodrun $*"
echo "single-copy=$OMPI_MCA_btl_vader_single_copy_mechanism"
cat "$HVDKIT_SSH_CONFIG"
prev=""
for a in "$@"; do
  if [ "$prev" = --host-discovery-script ]; then echo "discovered: $("$a" | tr '\\n' ' ')"; fi
  prev=$a
done
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("elastic", [False, True])
def test_launcher_runs_unprivileged_with_a_root_owned_shared_folder(elastic):
    """The compose launcher runs as "trainer" and the shared folder belongs to root (read-only for it):
    before, it wrote known_hosts, its ssh config and the discovery script into /cluster/ssh and died
    with "Permission denied". It also sets Open MPI's single-copy mechanism to none for containers.
    Real scripts, run as an unprivileged user; only horovodrun is a stand-in that prints what it got."""
    if os.geteuid() != 0:
        pytest.skip("switching to an unprivileged user needs root")
    need("setpriv")
    need("ssh-keygen")
    import tempfile
    base = Path(tempfile.mkdtemp(prefix="hvdkit-launcher-test."))
    try:
        base.chmod(0o755)
        shared, private, fake = base / "cluster", base / "launcher", base / "bin"
        env = {**os.environ, "HVDKIT_CLUSTER_DIR": str(shared), "HVDKIT_LAUNCHER_DIR": str(private)}
        subprocess.run(["bash", str(REPO / "docker/cluster/keygen.sh")], check=True, capture_output=True,
                       timeout=50, env=env)
        for i in (1, 2):
            (shared / "hosts" / f"worker{i}").write_text(f"10.9.0.{i} ssh-ed25519 AAAAworker{i}\n")
        fake.mkdir()
        (fake / "horovodrun").write_text(FAKE_HOROVODRUN)
        (fake / "horovodrun").chmod(0o755)
        nobody = 65534
        for path in (private, *private.iterdir()):  # compose: keygen's "chown -R trainer /launcher"
            os.chown(path, nobody, nobody)
        env = {**env, "PATH": f"{fake}:{os.environ['PATH']}", "HVDKIT_WORKERS": "2", "HOME": str(base),
               "HVDKIT_CLUSTER_USER": "trainer", "HVDKIT_TRAIN_COMMAND": "python train.py",
               "HVDKIT_MIN_NP": "1" if elastic else ""}
        env.pop("OMPI_MCA_btl_vader_single_copy_mechanism", None)
        proc = subprocess.run(["setpriv", f"--reuid={nobody}", f"--regid={nobody}", "--clear-groups",
                               "bash", str(REPO / "docker/cluster/launcher-entrypoint.sh")],
                              capture_output=True, text=True, timeout=50, env=env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        out = proc.stdout
        if elastic:
            assert f"--host-discovery-script {private}/discover.sh" in out
            assert "discovered: 10.9.0.1:1 10.9.0.2:1" in out
        else:
            assert "fake-horovodrun -np 2 -H 10.9.0.1:1,10.9.0.2:1 --network-interface eth0 python train.py" in out
        assert "single-copy=none" in out
        assert f"IdentityFile {private}/id_ed25519" in out and f"UserKnownHostsFile {private}/known_hosts" in out
        assert "StrictHostKeyChecking yes" in out
        assert (private / "known_hosts").read_text().splitlines() == [
            "10.9.0.1 ssh-ed25519 AAAAworker1", "10.9.0.2 ssh-ed25519 AAAAworker2"]
        assert sorted(p.name for p in (shared / "ssh").iterdir()) == ["id_ed25519.pub"]
    finally:
        shutil.rmtree(base)


def test_dockerfiles_build_without_docker_hub_and_let_trainer_log_in_by_key():
    """No BuildKit frontend to fetch (a "# syntax=" line makes BuildKit pull one from Docker Hub, so
    air-gapped builds cannot start); the "trainer" account is not locked (useradd leaves "!", and sshd
    refuses even key logins to a locked account); Open MPI does not use process_vm_readv, which Docker's
    default seccomp profile denies."""
    for dockerfile in DOCKERFILES:
        text = Path(dockerfile).read_text()
        assert not re.search(r"(?im)^#\s*syntax\s*=", text), dockerfile
        assert re.search(r"useradd [^\n]*trainer \\\n && usermod -p '\*' trainer", text), dockerfile
        assert "OMPI_MCA_btl_vader_single_copy_mechanism=none" in text, dockerfile


def test_documented_compose_commands_name_the_launcher_service_and_remove_the_volumes():
    """Without naming the launcher, keygen's normal exit ends the run (Compose v1 stops the cluster
    before training; v2 never returns)."""
    found = 0
    docs = ("README.md", "docs/docker.md", "docs/clusters.md", "docker/compose.sh",
            "docker/docker-compose.yml", "docker/docker-compose.gpu.yml")
    for doc in docs:
        text = (REPO / doc).read_text().replace("\\\n", " ")
        for line in text.splitlines():
            if "--exit-code-from" in line:
                found += 1
                assert re.search(r"--exit-code-from launcher launcher\b", line), f"{doc}: {line}"
        if "--exit-code-from" in text:
            assert "down -v" in text, doc
    assert found >= 4


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
# A slow_check (both frameworks): CI proves host loss and elastic recovery with tests/elastic/test_elastic.py.
@pytest.mark.slow_check
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


def _run_cluster(env: dict, timeout: float) -> subprocess.CompletedProcess:
    """netns-cluster.sh; past the timeout it gets SIGTERM first, so that its trap removes what it made."""
    proc = subprocess.Popen(["bash", str(REPO / "docker/cluster/netns-cluster.sh")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()
        out, err = proc.communicate(timeout=60)
        pytest.fail(f"netns-cluster.sh ran past {timeout} s\n{(out + err)[-5000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.fixture(scope="module")
def key_probe_run():
    """One cluster whose "training" is tests/workers/key_probe.py on every worker, as the training user."""
    _netns_ready()
    need("horovodrun")
    env = {**os.environ, "HVDKIT_TRAIN_COMMAND": f"python {WORKERS / 'key_probe.py'}"}
    proc = _run_cluster(env, timeout=150)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-5000:]
    assert _leftovers() == ([], [], [])
    for addr in ("10.77.0.11", "10.77.0.12"):  # the probe ran on both workers and saw the published keys
        assert f"key-probe {addr}: shared folder" in out and "published client key found, 2 registered" in out, out
        assert re.search(rf"key-probe {addr}: \d+ readable files checked", out), out
    return out


@pytest.mark.timeout(200)
def test_no_worker_can_read_the_launcher_client_private_key(key_probe_run):
    """Before: the training user of any worker could read the launcher's client key on the shared
    folder and ssh to every other worker. Now it exists only in the launcher's own namespace."""
    assert "THE LAUNCHER CLIENT PRIVATE KEY" not in key_probe_run, key_probe_run


@pytest.mark.timeout(200)
def test_no_worker_can_read_another_workers_host_private_key(key_probe_run):
    """Before: every worker's host private key was on the shared folder (any worker could impersonate
    any other). Now each one is on its own node; a worker sees at most its own."""
    assert "THE HOST PRIVATE KEY OF" not in key_probe_run, key_probe_run


@pytest.mark.timeout(200)
def test_launcher_refuses_a_worker_that_publishes_a_foreign_host_key():
    """A registration whose host key is not the one the worker's sshd presents (another machine at
    that address) gets no job: strict host-key checking against the published host public keys."""
    _netns_ready()
    need("horovodrun")
    env = {**os.environ, "HVDKIT_NETNS_IMPOSTOR": "worker2", "HVDKIT_TRAIN_COMMAND": "python -c pass"}
    proc = _run_cluster(env, timeout=150)
    out = proc.stdout + proc.stderr
    assert "worker2 now registers a host key its sshd does not have" in out, out[-3000:]
    assert proc.returncode != 0, out[-3000:]
    assert "Host key verification failed" in out or "REMOTE HOST IDENTIFICATION HAS CHANGED" in out, out[-3000:]
    assert _leftovers() == ([], [], [])


@pytest.mark.timeout(200)
def test_netns_workers_keep_their_open_mpi_session_directories_apart():
    """The workers share this machine's /tmp and hostname; with Open MPI's default session folder every
    orted of a job used /tmp/ompi.HOST.UID/jf.JOB and cleared it as it started, so a daemon could die at
    start. Each worker's sshd now points Open MPI at the node's own tmpfs, which no other node sees."""
    _netns_ready()
    need("horovodrun")
    env = {**os.environ, "HVDKIT_TRAIN_COMMAND": f"python {WORKERS / 'session_probe.py'}"}
    proc = _run_cluster(env, timeout=150)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-5000:]
    found = {addr: (path, dev) for addr, path, dev in
             re.findall(r"session-probe (10\.77\.0\.\d+): (\S+) device=(\w+)", out)}
    assert sorted(found) == ["10.77.0.11", "10.77.0.12"], out[-3000:]
    # None: the rank's directory was gone already (another daemon cleared the shared one)
    assert all(dev != "None" for _, dev in found.values()), found
    # Same path on each worker (its tmpfs is mounted at the same folder), but two different file systems
    assert found["10.77.0.11"][1] != found["10.77.0.12"][1], found
    assert not any(path.startswith("/tmp/") for path, _ in found.values()), found
    assert _leftovers() == ([], [], [])
