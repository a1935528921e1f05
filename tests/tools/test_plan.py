"""``hvdkit plan``: the analytic costs, the recommendation it derives from them, its input checks and its CLI
(a real subprocess; a real safetensors file for ``--model``). Its error against the simulated cluster is measured
by ``benchmarks/run network`` (docs/choosing-an-algorithm.md)."""

import json
import subprocess
import sys

import numpy as np
import pytest
from helpers import REPO

from hvdkit.tools import plan

MB100 = 25_000_000  # float32 parameters: 100 MB, 0.8 s over 1 Gbit/s


@pytest.mark.parametrize("algorithm, nodes, seconds", [
    ("ring", 4, 2 * 3 / 4 * 0.8),           # 2(n-1)/n S/B
    ("ring_fp16", 4, 2 * 3 / 4 * 0.4),      # half the bytes
    ("tree", 4, 2 * 2 * 0.8),               # 2 log2(n) S/B
    ("tree", 5, 2 * 3 * 0.8),               # log2 rounded up: a fifth node adds a level
    ("recursive_doubling", 8, 3 * 0.8),     # log2(n) S/B
    ("ps", 4, 2 * 4 * 0.8),                 # 2 n S/B
    ("ps_sharded", 4, 4 * 0.8),             # 2 n S/(2 B)
])
def test_bandwidth_terms_are_the_textbook_bounds(algorithm, nodes, seconds):
    assert plan.bound_seconds(algorithm, MB100, nodes, 1.0, 0.0) == pytest.approx(seconds)


@pytest.mark.parametrize("ranks, steps", [
    (2, 1 + 1),           # a chain reduce, a binary-tree broadcast: one transfer each
    (4, 3 + 3),           # linear reduce, chain broadcast: the root's link carries n-1 copies each way
    (8, 3 + 7),           # binomial reduce, linear broadcast
    (16, 4 + 2 * 15 / 16),  # scatter + allgather broadcast
    (64, 6 + 3 * 3),      # radix-4 k-nomial broadcast: 3 children per level
])
def test_tree_follows_open_mpi_choice_of_reduce_and_broadcast(ranks, steps):
    assert plan.model_seconds("tree", MB100, ranks, 1.0, 0.0) == pytest.approx(steps * 0.8)  # 0.8 s each
    assert plan.predict_seconds("tree", MB100, ranks, 1.0, 0.0) == pytest.approx(steps * 0.8 / plan.EFFICIENCY["tree"])
    assert plan.model_seconds("ring", MB100, ranks, 1.0, 0.0) == plan.bound_seconds("ring", MB100, ranks, 1.0, 0.0)


def test_latency_adds_one_alpha_per_sequential_message():
    a = 0.5  # ms
    assert plan.bound_seconds("ring", 1, 8, 1e6, a) == pytest.approx(2 * 7 * a / 1e3, rel=1e-3)
    assert plan.bound_seconds("tree", 1, 8, 1e6, a) == pytest.approx(2 * 3 * a / 1e3, rel=1e-3)


def test_single_server_falls_behind_ring_as_nodes_grow():
    gap = [plan.bound_seconds("ps", MB100, n, 1.0, 0.05) / plan.bound_seconds("ring", MB100, n, 1.0, 0.05)
           for n in (2, 4, 8, 16)]
    assert gap == sorted(gap) and gap[1] > 1.5


def test_recommends_fp16_when_communication_bound_and_not_when_compute_bound():
    slow_link = plan.plan(MB100, 8, 1.0, 0.05, step_ms=100)
    assert slow_link["recommended"]["fp16_compression"] is True
    assert slow_link["recommended"]["algorithm"] == "ring"
    assert slow_link["algorithms"]["ring"]["efficiency"] < slow_link["recommended"]["efficiency"] < 1
    fast_link = plan.plan(1_000_000, 2, 100.0, 0.01, step_ms=1000)
    assert fast_link["recommended"]["fp16_compression"] is False
    assert fast_link["recommended"]["efficiency"] > 0.99


def test_hierarchical_only_with_several_ranks_per_node_and_chosen_when_latency_dominates():
    assert "hierarchical" not in plan.plan(MB100, 4, 10.0, 0.05, step_ms=100)["algorithms"]
    many = plan.plan(1_000_000, 16, 25.0, 1.0, step_ms=100, ranks_per_node=8)
    assert many["recommended"]["algorithm"] == "hierarchical" and many["recommended"]["hierarchical"] is True
    assert "HOROVOD_HIERARCHICAL_ALLREDUCE=1" in " ".join(many["advice"])


def test_fusion_threshold_grows_with_latency_and_stays_in_range():
    low, high = (plan.fusion_threshold_bytes(8, 10.0, a) for a in (0.01, 1.0))
    assert 1 << 20 <= low < high <= 256 << 20


def test_unknown_algorithm_is_refused_by_name():
    with pytest.raises(ValueError, match=r"algorithm must be one of ring, .* got 'butterfly'"):
        plan.bound_seconds("butterfly", 1, 2, 1.0, 0.0)


def _cli(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "hvdkit.cli", "plan", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("args, message", [
    (["--params", "25e6", "--nodes", "1", "--link-gbit", "1", "--step-ms", "100"],
     "argument --nodes: must be an integer between 2 and 1e+06, got '1'"),
    (["--params", "25e6", "--nodes", "4", "--link-gbit", "0", "--step-ms", "100"],
     "argument --link-gbit: must be a number > 0 and <= 1e+06, got '0'"),
    (["--params", "1.5", "--nodes", "4", "--link-gbit", "1", "--step-ms", "100"],
     "argument --params: must be an integer between 1 and 1e+15, got '1.5'"),
    (["--params", "25e6", "--nodes", "4", "--link-gbit", "1", "--step-ms", "nan"],
     "argument --step-ms: must be a number > 0 and <= 1e+09, got 'nan'"),
    (["--params", "25e6", "--nodes", "4", "--link-gbit", "1", "--step-ms", "100", "--latency-ms", "-1"],
     "argument --latency-ms: must be a number between 0 and 1e+06, got '-1'"),
    # numbers too large to mean anything: refused, not an OverflowError or a nonsense plan
    (["--params", "1e308", "--nodes", "4", "--link-gbit", "1", "--step-ms", "100"],
     "argument --params: must be an integer between 1 and 1e+15, got '1e308'"),
    (["--params", "25e6", "--nodes", "1e300", "--ranks-per-node", "1e300", "--link-gbit", "1", "--step-ms", "100"],
     "argument --nodes: must be an integer between 2 and 1e+06, got '1e300'"),
    (["--params", "25e6", "--nodes", "4", "--link-gbit", "1", "--step-ms", "100", "--servers", "1e12"],
     "argument --servers: must be an integer between 1 and 1024, got '1e12'"),
    (["--model", "missing.safetensors", "--nodes", "4", "--link-gbit", "1", "--step-ms", "100"],
     "--model must be a safetensors file, got 'missing.safetensors'"),
])
def test_bad_input_is_refused_naming_argument_and_value(args, message):
    proc = _cli(*args)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


@pytest.mark.timeout(120)
def test_cli_counts_a_safetensors_model_and_prints_json(tmp_path):
    from safetensors.numpy import save_file

    path = tmp_path / "model.safetensors"
    save_file({"w": np.zeros((300, 1000), np.float32), "b": np.zeros(1000, np.float32)}, str(path))
    proc = _cli("--model", str(path), "--nodes", "4", "--link-gbit", "1", "--step-ms", "50", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["inputs"]["params"] == 301_000
    assert out["algorithms"]["ring"]["comm_ms"] == pytest.approx(
        plan.predict_seconds("ring", 301_000, 4, 1.0, 0.05) * 1e3)
    text = _cli("--params", "110e6", "--nodes", "8", "--link-gbit", "25", "--step-ms", "300")
    assert text.returncode == 0 and "expected scaling efficiency" in text.stdout and "algorithm: ring" in text.stdout


@pytest.mark.timeout(60)
def test_plan_imports_no_framework():
    code = ("import sys, hvdkit.tools.plan; bad = {'torch', 'tensorflow', 'keras'} & set(sys.modules); "
            "assert not bad, bad")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=50, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
