"""The pods of a Kubernetes MPI job as network namespaces on this machine: the part that the MPIJob
(emulate-mpijob.py) and Trainer v2 TrainJob (emulate-trainjob.py) emulators share.

A front end turns its manifests into a :class:`Plan` (pods, their commands, environments, mounted files,
the job's ssh Secret); :func:`run` then does what the kubelet and the cluster network would:
- a network + UTS + mount namespace per pod on a private bridge (10.79.0.0/24), a hosts file with every
  pod's DNS names in place of the cluster DNS, the pod's host name, a fresh /run;
- the per-job ssh Secret (ECDSA P-521 key, PEM: id_rsa, id_rsa.pub, authorized_keys, with the modes the
  controller mounts them with) at the ssh mount path, in an overlay of /root;
- the controller's files (the hostfile, ...) and the manifests' ConfigMaps at their volumeMounts, in an
  overlay of /etc;
- the sshd pods run their command; the launcher starts once every one listens on port 22 and runs its command.
The image is this machine: its Python environment, and the checkout mapped at the image's
/opt/hvdkit/{examples,cluster} (an overlay of /opt). PVC paths are not emulated: map them with --replace.
Everything is removed on exit, also on failure. Needs root, iproute2, util-linux, openssh-server.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "docker/kubernetes"
SUBNET = os.environ.get("HVDKIT_K8S_SUBNET", "10.79.0")
KEY_FILES = ("id_rsa", "id_rsa.pub", "authorized_keys")


def sh(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=check, capture_output=True, text=True, timeout=60)


def documents(kind: str) -> list[dict]:
    """Every object of ``kind`` in the manifests under docker/kubernetes/ (the pinned CRDs left out)."""
    found = []
    for f in sorted(K8S.rglob("*.yaml")):
        if "crd" not in f.relative_to(K8S).parts:
            found += [d for d in yaml.safe_load_all(f.read_text()) if isinstance(d, dict) and d.get("kind") == kind]
    return found


def config_maps() -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in documents("ConfigMap")}


def container_env(container: dict) -> dict[str, str]:
    return {e["name"]: str(e.get("value", "")) for e in container.get("env", [])}


@dataclass
class Pod:
    name: str  # the pod's host name
    dns: list[str]  # the names other pods reach it by
    container: dict
    volumes: dict[str, dict]
    ssh: bool = True  # the job's Secret is mounted (at Plan.ssh_path)
    sshd: bool = False  # runs sshd: the launcher waits for its port 22
    files: dict[str, tuple[str, int]] = field(default_factory=dict)  # /etc/<path>: (text, mode), the controller's
    env: dict[str, str] = field(default_factory=dict)  # what the controller adds to the container's env


@dataclass
class Plan:
    prog: str  # the front end's name, in its log lines
    launcher: Pod
    workers: list[Pod]  # the pods started before the launcher
    ssh_path: str
    key_modes: dict[str, int]  # mode of each of KEY_FILES as mounted
    maps: dict[str, dict]
    worker_word: str = "workers"

    @property
    def pods(self) -> list[Pod]:
        return [self.launcher, *self.workers]


class Cluster:
    """The pods of one plan as namespaces; ``close()`` removes everything."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.tag = f"hk8s{os.getpid()}"
        self.dir = Path(tempfile.mkdtemp(prefix="hvdkit-k8s.", dir="/run"))
        self.pods = [p.name for p in plan.pods]
        self.addr = {pod: f"{SUBNET}.{10 + i}" for i, pod in enumerate(self.pods)}
        self.procs: list[subprocess.Popen] = []
        self.forward_rule = False
        self.made: list[str] = []
        self.impostor = -1

    # -- network -------------------------------------------------------------------------------
    def network(self) -> None:
        bridge = f"{self.tag}br"
        sh("ip", "link", "add", bridge, "type", "bridge")
        self.made.append("bridge")
        sh("ip", "link", "set", bridge, "up")
        nf = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")
        if shutil.which("iptables") and nf.exists() and nf.read_text().strip() == "1":
            sh("iptables", "-w", "-I", "FORWARD", "-i", bridge, "-o", bridge, "-j", "ACCEPT")
            self.forward_rule = True
        for i, pod in enumerate(self.pods):
            netns = f"{self.tag}-{i}"
            sh("ip", "netns", "add", netns)
            self.made.append(netns)
            sh("ip", "link", "add", f"{self.tag}v{i}", "type", "veth", "peer", "name", f"{self.tag}p{i}")
            sh("ip", "link", "set", f"{self.tag}v{i}", "master", bridge, "up")
            sh("ip", "link", "set", f"{self.tag}p{i}", "netns", netns)
            sh("ip", "-n", netns, "link", "set", f"{self.tag}p{i}", "name", "eth0")
            sh("ip", "-n", netns, "addr", "add", f"{self.addr[pod]}/24", "dev", "eth0")
            sh("ip", "-n", netns, "link", "set", "eth0", "up")
            sh("ip", "-n", netns, "link", "set", "lo", "up")

    # -- files ---------------------------------------------------------------------------------
    def secret(self) -> Path:
        """The controller's per-job Secret: an ECDSA P-521 key in PEM, as both controllers make it."""
        d = self.dir / "secret"
        d.mkdir()
        sh("ssh-keygen", "-q", "-t", "ecdsa", "-b", "521", "-m", "PEM", "-N", "", "-C", "", "-f", str(d / "id_rsa"))
        pub = (d / "id_rsa.pub").read_text().split()
        (d / "id_rsa.pub").write_text(f"{pub[0]} {pub[1]}\n")
        shutil.copy(d / "id_rsa.pub", d / "authorized_keys")
        return d

    def pod_files(self, index: int, pod: Pod, secret: Path) -> Path:
        """Upper dirs of the pod's overlays: etc/ (hosts, the controller's files, ConfigMaps), root/ (ssh), opt/."""
        prog = self.plan.prog
        root = self.dir / "pods" / pod.name
        up = {d: root / "upper" / d for d in ("etc", "root", "opt")}
        for d in up.values():
            d.mkdir(parents=True)
            (root / "work" / d.name).mkdir(parents=True)
        hosts = ["127.0.0.1 localhost"]
        hosts += [f"{self.addr[p.name]} {' '.join(p.dns)} {p.name}" for p in self.plan.pods]
        (up["etc"] / "hosts").write_text("\n".join(hosts) + "\n")
        (up["etc"] / "hostname").write_text(pod.name + "\n")
        for rel, (text, mode) in pod.files.items():
            target = up["etc"] / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
            target.chmod(mode)
        for mount in pod.container.get("volumeMounts", []):
            vol = pod.volumes.get(mount["name"], {})
            if "configMap" not in vol:
                continue  # PVCs and the like: not emulated (see --replace)
            path = Path(mount["mountPath"])
            if path.parts[1] != "etc":
                raise SystemExit(f"{prog}: ConfigMap mounts outside /etc are not emulated: {path}")
            target = up["etc"] / path.relative_to("/etc")
            target.mkdir(parents=True, exist_ok=True)
            for key, value in self.plan.maps[vol["configMap"]["name"]]["data"].items():
                (target / key).write_text(value)
        if pod.ssh:
            ssh = Path(self.plan.ssh_path)
            if ssh.parts[1] != "root":
                raise SystemExit(f"{prog}: the ssh mount path outside /root is not emulated: {ssh}")
            target = up["root"] / ssh.relative_to("/root")
            target.mkdir(parents=True)
            for f in KEY_FILES:
                shutil.copy(secret / f, target / f)
            if index == self.impostor:  # a host that is not this job's pod: its own key (a test of host-key checks)
                (target / "id_rsa").unlink()
                sh("ssh-keygen", "-q", "-t", "ecdsa", "-b", "521", "-m", "PEM", "-N", "", "-C", "", "-f",
                   str(target / "id_rsa.new"))
                (target / "id_rsa.new").rename(target / "id_rsa")
            for f in KEY_FILES:
                (target / f).chmod(self.plan.key_modes[f])
        image = up["opt"] / "hvdkit"
        image.mkdir()
        (image / "examples").symlink_to(REPO / "examples")
        (image / "cluster").symlink_to(REPO / "docker/cluster")
        return root

    # -- processes -----------------------------------------------------------------------------
    def pod_command(self, index: int, pod: str, root: Path, argv: list[str]) -> list[str]:
        """argv run in the pod: its namespaces, its overlays of /etc, /root and /opt, its host name, its /run."""
        mounts = " && ".join(
            f"mount -t overlay overlay -o lowerdir=/{d},upperdir={root}/upper/{d},workdir={root}/work/{d} /{d}"
            for d in ("etc", "root", "opt"))
        script = f'{mounts} && mount -t tmpfs -o mode=755 tmpfs /run && hostname "$0" && cd / && exec "$@"'
        return ["nsenter", f"--net=/run/netns/{self.tag}-{index}", "unshare", "--uts", "--mount",
                "--propagation", "private", "sh", "-c", script, pod, *argv]

    def listening(self, index: int, port: int) -> bool:
        out = subprocess.run(["ip", "netns", "exec", f"{self.tag}-{index}", "ss", "-ltnH", f"sport = :{port}"],
                             capture_output=True, text=True, timeout=30).stdout
        return bool(out.strip())

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
        for i in range(len(self.pods)):
            netns = f"{self.tag}-{i}"
            if netns in self.made:
                pids = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True).stdout.split()
                for pid in pids:
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                sh("ip", "netns", "del", netns, check=False)
        if "bridge" in self.made:
            sh("ip", "link", "del", f"{self.tag}br", check=False)
        if self.forward_rule:
            sh("iptables", "-w", "-D", "FORWARD", "-i", f"{self.tag}br", "-o", f"{self.tag}br", "-j", "ACCEPT",
               check=False)
        shutil.rmtree(self.dir, ignore_errors=True)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options every front end has."""
    p.add_argument("manifest", type=Path)
    p.add_argument("--namespace", default="default")
    p.add_argument("--replace", action="append", default=[], metavar="OLD=NEW",
                   help="replace a launcher argument (PVC paths, epochs)")
    p.add_argument("--timeout", type=float, default=300, help="seconds for the launcher")
    p.add_argument("--launcher-command", help="run this in the launcher pod instead of the manifest's command "
                   "(e.g. 'hvdkit doctor --json')")
    p.add_argument("--impostor", type=int, metavar="I", help="worker I answers with a host key not the job's")


def run(plan: Plan, a: argparse.Namespace) -> int:
    """Start the pods of ``plan``, run its launcher to the end; the launcher's exit status."""
    prog = plan.prog
    if os.geteuid() != 0:
        print(f"{prog}: needs root (network namespaces, overlays)", file=sys.stderr)
        return 1
    cluster = Cluster(plan)
    if a.impostor is not None:
        cluster.impostor = a.impostor + 1

    def stop(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    start = time.time()
    try:
        cluster.network()
        secret = cluster.secret()
        base_env = {k: v for k, v in os.environ.items() if k in ("PATH", "PYTHONPATH", "LANG", "TERM")}
        base_env["HOME"] = "/root"
        roots = [cluster.pod_files(index, pod, secret) for index, pod in enumerate(plan.pods)]
        for index, pod in enumerate(plan.workers, 1):
            argv = [*pod.container.get("command", []), *pod.container.get("args", [])]
            env = {**base_env, **container_env(pod.container), **pod.env}
            log = open(roots[index] / "worker.log", "w")
            cluster.procs.append(subprocess.Popen(cluster.pod_command(index, pod.name, roots[index], argv), env=env,
                                                  stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
            print(f"{prog}: {pod.name} ({cluster.addr[pod.name]}): {shlex.join(argv)}", flush=True)
        deadline = time.time() + 60
        for index, pod in enumerate(plan.workers, 1):  # ready: sshd listens (the readiness probe)
            while pod.sshd and not cluster.listening(index, 22):
                if time.time() > deadline or cluster.procs[index - 1].poll() is not None:
                    log = (roots[index] / "worker.log").read_text()
                    print(f"{prog}: {pod.name} never became ready:\n{log}", file=sys.stderr)
                    return 1
                time.sleep(0.1)  # readiness probe period
        ready = time.time()
        pod = plan.launcher
        args = list(pod.container.get("args", []))
        for rule in a.replace:
            old, _, new = rule.partition("=")
            args = [new if x == old.strip('"') else x for x in args]
        if "mpirun" in args:  # the image has hvdkit installed; here it comes from the checkout, on every rank
            args.insert(args.index("mpirun") + 1, "-x")
            args.insert(args.index("mpirun") + 2, "PYTHONPATH")
        argv = [*pod.container["command"], *args]
        if a.launcher_command:
            argv = shlex.split(a.launcher_command)
        env = {**base_env, **container_env(pod.container), **pod.env}
        print(f"{prog}: {plan.worker_word} ready after {ready - start:.1f} s; {pod.name} ({cluster.addr[pod.name]}): "
              f"{shlex.join(argv)}", flush=True)
        proc = subprocess.Popen(cluster.pod_command(0, pod.name, roots[0], argv), env=env, start_new_session=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        cluster.procs.append(proc)
        timer = threading.Timer(a.timeout, lambda: os.killpg(proc.pid, signal.SIGKILL))
        timer.start()
        assert proc.stdout is not None
        for line in proc.stdout:  # the launcher's log, stamped with seconds since the launcher started
            print(f"[{time.time() - ready:6.1f}s] {line}", end="", flush=True)
        rc = proc.wait()
        if not timer.is_alive():
            print(f"{prog}: launcher killed after {a.timeout} s", file=sys.stderr)
            rc = 124
        timer.cancel()
        print(f"{prog}: launcher exited {rc} after {time.time() - ready:.1f} s "
              f"({time.time() - start:.1f} s in all)", flush=True)
        for index, worker in enumerate(plan.workers, 1):  # what `kubectl logs` would show of the sshd pods
            for line in (roots[index] / "worker.log").read_text().splitlines():
                if "Accepted" in line or "error" in line.lower() or "refused" in line.lower():
                    print(f"{prog}: {worker.name}: {line}", flush=True)
        return rc
    finally:
        cluster.close()
        print(f"{prog}: removed {cluster.tag} ({socket.gethostname()})", flush=True)
