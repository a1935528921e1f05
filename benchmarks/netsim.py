"""A simulated cluster on this machine: N network namespaces, one rank each, joined by a bridge, every
node's link shaped with ``tc`` (a token bucket on both ends of its veth pair, so sending and receiving are
each limited to the link rate, full duplex as on a switched Ethernet port).

It follows docker/cluster/netns-cluster.sh (bridge, one veth per node, the FORWARD rule a Docker engine
makes necessary, each node's own /etc/hosts) but launches ranks without sshd: Open MPI's launch agent
(``plm_rsh_agent``) is ``benchmarks/netsim-agent``, which runs ``orted`` inside the namespace named by the
host's address. Everything it creates is removed on exit, also on failure. Needs root and iproute2.

Delay: this kernel has no ``netem`` qdisc (``tc qdisc add ... netem`` answers "unknown"), so latency cannot
be added; the latency of every run is the veth path's own, measured (an MPI ping-pong) and stored with the results.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
AGENT = REPO / "benchmarks" / "netsim-agent"
#: the first node's last octet; the bridge (the launcher's side, mpirun's control traffic) is .1
FIRST = 11


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


class ClusterError(RuntimeError):
    """The cluster could not be built or a job in it failed; the message holds the output."""


class Cluster:
    """``nodes`` namespaces on the bridge ``<tag>br`` with addresses ``<subnet>.11`` upwards.

    ``with Cluster(4) as c: c.shape(1.0); c.mpirun(c.hosts(4), [...])``
    """

    def __init__(self, nodes: int, subnet: str | None = None) -> None:
        if not 2 <= nodes <= 64:
            raise ValueError(f"nodes must be from 2 to 64, got {nodes}")
        self.n = nodes
        self.subnet = subnet or os.environ.get("HVDKIT_NETSIM_SUBNET", "10.78.0")
        self.tag = f"hn{os.getpid() % 100000}"
        self.bridge = f"{self.tag}br"
        self.forward_rule = False
        self.rate_gbit: float | None = None
        self.tmp: str | None = None  # the nodes' Open MPI session directories, one folder each (netsim-agent)

    # -- life cycle -----------------------------------------------------------------------------------
    def __enter__(self) -> Cluster:
        if os.geteuid() != 0:
            raise ClusterError("the simulated cluster needs root (ip netns, tc)")
        for tool in ("ip", "tc", "mpirun"):
            if shutil.which(tool) is None:
                raise ClusterError(f"{tool} not found")
        net = ipaddress.ip_network(f"{self.subnet}.0/24")
        routes = _ip("-4", "route", "show").stdout
        for line in routes.splitlines():  # never take addresses someone else uses
            first = line.split()[0]
            if first != "default" and ipaddress.ip_network(first, strict=False).overlaps(net):
                raise ClusterError(f"subnet {net} is already routed here ({line}); set HVDKIT_NETSIM_SUBNET")
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ns(self, i: int) -> str:
        """Node ``i``'s namespace (0-based); named by its address's last octet, as the agent finds it."""
        return f"{self.tag}-{FIRST + i}"

    def addr(self, i: int) -> str:
        return f"{self.subnet}.{FIRST + i}"

    def hosts(self, k: int, first: int = 0) -> list[str]:
        """The addresses of nodes ``first`` .. ``first + k - 1``."""
        if first + k > self.n:
            raise ValueError(f"the cluster has {self.n} nodes, asked for {first}..{first + k - 1}")
        return [self.addr(i) for i in range(first, first + k)]

    def _build(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix=f"{self.tag}-")
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.subnet}.1/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        nf = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")
        if shutil.which("iptables") and nf.exists() and nf.read_text().strip() == "1":
            # a Docker engine's FORWARD policy DROP would cut the nodes off from each other
            subprocess.run(["iptables", "-w", "-I", "FORWARD", "-i", self.bridge, "-o", self.bridge, "-j", "ACCEPT"],
                           check=True, capture_output=True, timeout=30)
            self.forward_rule = True
        for i in range(self.n):
            ns, host, peer = self.ns(i), f"{self.tag}v{FIRST + i}", f"{self.tag}p{FIRST + i}"
            _ip("netns", "add", ns)
            _ip("link", "add", host, "type", "veth", "peer", "name", peer)
            _ip("link", "set", host, "master", self.bridge, "up")
            _ip("link", "set", peer, "netns", ns)
            _ip("-n", ns, "link", "set", peer, "name", "eth0")
            _ip("-n", ns, "addr", "add", f"{self.addr(i)}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            etc = Path("/etc/netns") / ns
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "hosts").write_text(f"127.0.0.1 localhost\n{self.addr(i)} node{i}\n")

    def _kill(self, hosts: Sequence[str]) -> None:
        """SIGKILL every process in the namespaces of ``hosts`` (addresses)."""
        for host in hosts:
            for pid in _ip("netns", "pids", f"{self.tag}-{host.rsplit('.', 1)[1]}", check=False).stdout.split():
                try:
                    os.kill(int(pid), 9)
                except (ProcessLookupError, ValueError):
                    pass

    def close(self) -> None:
        self._kill(self.hosts(self.n))
        for i in range(self.n):
            ns = self.ns(i)
            _ip("netns", "del", ns, check=False)
            shutil.rmtree(Path("/etc/netns") / ns, ignore_errors=True)
        _ip("link", "del", self.bridge, check=False)
        if self.forward_rule:
            subprocess.run(["iptables", "-w", "-D", "FORWARD", "-i", self.bridge, "-o", self.bridge, "-j", "ACCEPT"],
                           capture_output=True, timeout=30)
            self.forward_rule = False
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None

    # -- links ----------------------------------------------------------------------------------------
    def shape(self, gbit: float | None, nodes: Sequence[int] | None = None) -> None:
        """Limit each node's link (both directions) to ``gbit`` Gbit/s; ``None`` removes the limit."""
        for i in range(self.n) if nodes is None else nodes:
            for dev, prefix in ((f"{self.tag}v{FIRST + i}", []), ("eth0", ["-n", self.ns(i)])):
                subprocess.run(["tc", *prefix, "qdisc", "del", "dev", dev, "root"], capture_output=True, timeout=30)
                if gbit is not None:
                    # burst: 2 ms at the rate (at least 256 KiB, larger than a GSO packet); queue: 20 ms
                    burst = max(256 << 10, int(gbit * 1e9 / 8 * 0.002))
                    subprocess.run(["tc", *prefix, "qdisc", "add", "dev", dev, "root", "tbf", "rate",
                                    f"{gbit * 1000:g}mbit", "burst", str(burst), "latency", "20ms"],
                                   check=True, capture_output=True, text=True, timeout=30)
        if nodes is None:
            self.rate_gbit = gbit

    def latency_ms(self) -> float:
        """The one-way latency between two nodes, in ms: half the median round trip of a 1-byte MPI
        message (this machine has no ping), so it includes what MPI's TCP transport adds, as alpha should."""
        r = self.mpirun(self.hosts(2), "benchmarks.workers.netcoll", ["--algo", "pingpong", "--params", "1"],
                        timeout=120)
        return r["latency_ms"]

    # -- jobs -----------------------------------------------------------------------------------------
    def _env(self, env: dict[str, str] | None) -> dict[str, str]:
        return {**os.environ, "HVDKIT_NETSIM_TAG": self.tag, "HVDKIT_NETSIM_TMP": str(self.tmp),
                "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
                # ranks wait for the network most of the time: let the 2 cores go to the one that can work
                "OMPI_MCA_mpi_yield_when_idle": "1", "OMP_NUM_THREADS": "1", **(env or {})}

    def mpirun(self, hosts: Sequence[str], module: str, args: Sequence[str], env: dict[str, str] | None = None,
               timeout: float = 900) -> dict:
        """Run ``python -m module args --results FILE`` with one rank on each of ``hosts``; rank 0's JSON."""
        import json

        net = f"{self.subnet}.0/24"
        with tempfile.TemporaryDirectory(prefix="hvdkit-netsim-") as tmp:
            out = Path(tmp) / "result.json"
            cmd = ["mpirun", "--allow-run-as-root", "-np", str(len(hosts)), "-H", ",".join(f"{h}:1" for h in hosts),
                   "--bind-to", "none", "--mca", "plm_rsh_agent", str(AGENT), "--mca", "plm_rsh_no_tree_spawn", "1",
                   "--mca", "pml", "ob1", "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", net,
                   "--mca", "oob_tcp_if_include", net,
                   # orted stays the agent's child instead of daemonizing: a daemon that fails to start then
                   # fails the job at once, with its error, instead of leaving mpirun waiting for its call-back
                   "--mca", "orte_leave_session_attached", "1",
                   sys.executable, "-m", module, *args, "--results", str(out)]
            penv = self._env(env)
            for attempt in (1, 2):
                try:
                    proc = subprocess.run(cmd, env=penv, capture_output=True, text=True, timeout=timeout, cwd=REPO,
                                          start_new_session=True)
                    break
                except subprocess.TimeoutExpired:
                    # A guard against a hang of unknown cause (a daemon that dies at start fails the job,
                    # above): clear the job's processes out of its nodes and start it once more.
                    self._kill(hosts)
                    if attempt == 2:
                        raise ClusterError(f"{' '.join(cmd)} did not finish in {timeout:.0f} s, twice") from None
            if proc.returncode != 0 or not out.exists():
                raise ClusterError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n"
                                   f"{proc.stderr[-3000:]}")
            return json.loads(out.read_text())
