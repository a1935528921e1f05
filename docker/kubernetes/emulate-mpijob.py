#!/usr/bin/env python3
"""Run an hvdkit MPIJob manifest the way the Kubeflow MPI Operator (v2beta1) runs it, without Kubernetes.

    sudo python docker/kubernetes/emulate-mpijob.py docker/kubernetes/mpijob.yaml \
        --replace /data/checkpoints=/tmp/ckpt --replace '"12"=2'

What the operator does (pkg/controller/mpi_job_controller.go, v0.8.2) and what this does instead:
- one Pod per replica, host name <job>-launcher / <job>-worker-<i>, DNS <pod>.<job>.<namespace>.svc
  -> a network + UTS + mount namespace per pod on a private bridge (10.79.0.0/24), and a hosts file
  with every pod's names in place of the cluster DNS;
- a Secret <job>-ssh (ECDSA P-521 key, PEM: id_rsa, id_rsa.pub, authorized_keys) mounted at
  spec.sshAuthMountPath in every pod -> the same files, made now, in an overlay of /root;
- a ConfigMap <job>-config at /etc/mpi in the launcher: hostfile ("<pod>.<job>.<ns>.svc slots=N")
  and discover_hosts.sh ("echo <pod>.<job>.<ns>.svc" per running worker) -> an overlay of /etc;
- the manifest's own ConfigMaps (docker/kubernetes/config) at their volumeMounts -> the same overlay;
- the launcher's environment: K_MPI_JOB_ROLE, OMPI_MCA_orte_keep_fqdn_hostnames, OMPI_MCA_orte_default_hostfile,
  OMPI_MCA_plm_rsh_args, OMPI_MCA_orte_set_default_slots, NVIDIA_VISIBLE_DEVICES/NVIDIA_DRIVER_CAPABILITIES="";
- workers' containers run their manifest command (sshd -De); the launcher starts once every worker's
  port 22 listens (launcherCreationPolicy WaitForWorkersReady / the readinessProbe) and runs its command.
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
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
SUBNET = os.environ.get("HVDKIT_K8S_SUBNET", "10.79.0")


def sh(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=check, capture_output=True, text=True, timeout=60)


def load(manifest: Path) -> tuple[dict, dict[str, dict]]:
    """The MPIJob in ``manifest`` and the ConfigMaps of docker/kubernetes/config, by name."""
    job = next(d for d in yaml.safe_load_all(manifest.read_text()) if d and d.get("kind") == "MPIJob")
    maps = {}
    for f in (REPO / "docker/kubernetes/config").glob("*.yaml"):
        for d in yaml.safe_load_all(f.read_text()):
            if d and d.get("kind") == "ConfigMap":
                maps[d["metadata"]["name"]] = d
    return job, maps


class Cluster:
    """The pods of one MPIJob as namespaces; ``close()`` removes everything."""

    def __init__(self, job: dict, maps: dict[str, dict], namespace: str, workers: int | None) -> None:
        self.job, self.maps, self.ns = job, maps, namespace
        self.name = job["metadata"]["name"]
        spec = job["spec"]
        self.slots = int(spec.get("slotsPerWorker", 1))
        self.workers = workers if workers is not None else int(spec["mpiReplicaSpecs"]["Worker"].get("replicas", 0))
        self.ssh_path = spec.get("sshAuthMountPath", "/root/.ssh")
        self.tag = f"hk8s{os.getpid()}"
        self.dir = Path(tempfile.mkdtemp(prefix="hvdkit-mpijob.", dir="/run"))
        self.pods = [f"{self.name}-launcher"] + [f"{self.name}-worker-{i}" for i in range(self.workers)]
        self.addr = {pod: f"{SUBNET}.{10 + i}" for i, pod in enumerate(self.pods)}
        self.procs: list[subprocess.Popen] = []
        self.forward_rule = False
        self.made: list[str] = []
        self.impostor = -1

    def fqdn(self, pod: str) -> str:
        return f"{pod}.{self.name}.{self.ns}.svc"

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
        """The operator's per-job Secret: an ECDSA P-521 key in PEM, as newSSHAuthSecret makes it."""
        d = self.dir / "secret"
        d.mkdir()
        sh("ssh-keygen", "-q", "-t", "ecdsa", "-b", "521", "-m", "PEM", "-N", "", "-C", "", "-f", str(d / "id_rsa"))
        pub = (d / "id_rsa.pub").read_text().split()
        (d / "id_rsa.pub").write_text(f"{pub[0]} {pub[1]}\n")
        shutil.copy(d / "id_rsa.pub", d / "authorized_keys")
        return d

    def pod_files(self, index: int, pod: str, container: dict, volumes: dict[str, dict], secret: Path) -> Path:
        """Upper dirs of the pod's overlays: etc/ (hosts, /etc/mpi, ConfigMaps), root/ (ssh), opt/ (image)."""
        root = self.dir / "pods" / pod
        up = {d: root / "upper" / d for d in ("etc", "root", "opt")}
        for d in up.values():
            d.mkdir(parents=True)
            (root / "work" / d.name).mkdir(parents=True)
        hosts = ["127.0.0.1 localhost"]
        hosts += [f"{self.addr[p]} {self.fqdn(p)} {self.fqdn(p)}.cluster.local {p}" for p in self.pods]
        (up["etc"] / "hosts").write_text("\n".join(hosts) + "\n")
        (up["etc"] / "hostname").write_text(pod + "\n")
        if index == 0:  # the launcher: the operator's ConfigMap at /etc/mpi
            mpi = up["etc"] / "mpi"
            mpi.mkdir()
            (mpi / "hostfile").write_text("".join(f"{self.fqdn(p)} slots={self.slots}\n" for p in self.pods[1:]))
            (mpi / "discover_hosts.sh").write_text("#!/bin/sh\n" + "".join(f"echo {self.fqdn(p)}\n"
                                                                          for p in self.pods[1:]))
            (mpi / "hostfile").chmod(0o444)
            (mpi / "discover_hosts.sh").chmod(0o555)
        for mount in container.get("volumeMounts", []):
            vol = volumes.get(mount["name"], {})
            if "configMap" not in vol:
                continue  # PVCs and the like: not emulated (see --replace)
            path = Path(mount["mountPath"])
            if path.parts[1] != "etc":
                raise SystemExit(f"emulate-mpijob: ConfigMap mounts outside /etc are not emulated: {path}")
            target = up["etc"] / path.relative_to("/etc")
            target.mkdir(parents=True, exist_ok=True)
            for key, value in self.maps[vol["configMap"]["name"]]["data"].items():
                (target / key).write_text(value)
        ssh = Path(self.ssh_path)
        if ssh.parts[1] != "root":
            raise SystemExit(f"emulate-mpijob: sshAuthMountPath outside /root is not emulated: {ssh}")
        target = up["root"] / ssh.relative_to("/root")
        target.mkdir(parents=True)
        for f in ("id_rsa", "id_rsa.pub", "authorized_keys"):  # mode 0600, as for /root/.ssh
            shutil.copy(secret / f, target / f)
            (target / f).chmod(0o600)
        if index == self.impostor:  # a host that is not this job's pod: its own key (a test of host-key checks)
            (target / "id_rsa").unlink()
            sh("ssh-keygen", "-q", "-t", "ecdsa", "-b", "521", "-m", "PEM", "-N", "", "-C", "", "-f",
               str(target / "id_rsa.new"))
            (target / "id_rsa.new").rename(target / "id_rsa")
        image = up["opt"] / "hvdkit"
        image.mkdir()
        (image / "examples").symlink_to(REPO / "examples")
        (image / "cluster").symlink_to(REPO / "docker/cluster")
        return root

    # -- processes -----------------------------------------------------------------------------
    def pod_command(self, index: int, pod: str, root: Path, argv: list[str]) -> list[str]:
        """argv run in the pod: its namespaces, its overlays of /etc, /root and /opt, its host name."""
        mounts = " && ".join(
            f"mount -t overlay overlay -o lowerdir=/{d},upperdir={root}/upper/{d},workdir={root}/work/{d} /{d}"
            for d in ("etc", "root", "opt"))
        script = f'{mounts} && hostname "$0" && cd / && exec "$@"'
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


def container_env(container: dict) -> dict[str, str]:
    return {e["name"]: str(e.get("value", "")) for e in container.get("env", [])}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("manifest", type=Path)
    p.add_argument("--namespace", default="default")
    p.add_argument("--workers", type=int, help="worker replicas (default: the manifest's)")
    p.add_argument("--replace", action="append", default=[], metavar="OLD=NEW",
                   help="replace a launcher argument (PVC paths, epochs)")
    p.add_argument("--timeout", type=float, default=300, help="seconds for the launcher")
    p.add_argument("--launcher-command", help="run this in the launcher pod instead of the manifest's command "
                   "(e.g. 'hvdkit doctor --json')")
    p.add_argument("--impostor", type=int, metavar="I", help="worker I answers with a host key not the job's")
    a = p.parse_args()
    if os.geteuid() != 0:
        print("emulate-mpijob: needs root (network namespaces, overlays)", file=sys.stderr)
        return 1
    job, maps = load(a.manifest)
    cluster = Cluster(job, maps, a.namespace, a.workers)
    if a.impostor is not None:
        cluster.impostor = a.impostor + 1

    def stop(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    start = time.time()
    try:
        cluster.network()
        secret = cluster.secret()
        specs = job["spec"]["mpiReplicaSpecs"]
        roles = [("Launcher", specs["Launcher"])] + [("Worker", specs["Worker"])] * cluster.workers
        base_env = {k: v for k, v in os.environ.items() if k in ("PATH", "PYTHONPATH", "LANG", "TERM")}
        base_env["HOME"] = "/root"
        for index, (pod, (role, rspec)) in enumerate(zip(cluster.pods, roles)):
            pspec = rspec["template"]["spec"]
            container = pspec["containers"][0]
            volumes = {v["name"]: v for v in pspec.get("volumes", [])}
            root = cluster.pod_files(index, pod, container, volumes, secret)
            if role == "Worker":
                argv = [*container.get("command", ["/usr/sbin/sshd", "-De"]), *container.get("args", [])]
                env = {**base_env, **container_env(container), "K_MPI_JOB_ROLE": "worker"}
                log = open(root / "worker.log", "w")
                cluster.procs.append(subprocess.Popen(cluster.pod_command(index, pod, root, argv), env=env,
                                                      stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
                print(f"emulate-mpijob: {pod} ({cluster.addr[pod]}): {shlex.join(argv)}", flush=True)
            else:
                launcher = (index, pod, root, container)
        deadline = time.time() + 60
        for index in range(1, len(cluster.pods)):  # WaitForWorkersReady: sshd listens on every worker
            while not cluster.listening(index, 22):
                if time.time() > deadline or cluster.procs[index - 1].poll() is not None:
                    log = (cluster.dir / "pods" / cluster.pods[index] / "worker.log").read_text()
                    print(f"emulate-mpijob: {cluster.pods[index]} never became ready:\n{log}", file=sys.stderr)
                    return 1
                time.sleep(0.1)  # readiness probe period
        ready = time.time()
        index, pod, root, container = launcher
        args = list(container.get("args", []))
        for rule in a.replace:
            old, _, new = rule.partition("=")
            args = [new if x == old.strip('"') else x for x in args]
        if "mpirun" in args:  # the image has hvdkit installed; here it comes from the checkout, on every rank
            args.insert(args.index("mpirun") + 1, "-x")
            args.insert(args.index("mpirun") + 2, "PYTHONPATH")
        argv = [*container["command"], *args]
        if a.launcher_command:
            argv = shlex.split(a.launcher_command)
        env = {**base_env, **container_env(container), "K_MPI_JOB_ROLE": "launcher",
               "OMPI_MCA_orte_keep_fqdn_hostnames": "true", "OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile",
               "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
               "OMPI_MCA_orte_set_default_slots": str(cluster.slots),
               "NVIDIA_VISIBLE_DEVICES": "", "NVIDIA_DRIVER_CAPABILITIES": ""}
        print(f"emulate-mpijob: workers ready after {ready - start:.1f} s; {pod} ({cluster.addr[pod]}): "
              f"{shlex.join(argv)}", flush=True)
        proc = subprocess.Popen(cluster.pod_command(index, pod, root, argv), env=env, start_new_session=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        cluster.procs.append(proc)
        timer = threading.Timer(a.timeout, lambda: os.killpg(proc.pid, signal.SIGKILL))
        timer.start()
        assert proc.stdout is not None
        for line in proc.stdout:  # the launcher's log, stamped with seconds since the launcher started
            print(f"[{time.time() - ready:6.1f}s] {line}", end="", flush=True)
        rc = proc.wait()
        if not timer.is_alive():
            print(f"emulate-mpijob: launcher killed after {a.timeout} s", file=sys.stderr)
            rc = 124
        timer.cancel()
        print(f"emulate-mpijob: launcher exited {rc} after {time.time() - ready:.1f} s "
              f"({time.time() - start:.1f} s in all)", flush=True)
        for pod in cluster.pods[1:]:  # what `kubectl logs` would show of the workers' sshd
            for line in (cluster.dir / "pods" / pod / "worker.log").read_text().splitlines():
                if "Accepted" in line or "error" in line.lower() or "refused" in line.lower():
                    print(f"emulate-mpijob: {pod}: {line}", flush=True)
        return rc
    finally:
        cluster.close()
        print(f"emulate-mpijob: removed {cluster.tag} ({socket.gethostname()})", flush=True)


if __name__ == "__main__":
    sys.exit(main())
