"""Docker for real: an engine (started here if none runs), the CPU image built from docker/cpu/Dockerfile
by docker/build.sh (on the debootstrap base where Docker Hub is unreachable), training inside it, and the
compose cluster demo run to the end, also through `docker kill` of a worker in an elastic run.

The image is built once per module (warm: seconds, the engine keeps its layer cache); the measured times
are printed (pytest -s shows them). Every test has a timeout.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time

import docker_engine as docker_engine_module
import pytest
from docker_engine import docker_engine  # noqa: F401 - the session fixture
from helpers import REPO

# a dockerd started here changes the host firewall (FORWARD policy) under the namespace clusters
pytestmark = [pytest.mark.slow, pytest.mark.shares("host-network")]
# The image build (a second, cold Horovod build on a fresh machine) and every test on the image are slow_check
# tests, run by `scripts/slow-checks.sh docker`; CI keeps the checks that need no image.
IMAGE_CHECK = pytest.mark.slow_check
IMAGE = "hvdkit:cpu-test"
LOCAL_BASE = "hvdkit/base:bookworm"
COMPOSE = REPO / "docker" / "docker-compose.yml"
PROJECT = "hvdkittest"


def docker(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)} exited {proc.returncode}\n{proc.stdout[-3000:]}\n"
                             f"{proc.stderr[-3000:]}")
    return proc


def build_image() -> tuple[subprocess.CompletedProcess, float]:
    """docker/build.sh, with this interpreter's pip fetching the '+cpu' torch wheel for the wheelhouse."""
    env = {**os.environ, "HVDKIT_IMAGE": IMAGE, "HVDKIT_HOST_PYTHON": sys.executable}
    start = time.monotonic()
    proc = subprocess.run(["bash", str(REPO / "docker/build.sh")], capture_output=True, text=True, timeout=840,
                          env=env)
    took = time.monotonic() - start
    assert proc.returncode == 0, (f"docker/build.sh exited {proc.returncode}\n{proc.stdout[-5000:]}\n"
                                  f"{proc.stderr[-5000:]}")
    return proc, took


@pytest.fixture(scope="module")
def cpu_image(docker_engine):  # noqa: F811
    proc, took = build_image()
    size = int(docker("image", "inspect", "--format", "{{.Size}}", IMAGE).stdout)
    summary = [line for line in (proc.stdout + proc.stderr).splitlines()
               if line.startswith(("[docker/build] built", "debootstrap-base: "))]
    print(f"\n[docker] first build this run: {took:.0f} s, {IMAGE} {size / 1e6:.0f} MB; " + "; ".join(summary))
    return {"build": proc, "seconds": took, "size": size}


def _base_of(build: subprocess.CompletedProcess) -> str:
    found = re.search(r"\[docker/build\] base image: (\S+)", build.stderr)
    assert found, build.stderr[-3000:]
    return found.group(1)


@pytest.mark.timeout(200)
def test_engine_answers_with_overlay2(docker_engine):  # noqa: F811
    info = docker("info", "--format", "{{.Driver}}").stdout.strip()
    assert info == "overlay2", info
    if docker_engine.started_here:
        assert docker_engine.log is not None and "dockerd started" in docker_engine.log.read_text(errors="replace")
    # An engine that already runs is used as it is, and left running.
    again = docker_engine_module.start()
    assert not again.started_here and again.process is None
    docker_engine_module.stop(again)
    assert docker_engine_module.ping()


@IMAGE_CHECK
@pytest.mark.timeout(900)
def test_image_builds_from_public_sources_and_rebuilds_warm(cpu_image):
    """The base is the official python:3.11-slim-bookworm or, where Docker Hub does not answer, the
    debootstrap equivalent; the builder's pip sees no configuration of this machine; a second build
    of unchanged sources is all cache hits."""
    build = cpu_image["build"]
    base = _base_of(build)
    out = build.stdout + build.stderr
    if base == LOCAL_BASE:
        assert "Docker Hub does not answer" in build.stderr
        labels = docker("image", "inspect", "--format", "{{json .Config.Labels}}", base).stdout
        assert '"org.hvdkit.base.source":"debootstrap-bookworm"' in labels, labels
    # This machine's pip settings (local wheel folders) never reach the builder (docker build's output is
    # build.sh's stdout; the host's own pip, fetching the torch wheel, writes to stderr).
    assert "/opt/wheels" not in build.stdout and "file:///opt/pypi" not in build.stdout
    assert re.search(r"reusing the Horovod wheel from the wheelhouse|building horovod 0\.28\.1\+hvdkit\.cpu\.", out)
    again, took = build_image()
    steps = re.findall(r"^Step \d+/\d+ : (RUN|COPY)", again.stdout, re.M)
    cached = again.stdout.count("---> Using cache")
    print(f"\n[docker] warm rebuild: {took:.0f} s ({cached} cached steps)")
    # Every step a cache hit is the property; the time is printed, not asserted: it depends on what else runs
    # (the classic builder re-reads the whole venv it copies to check its cache).
    assert steps and cached >= len(steps), again.stdout[-3000:]


@IMAGE_CHECK
@pytest.mark.timeout(300)
def test_base_image_is_python_311_on_bookworm(cpu_image):
    base = _base_of(cpu_image["build"])
    out = docker("run", "--rm", base, "bash", "-c",
                 "python --version && . /etc/os-release && echo $VERSION_CODENAME && "
                 "python -c 'import venv, ensurepip, ssl, sysconfig, os; "
                 "print(os.path.exists(sysconfig.get_paths()[\"include\"] + \"/Python.h\"))'").stdout.split()
    assert out[:2] == ["Python", out[1]] and out[1].startswith("3.11."), out
    assert out[2:] == ["bookworm", "True"], out
    size = int(docker("image", "inspect", "--format", "{{.Size}}", base).stdout)
    print(f"\n[docker] base {base}: {size / 1e6:.0f} MB")


@IMAGE_CHECK
@pytest.mark.timeout(300)
def test_doctor_passes_inside_the_image(cpu_image):
    proc = docker("run", "--rm", IMAGE, "hvdkit", "doctor", timeout=240)
    assert "No problems found." in proc.stdout, proc.stdout
    assert re.search(r"horovod +0\.28\.1\+hvdkit\.cpu\.[0-9a-f]{16}", proc.stdout), proc.stdout
    assert re.search(r"frameworks +tensorflow \[X\], torch \[X\]", proc.stdout), proc.stdout
    assert re.search(r"controllers +mpi \[X\], gloo \[X\]", proc.stdout), proc.stdout


@IMAGE_CHECK
@pytest.mark.horovod
@pytest.mark.timeout(400)
def test_two_process_horovodrun_training_inside_the_image(cpu_image):
    start = time.monotonic()
    proc = docker("run", "--rm", IMAGE, "horovodrun", "-np", "2", "-H", "localhost:2", "python",
                  "/opt/hvdkit/examples/pytorch_mnist.py", "--epochs", "1", timeout=360)
    print(f"\n[docker] 2-process training in the image: {time.monotonic() - start:.0f} s")
    assert "2 workers x batch 32" in proc.stdout, proc.stdout[-3000:]
    assert re.search(r"epoch +1/1 .*val_accuracy 0\.\d+", proc.stdout), proc.stdout[-3000:]
    assert re.search(r"final validation accuracy: 0\.[3-9]\d*", proc.stdout), proc.stdout[-3000:]


@IMAGE_CHECK
@pytest.mark.timeout(300)
def test_image_holds_no_private_key_and_no_build_material(cpu_image):
    """No ssh host key, user key or any other private key anywhere in the image; the wheelhouse and the
    host CA certificates the builder stage trusted stay in the builder stage."""
    script = (
        "ls /etc/ssh/ssh_host_* 2>/dev/null; ls -d /wheelhouse /home/trainer/.ssh /root/.ssh 2>/dev/null; "
        "ls /usr/local/share/ca-certificates; "
        "grep -rlIs --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev "
        "-e '-----BEGIN [A-Z ]*PRIVATE KEY-----' / ; true")
    proc = docker("run", "--rm", "--user", "root", IMAGE, "bash", "-c", script, timeout=240)
    assert proc.stdout.split() == [], proc.stdout
    assert docker("run", "--rm", IMAGE, "id", "-un").stdout.strip() == "trainer"


# ---------------------------------------------------------------------------------------------------------
# The compose cluster demo (docker/docker-compose.yml, Compose v1 here: docker-compose).

class Compose:
    """``docker-compose up`` as the README runs it, its output read line by line with arrival times."""

    def __init__(self, env: dict[str, str], workers: int = 2):
        self.env = {**os.environ, "HVDKIT_IMAGE": IMAGE, "WORKERS": str(workers), **env}
        self.base = ["docker-compose", "-p", PROJECT, "-f", str(COMPOSE)]
        self.lines: list[tuple[float, str]] = []
        self.seen = threading.Condition()
        self.workers = workers

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([*self.base, *args], capture_output=True, text=True, timeout=timeout, env=self.env)

    def __enter__(self) -> Compose:
        self.run("down", "-v", "--remove-orphans")  # what an interrupted earlier run may have left
        self.start = time.monotonic()
        self.proc = subprocess.Popen(
            [*self.base, "up", "--no-build", "--no-color", "--scale", f"worker={self.workers}",
             "--abort-on-container-exit", "--exit-code-from", "launcher", "launcher"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=self.env)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        return self

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self.seen:
                self.lines.append((time.monotonic(), line.rstrip("\n")))
                self.seen.notify_all()
        with self.seen:
            self.seen.notify_all()

    def wait_for(self, pattern: str, timeout: float) -> float:
        """The arrival time of the first output line matching ``pattern``; fails on timeout or exit."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self.seen:
            while True:
                for t, line in self.lines:
                    if rx.search(line):
                        return t
                left = deadline - time.monotonic()
                if left <= 0 or not self.reader.is_alive():
                    pytest.fail(f"no line matching {pattern!r} within {timeout} s\n{self.output[-4000:]}")
                self.seen.wait(timeout=min(left, 5))

    def finish(self, timeout: float) -> int:
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"docker-compose up ran past {timeout} s\n{self.output[-4000:]}")
        self.reader.join(timeout=30)
        return rc

    @property
    def output(self) -> str:
        return "\n".join(line for _, line in self.lines)

    def __exit__(self, *exc) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        down = self.run("down", "-v", "--remove-orphans", timeout=180)
        assert down.returncode == 0, down.stderr
        left = docker("ps", "-a", "--filter", f"label=com.docker.compose.project={PROJECT}", "-q").stdout.split()
        volumes = docker("volume", "ls", "-q", "--filter", f"label=com.docker.compose.project={PROJECT}").stdout.split()
        assert (left, volumes) == ([], []), (left, volumes)


@IMAGE_CHECK
@pytest.mark.horovod
@pytest.mark.timeout(420)
def test_compose_demo_trains_to_the_end_and_exits_0(cpu_image):
    """keygen -> 2 workers (sshd, host keys made at start, healthy once registered) -> the launcher's
    horovodrun over ssh with strict host-key checking; `--exit-code-from launcher` gives its status."""
    env = {"TRAIN_COMMAND": "python /opt/hvdkit/examples/pytorch_mnist.py --epochs 2 --checkpoint-dir /data/ckpt"}
    with Compose(env) as c:
        first = c.wait_for(r"epoch +1/2", timeout=300)
        rc = c.finish(timeout=200)
        out = c.output
        print(f"\n[docker] compose demo: up -> first epoch line {first - c.start:.1f} s, "
              f"exit {rc} after {time.monotonic() - c.start:.1f} s")
        assert rc == 0, out[-4000:]
        assert re.search(r"launcher: horovodrun -np 2 -H 172\.[\d.]+:1,172\.[\d.]+:1 --network-interface eth0", out)
        assert re.search(r"epoch +2/2 .*val_accuracy 0\.\d+", out), out[-3000:]
        assert re.search(r"final validation accuracy: 0\.[5-9]\d*", out), out[-3000:]
        assert "Host key verification failed" not in out and "Permission denied" not in out
        # Rank 0 wrote its checkpoints as "trainer" on the data volume.
        ls = docker("run", "--rm", "-v", f"{PROJECT}_data:/data", IMAGE, "bash", "-c",
                    "stat -c '%U' /data/ckpt && ls /data/ckpt").stdout.split()
        assert ls[0] == "trainer" and len(ls) > 1, ls


@IMAGE_CHECK
@pytest.mark.horovod
@pytest.mark.timeout(480)
def test_elastic_compose_run_survives_docker_kill_of_a_worker(cpu_image):
    """MIN_NP=1: the launcher runs horovodrun elastic with the registered workers as discovery. Mid
    training one worker container is killed (SIGKILL to all its processes, its network gone); the other
    resets to 1 worker and trains to the end; the launcher exits 0."""
    env = {"MIN_NP": "1",
           "TRAIN_COMMAND": "python /opt/hvdkit/examples/pytorch_elastic.py --epochs 12",
           "HOROVODRUN_ARGS": "--gloo-timeout-seconds 10"}
    with Compose(env) as c:
        c.wait_for(r"epoch +3/12", timeout=300)
        victim = f"{PROJECT}_worker_2"
        killed = time.monotonic()
        docker("kill", victim)
        reset = c.wait_for(r"elastic reset #1: 1 worker\(s\) now", timeout=150)
        rc = c.finish(timeout=240)
        out = c.output
        print(f"\n[docker] elastic compose: docker kill -> reset {reset - killed:.2f} s, "
              f"finished {time.monotonic() - killed:.0f} s after the kill, exit {rc}")
        if os.environ.get("HVDKIT_SHOW_OUTPUT"):
            print(out)
        assert rc == 0, out[-5000:]
        assert "--min-np 1 --max-np 2 --host-discovery-script" in out
        after = out[out.index("elastic reset #1"):]
        assert re.search(r"epoch +12/12", after), out[-3000:]
        assert re.search(r"final validation accuracy: 0\.[5-9]\d* after 1 reset", after), out[-3000:]
        state = docker("inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", victim).stdout.split()
        assert state == ["exited", "137"], state


@IMAGE_CHECK
@pytest.mark.timeout(300)
def test_compose_down_stops_workers_at_once(cpu_image):
    """PID 1 of a worker is an init (compose ``init: true``): it passes ``down``'s SIGTERM on and reaps sshd
    and orted. With ``tail`` as PID 1 SIGTERM was ignored: 11.5 s for two workers, each killed (137)."""
    c = Compose({})
    c.run("down", "-v", "--remove-orphans")
    up = c.run("up", "-d", "--no-build", "--scale", "worker=2", "worker", timeout=180)
    assert up.returncode == 0, up.stderr
    try:
        deadline = time.monotonic() + 120
        while len(docker("ps", "-q", "--filter", f"label=com.docker.compose.project={PROJECT}",
                         "--filter", "health=healthy").stdout.split()) < 2:
            assert time.monotonic() < deadline, docker("ps", "-a").stdout
            time.sleep(1)  # polling interval; the condition is the workers' health
        ids = docker("ps", "-q", "--filter", f"label=com.docker.compose.project={PROJECT}").stdout.split()
        start = time.monotonic()
        stop = c.run("stop", "-t", "10", timeout=120)
        took = time.monotonic() - start
        assert stop.returncode == 0, stop.stderr
        codes = docker("inspect", "--format", "{{.State.ExitCode}}", *ids).stdout.split()
        print(f"\n[docker] compose stop of 2 workers: {took:.1f} s, exit codes {codes}")
        assert took < 5 and "137" not in codes, (took, codes)
    finally:
        c.run("down", "-v", "--remove-orphans", timeout=180)


@pytest.mark.timeout(120)
def test_compose_sh_asks_for_the_image_before_compose_tries_a_registry(docker_engine):  # noqa: F811
    env = {**os.environ, "HVDKIT_IMAGE": "hvdkit:not-built-here", "HVDKIT_PROJECT": PROJECT}
    proc = subprocess.run(["bash", str(REPO / "docker/compose.sh"), "up", "2"], capture_output=True, text=True,
                          timeout=60, env=env)
    assert proc.returncode == 2, proc
    assert "no image hvdkit:not-built-here here: run docker/build.sh first" in proc.stderr, proc.stderr
    bad = subprocess.run(["bash", str(REPO / "docker/compose.sh"), "up", "two"], capture_output=True, text=True,
                         timeout=60, env=env)
    assert bad.returncode == 2 and "N must be a number of workers >= 1, got 'two'" in bad.stderr, bad.stderr
