"""Launcher contexts: Slurm's host lists and task counts, the rank plan (checked against Horovod's own
get_host_assignments), the SLURM_* -> HOROVOD_* mapping, MPIJob hostfiles, and the errors."""

import importlib.util
import os
import re
import subprocess
import sys

import pytest
from helpers import REPO

from hvdkit.runtime import gloo
from hvdkit.runtime.environments import detect, mpijob, prepare_process, slurm


@pytest.mark.parametrize("text, names", [
    ("node1", ["node1"]),
    ("node[1-3]", ["node1", "node2", "node3"]),
    ("node[1-2,05],gpu-a,x[08-10]y", ["node1", "node2", "node05", "gpu-a", "x08y", "x09y", "x10y"]),
    ("rack[1-2]-node[1-2]", ["rack1-node1", "rack1-node2", "rack2-node1", "rack2-node2"]),
])
def test_expand_hostlist(text, names):
    assert slurm.expand_hostlist(text) == names


@pytest.mark.parametrize("bad, why", [("node[1-x]", "bad range"), ("node[1-2", "unbalanced brackets")])
def test_expand_hostlist_refuses_what_it_cannot_read(bad, why):
    with pytest.raises(ValueError, match=re.escape(f"Slurm host list {bad!r}: {why}")):
        slurm.expand_hostlist(bad)


def test_expand_tasks_per_node():
    assert slurm.expand_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    with pytest.raises(ValueError, match="Slurm tasks per node '2x': cannot read it"):
        slurm.expand_tasks_per_node("2x")


@pytest.mark.skipif(importlib.util.find_spec("horovod") is None, reason="needs Horovod's runner")
@pytest.mark.parametrize("tasks", [[2, 2], [1, 1, 1], [3, 2, 1], [1, 4]])
def test_plan_is_horovods_own(tasks):
    from horovod.runner.common.util.hosts import get_host_assignments, parse_hosts

    hosts = [f"n{i}" for i in range(len(tasks))]
    theirs = get_host_assignments(parse_hosts(",".join(f"{h}:{n}" for h, n in zip(hosts, tasks))), sum(tasks))
    ours = gloo.host_plan(hosts, tasks)
    fields = ("hostname", "rank", "local_rank", "cross_rank", "size", "local_size", "cross_size")
    assert [[getattr(s, f) for f in fields] for s in ours] == [[getattr(s, f) for f in fields] for s in theirs]


def _step(procid, localid, node, nodes="node[1-2]", tasks="2(x2)", **extra):
    return {"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0", "SLURM_PROCID": str(procid), "SLURM_LOCALID": str(localid),
            "SLURMD_NODENAME": node, "SLURM_STEP_NODELIST": nodes, "SLURM_STEP_TASKS_PER_NODE": tasks,
            "SLURM_STEP_NUM_TASKS": "4", "SLURM_JOB_NODELIST": nodes, "SLURM_TASKS_PER_NODE": tasks, **extra}


def test_slurm_gloo_step_gets_horovods_variables():
    env = _step(3, 1, "node2", HOROVOD_GLOO_RENDEZVOUS_ADDR="10.0.0.1", HOROVOD_GLOO_RENDEZVOUS_PORT="4000",
                HVDKIT_GLOO_PLAN="node1:2,node2:2")
    ctx = prepare_process(env)
    assert ctx.kind == "slurm-gloo"
    assert {k: env[k] for k in env if k.startswith("HOROVOD_") and "RENDEZVOUS" not in k} == {
        "HOROVOD_HOSTNAME": "node2", "HOROVOD_RANK": "3", "HOROVOD_SIZE": "4", "HOROVOD_LOCAL_RANK": "1",
        "HOROVOD_LOCAL_SIZE": "2", "HOROVOD_CROSS_RANK": "1", "HOROVOD_CROSS_SIZE": "2",
        "HOROVOD_CONTROLLER": "gloo", "HOROVOD_CPU_OPERATIONS": "gloo"}


def test_slurm_gloo_step_that_does_not_match_the_rendezvous_is_refused():
    env = _step(0, 0, "node1", nodes="node1", tasks="1", HOROVOD_GLOO_RENDEZVOUS_ADDR="10.0.0.1",
                HVDKIT_GLOO_PLAN="node1:2,node2:2")
    with pytest.raises(RuntimeError, match="runs tasks node1:1 but the Gloo rendezvous was sized for node1:2,node2:2"):
        prepare_process(env)


def test_cyclic_placement_is_refused():
    env = _step(1, 0, "node2", HOROVOD_GLOO_RENDEZVOUS_ADDR="10.0.0.1")
    with pytest.raises(RuntimeError, match="not block-wise"):
        prepare_process(env)


def test_srun_without_wire_up_is_a_clear_error():
    env = _step(0, 0, "node1")
    with pytest.raises(RuntimeError, match="srun started 4 tasks but nothing connects them"):
        prepare_process(env)
    assert "HOROVOD_RANK" not in env


@pytest.mark.parametrize("env, kind", [
    ({}, "local"),
    ({"HOROVOD_RANK": "0", "HOROVOD_HOSTNAME": "h", "HOROVOD_SIZE": "2"}, "horovodrun"),
    ({**_step(0, 0, "node1"), "PMIX_RANK": "0"}, "mpi"),
    ({"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "node[1-2]", "SLURM_TASKS_PER_NODE": "2(x2)"}, "slurm-allocation"),
    ({**_step(0, 0, "node1", SLURM_STEP_NUM_TASKS="1")}, "slurm-step"),
])
def test_detect(env, kind, monkeypatch):
    monkeypatch.setattr(mpijob, "HOSTFILE", "/nonexistent/hostfile")
    ctx = detect(dict(env))
    assert ctx.kind == kind
    assert ctx.detail and ctx.uses


def test_srun_pmix_is_named_as_such():
    ctx = detect({**_step(2, 0, "node2"), "PMIX_RANK": "2"})
    assert "srun --mpi=pmix" in ctx.detail and "job 7" in ctx.detail


def test_mpijob_hostfile(tmp_path):
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("job-worker-0.job.default.svc slots=2\njob-worker-1.job.default.svc slots=2\n\n")
    (tmp_path / "discover_hosts.sh").write_text("#!/bin/sh\n")
    env = {"K_MPI_JOB_ROLE": "launcher", "OMPI_MCA_orte_default_hostfile": str(hostfile)}
    assert mpijob.read_hostfile(str(hostfile)) == [("job-worker-0.job.default.svc", 2),
                                                  ("job-worker-1.job.default.svc", 2)]
    ctx = detect(env)
    assert ctx.kind == "mpijob"
    assert "2 worker(s), 4 slot(s)" in ctx.detail and "elastic" in ctx.detail
    hostfile.write_text("a slots=two\n")
    with pytest.raises(ValueError, match="hostfile:1: slots must be an integer, got 'two'"):
        mpijob.read_hostfile(str(hostfile))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("env, message", [
    ({"SLURM_JOB_ID": "1"}, "SLURM_JOB_NODELIST is not set"),
    ({"SLURM_JOB_ID": "1", "SLURM_JOB_NODELIST": "node[1-2]"}, "SLURM_TASKS_PER_NODE is not set"),
    ({"SLURM_JOB_ID": "1", "SLURM_JOB_NODELIST": "node[1-2]", "SLURM_TASKS_PER_NODE": "0(x2)"},
     "SLURM_TASKS_PER_NODE must give every node at least 1 task, got '0(x2)'"),
    ({"SLURM_JOB_ID": "1", "SLURM_JOB_NODELIST": "node[1-2]", "SLURM_TASKS_PER_NODE": "2(x3)"},
     "2 hosts but task counts for 3"),
    ({"SLURM_JOB_ID": "1", "SLURM_JOB_NODELIST": "node1", "SLURM_TASKS_PER_NODE": "1", "HVDKIT_SRUN_ARGS": '"a'},
     "HVDKIT_SRUN_ARGS must be srun options as a shell would split them, got '\"a'"),
])
def test_slurm_gloo_refuses_an_allocation_it_cannot_read_in_one_line(env, message):
    # the real command, in an environment with no Slurm of its own: it must stop before starting anything
    base = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    proc = subprocess.run([sys.executable, "-m", "hvdkit", "slurm-gloo", "python", "-c", "pass"], capture_output=True,
                          text=True, timeout=50, cwd=REPO, env={**base, "PYTHONPATH": str(REPO), **env})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and f"hvdkit slurm-gloo: {message}" in proc.stderr, proc.stderr
    assert "srun" not in proc.stdout  # nothing was started


@pytest.mark.parametrize("env, problem", [
    ({}, None),
    ({"HOROVOD_RANK": "0", "HOROVOD_SIZE": "1"}, None),
    ({"HOROVOD_RANK": "5", "HOROVOD_SIZE": "2"}, "HOROVOD_RANK=5 and HOROVOD_SIZE=2 set, but no launcher"),
    ({"HOROVOD_RANK": "1"}, "HOROVOD_RANK=1 set, but no launcher"),
])
def test_a_rank_no_launcher_started_is_a_problem(env, problem, monkeypatch):
    monkeypatch.setattr(mpijob, "HOSTFILE", "/nonexistent/hostfile")
    ctx = detect(dict(env))
    assert ctx.kind == "local"
    assert (ctx.problem is None) if problem is None else (problem in ctx.problem and "horovodrun -np N" in ctx.problem)
    if problem:
        with pytest.raises(RuntimeError, match="train alone as rank 0 of 1"):
            prepare_process(dict(env))
