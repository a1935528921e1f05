"""``benchmarks/run network`` for real at its smallest: 2 nodes in network namespaces with 1 Gbit/s links, a
2 M-parameter payload, ring (Horovod) and one parameter server, each row next to its analytic bound and hvdkit
plan's prediction. The full run is ``scripts/slow-checks.sh network``; the tree (8 nodes) stays there."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, requires_horovod

# netsim puts a bridge with an address in the host namespace
pytestmark = [requires_horovod, pytest.mark.horovod, pytest.mark.shares("host-network")]

KEYS = {"algorithm", "nodes", "link_gbit", "latency_ms", "payload_bytes", "seconds", "seconds_iqr", "bound_seconds"}


@pytest.mark.timeout(300)
def test_network_smoke_two_nodes(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("network namespaces and tc need root")
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "run"), "network", "--quick", "--out",
                           str(tmp_path)], capture_output=True, text=True, timeout=280, cwd=REPO,
                          env={**os.environ, "HVDKIT_NETWORK_GRID": "smoke"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    net = json.loads((tmp_path / "results.json").read_text())["suites"]["network"]
    rows = {r["algorithm"]: r for r in net["rows"]}
    assert set(rows) == {"ring (Horovod, MPI)", "parameter server (1 server)"}
    for r in rows.values():
        assert KEYS <= set(r), r
        assert (r["nodes"], r["link_gbit"], r["payload_bytes"]) == (2, 1.0, 8_000_000)
        assert r["seconds_iqr"][0] <= r["seconds"] <= r["seconds_iqr"][1] and len(r["rounds"]) == 3
        # shaped to 1 Gbit/s: no reduction beats its bandwidth bound by more than the token bucket's burst
        assert r["seconds"] > 0.7 * r["bound_seconds"] > 0, r
    # 8 MB pushed and pulled through one server's link takes longer than the ring's exchange of half of it
    assert rows["parameter server (1 server)"]["seconds"] > rows["ring (Horovod, MPI)"]["seconds"]
    report = (tmp_path / "report.md").read_text()
    assert "| parameter server (1 server) | 2 | 1 |" in report and "hvdkit plan's error" in report
    assert (tmp_path / "network-efficiency.png").read_bytes()[:4] == b"\x89PNG"
    # everything the run created is gone: no namespace, no bridge of its own is left
    for what in (["netns", "list"], ["link", "show"]):
        left = subprocess.run(["ip", *what], capture_output=True, text=True, timeout=30).stdout
        assert net["cluster"] not in left, left


def _root() -> None:
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")


@pytest.mark.timeout(60)
def test_each_node_keeps_its_own_open_mpi_session_directory():
    """The nodes share this machine's /tmp and hostname: with one session directory, an orted starting
    clears another's, which then dies unseen and its launch hangs. The agent gives each node its own."""
    from benchmarks.netsim import AGENT, Cluster

    _root()
    with Cluster(2) as c:
        got = [subprocess.run([str(AGENT), "-x", host, "echo $OMPI_MCA_orte_tmpdir_base"], env=c._env(None),
                              capture_output=True, text=True, timeout=30, check=True).stdout.strip()
               for host in c.hosts(2)]
        assert len(set(got)) == 2 and all(os.path.dirname(d) == c.tmp for d in got), got
        tmp = c.tmp
    assert not os.path.exists(tmp)  # removed with the cluster


@pytest.mark.timeout(60)
def test_a_daemon_that_cannot_start_fails_the_job_at_once():
    """A node's orted that dies in its start-up (here: its session directory cannot be made) fails the job
    with the daemon's own error, instead of mpirun waiting for it until the time limit, twice."""
    from benchmarks.netsim import Cluster, ClusterError

    _root()
    with Cluster(2) as c:
        (Path(c.tmp) / c.hosts(2)[1].rsplit(".", 1)[1]).write_text("a file where the directory would go")
        with pytest.raises(ClusterError, match="orte_session_dir failed"):
            c.mpirun(c.hosts(2), "benchmarks.workers.netcoll", ["--algo", "pingpong", "--params", "1"], timeout=20)
