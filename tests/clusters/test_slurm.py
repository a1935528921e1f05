"""Slurm for real: docker/slurm/slurm-cluster.sh builds slurmctld + slurmd nodes in network/UTS
namespaces (munge key made at start), and sbatch trains an example across two nodes with MPI
(srun --mpi=pmix) and with Gloo only (hvdkit slurm-gloo); a node dies and the --requeue job resumes
from its checkpoint; SIGUSR1 (--signal=USR1@60) stops a job with a checkpoint and it is requeued
without losing a step. Times are printed (pytest -s) and quoted in docs/clusters.md.

The two jobs on the cluster, the file's slow part, are ``slow_check`` tests that
``scripts/slow-checks.sh`` runs; CI checks the Slurm launcher with tests/clusters/test_launcher_environments.py
(host lists, the rank plan against Horovod's own, the SLURM_* -> HOROVOD_* mapping) and keeps the cleanup and
shellcheck tests here."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, requires_horovod

# namespace clusters on host bridges and iptables: one at a time (and never beside a dockerd starting)
pytestmark = pytest.mark.shares("host-network")

CLUSTER = REPO / "docker/slurm/slurm-cluster.sh"
DRIVER = REPO / "tests/workers/slurm_driver.py"


def _ready():
    if os.geteuid() != 0:
        pytest.skip("the namespace Slurm cluster needs root")


def _leftovers():
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30).stdout
    ours = [line for line in ns.splitlines() if re.match(r"hs\d+-", line)]
    daemons = subprocess.run(["pgrep", "-f", "hvdkit-slurm\\."], capture_output=True, text=True, timeout=30).stdout
    return ours, list(Path("/run").glob("hvdkit-slurm.*")), daemons.split()


def cluster(command: str, timeout: float, nodes: int = 2) -> subprocess.CompletedProcess:
    env = {**os.environ, "HVDKIT_SLURM_NODES": str(nodes), "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.run(["bash", str(CLUSTER), "bash", "-c", command], capture_output=True, text=True,
                          timeout=timeout, env=env, start_new_session=True)


def reports(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.startswith('{"job"')]


def first(report: dict, pattern: str, after: float = 0) -> float:
    t = next((t for t, line in report["lines"] if t >= after and re.search(pattern, line)), None)
    assert t is not None, f"no line matching {pattern!r}:\n" + "\n".join(x for _, x in report["lines"])
    return t


@pytest.mark.timeout(60)
def test_cluster_failure_still_cleans_up():
    _ready()
    proc = cluster("false", timeout=50)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "slurm-cluster: 2 nodes idle" in proc.stdout and "slurm-cluster: removed (exit 1)" in proc.stdout
    assert _leftovers() == ([], [], [])


@requires_horovod
@pytest.mark.slow_check
@pytest.mark.horovod
@pytest.mark.timeout(330)
def test_sbatch_trains_on_two_nodes_with_mpi_and_with_gloo(tmp_path):
    """One cluster: the MPI job (srun --mpi=pmix), the same with mpirun inside the allocation, the Gloo
    job (hvdkit slurm-gloo), an srun step with no wire-up (refused before training), and hvdkit doctor
    in a step and in an allocation."""
    _ready()
    run = f"{sys.executable} {DRIVER} --timeout 150"
    script = (
        f"set -e; srun --mpi=list; export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; "
        f"{run} --out {tmp_path}/mpi examples/slurm/train.sbatch examples/pytorch_mnist.py --epochs 2; "
        f"{run} --out {tmp_path}/mpirun examples/slurm/train-mpirun.sbatch examples/pytorch_mnist.py --epochs 2; "
        f"{run} --out {tmp_path}/gloo examples/slurm/train-gloo.sbatch examples/pytorch_mnist.py --epochs 2; "
        f"timeout 120 srun -N2 -n2 {sys.executable} -c 'import hvdkit.torch as hk; hk.init()' "
        f"> {tmp_path}/nowire.txt 2>&1 || true; "
        f"timeout 120 srun -N1 -n1 hvdkit doctor --json > {tmp_path}/doctor-step.json || true; "
        f"timeout 120 sbatch --wait -N2 --ntasks-per-node=2 -o {tmp_path}/doctor.json --wrap 'hvdkit doctor --json'")
    proc = cluster(script, timeout=320)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert "pmix" in proc.stdout
    mpi, mpirun, gloo = reports(proc.stdout)
    for name, r in (("srun --mpi=pmix", mpi), ("mpirun", mpirun), ("hvdkit slurm-gloo", gloo)):
        text = "\n".join(line for _, line in r["lines"])
        assert r["state"] == "COMPLETED" and r["exit_code"] == "0:0", text
        assert "on node[1-2] (4 tasks)" in text and "4 workers x batch 32" in text, text
        assert re.search(r"epoch +2/2 .*val_accuracy 0\.\d+", text), text
        started = first(r, r"^hvdkit-slurm: job \d+ started")
        print(f"{name}: submit -> job start {started - r['submitted']:.1f} s, job start -> training "
              f"{first(r, '^training on') - started:.1f} s, -> epoch 1 done {first(r, 'epoch +1/2') - started:.1f} s")
    gloo_text = "\n".join(line for _, line in gloo["lines"])
    assert "hvdkit slurm-gloo: 4 ranks on node1:2,node2:2, rendezvous 10.78.0.11:" in gloo_text
    # Same seeds, same data, same plan: the three launches train to the same numbers.
    final = {re.search(r"epoch +2/2 .*", "\n".join(x for _, x in r["lines"])).group(0) for r in (mpi, mpirun, gloo)}
    assert len(final) == 1, final
    assert "srun started 2 tasks but nothing connects them" in (tmp_path / "nowire.txt").read_text()
    step = json.loads((tmp_path / "doctor-step.json").read_text())["facts"]["launcher"]
    assert step["kind"] == "slurm-step" and "task 0 of 1 on node1" in step["detail"]
    alloc = json.loads((tmp_path / "doctor.json").read_text())["facts"]["launcher"]
    assert alloc["kind"] == "slurm-allocation" and "nodes node[1-2], tasks per node 2(x2)" in alloc["detail"]
    assert "srun --mpi=pmix" in alloc["uses"] and "hvdkit slurm-gloo" in alloc["uses"]
    assert _leftovers() == ([], [], [])


@requires_horovod
@pytest.mark.slow_check
@pytest.mark.horovod
@pytest.mark.timeout(300)
def test_requeued_job_resumes_from_its_checkpoint_after_a_node_dies(tmp_path):
    """3 nodes, a 2-node --requeue job; node2 dies after epoch 3 (link down, every process killed).
    Slurm marks it DOWN after SlurmdTimeout, requeues the job, which starts on node1+node3 and resumes
    from the newest checkpoint: no completed epoch is trained twice."""
    _ready()
    metrics = tmp_path / "metrics.jsonl"
    script = (f"{sys.executable} {DRIVER} --timeout 240 --out {tmp_path}/job --lose node2 --lose-when 'epoch +3/' "
              f"examples/slurm/train-requeue.sbatch {tmp_path}/ckpt examples/pytorch_mnist.py --epochs 12 "
              f"--batch-size 8 --metrics-file {metrics}")
    proc = cluster(script, timeout=280, nodes=3)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    (r,) = reports(proc.stdout)
    text = "\n".join(line for _, line in r["lines"])
    assert r["state"] == "COMPLETED" and r["restarts"] == 1, text
    assert r["nodes"] == "node[1,3]", text
    assert "DUE TO NODE FAILURE" in text and "(restart 1) started" in text, text
    lost = r["lost_at"]
    before = [int(m.group(1)) for t, line in r["lines"] if t <= lost and (m := re.match(r"epoch +(\d+)/12", line))]
    after = [int(m.group(1)) for t, line in r["lines"] if t > lost and (m := re.match(r"epoch +(\d+)/12", line))]
    assert before and after and after[-1] == 12, text
    # Resumed from the newest checkpoint: right after the last epoch it finished (Checkpoint every epoch).
    assert after[0] == before[-1] + 1, text
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert [row["epoch"] for row in rows] == list(range(1, 13))
    steps_per_epoch = rows[0]["global_step"]
    restarted = first(r, r"\(restart 1\) started", after=lost)
    resumed = first(r, r"^training on", after=lost)
    print(f"node loss -> Slurm's NODE FAILURE {first(r, 'DUE TO NODE FAILURE') - lost:.1f} s, -> requeued job "
          f"starts {restarted - lost:.1f} s, -> training resumed {resumed - lost:.1f} s, -> next epoch done "
          f"{first(r, f'epoch +{after[0]}/12', after=lost) - lost:.1f} s; redone: 0 completed epochs, at most "
          f"the {steps_per_epoch} steps of epoch {after[0]} in flight")
    assert _leftovers() == ([], [], [])


@requires_horovod
@pytest.mark.slow_check
@pytest.mark.horovod
@pytest.mark.timeout(420)
def test_usr1_preemption_checkpoints_requeues_and_loses_no_step(tmp_path):
    """2 nodes, the same training twice: straight through, and sent SIGUSR1 during epoch 3 (what
    ``--signal=USR1@60`` sends before the time limit), after which examples/slurm/train-preempt.sbatch
    requeues it. The requeued run resumes at the step after the stop and ends with the same validation
    metrics, epoch by epoch, as the uninterrupted run: no step lost, none trained twice."""
    _ready()
    args = "examples/pytorch_mnist.py --epochs 4 --batch-size 16"
    run = f"{sys.executable} {DRIVER} --timeout 180"
    script = (f"set -e; {run} --out {tmp_path}/straight examples/slurm/train-preempt.sbatch {tmp_path}/ckpt-a "
              f"{args} --metrics-file {tmp_path}/a.jsonl; "
              f"{run} --out {tmp_path}/preempted --signal USR1 --signal-when 'epoch +2/' "
              f"examples/slurm/train-preempt.sbatch {tmp_path}/ckpt-b {args} --metrics-file {tmp_path}/b.jsonl")
    proc = cluster(script, timeout=400)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    straight, preempted = reports(proc.stdout)
    text = "\n".join(line for _, line in preempted["lines"])
    assert straight["state"] == "COMPLETED" and straight["restarts"] == 0
    assert preempted["state"] == "COMPLETED" and preempted["restarts"] == 1, text
    assert "stopped on a signal (exit 138)" in text and "(restart 1) started" in text, text
    stop = re.search(r"SIGUSR1: stopped after step (\d+) \(epoch (\d+)\); wrote (\S+)", text)
    assert stop and int(stop.group(2)) >= 2, text
    a, b = ([json.loads(line) for line in (tmp_path / f).read_text().splitlines()] for f in ("a.jsonl", "b.jsonl"))
    assert [row["epoch"] for row in b] == [row["epoch"] for row in a] == [1, 2, 3, 4]
    val = sorted(k for k in a[0] if k.startswith("val_"))
    assert val and [[row[k] for k in val] for row in b] == [[row[k] for k in val] for row in a]
    assert b[-1]["global_step"] == a[-1]["global_step"]
    signalled = preempted["signalled_at"]
    restarted = first(preempted, r"\(restart 1\) started", after=signalled)
    print(f"SIGUSR1 -> ranks stopped with the checkpoint of step {stop.group(1)} "
          f"{first(preempted, 'SIGUSR1: stopped', after=signalled) - signalled:.1f} s, -> requeued job starts "
          f"{restarted - signalled:.1f} s, -> training resumed "
          f"{first(preempted, '^training on', after=signalled) - signalled:.1f} s; steps lost: 0 (same metrics)")
    assert _leftovers() == ([], [], [])


@pytest.mark.timeout(60)
def test_slurm_scripts_pass_shellcheck():
    if subprocess.run(["which", "shellcheck"], capture_output=True, timeout=10).returncode != 0:
        if os.environ.get("CI") == "true":
            pytest.fail("shellcheck is not installed (scripts/bootstrap.sh installs it)")
        pytest.skip("shellcheck not installed")
    files = [*map(str, (REPO / "docker/slurm").glob("*.sh")), *map(str, (REPO / "examples/slurm").glob("*.sbatch"))]
    proc = subprocess.run(["shellcheck", "-x", *files], capture_output=True, text=True, timeout=50)
    assert proc.returncode == 0, proc.stdout
