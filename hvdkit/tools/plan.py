"""``hvdkit plan``: how long a data-parallel step's gradient reduction takes on a cluster, per algorithm, and
what to choose.

    hvdkit plan --params 25e6 --nodes 8 --link-gbit 10 --latency-ms 0.05 --step-ms 120
    hvdkit plan --model model.safetensors --nodes 4 --ranks-per-node 4 --link-gbit 25 --step-ms 300 --json

The model is each algorithm's analytic cost (bandwidth term over the per-node link, plus one latency per
sequential message), with one efficiency factor per algorithm measured on the simulated cluster
(``benchmarks/run network``); docs/choosing-an-algorithm.md has its measured error on configurations it was
not calibrated on. Pure Python: no framework is imported.
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

#: algorithm -> what it is (the keys :func:`predict_seconds` takes)
ALGORITHMS = {
    "ring": "ring allreduce (Horovod's default)",
    "ring_fp16": "ring allreduce with fp16 compression (half the bytes, a cast each way)",
    "hierarchical": "hierarchical allreduce (inside each node first, then a ring across nodes)",
    "recursive_doubling": "recursive doubling (log2 n exchanges of the whole buffer)",
    "tree": "reduce, then broadcast (Open MPI's allreduce algorithm 2)",
    "ps": "one parameter server (every worker pushes to it and pulls from it)",
    "ps_sharded": "sharded parameter servers (one shard each, on nodes of their own)",
}
#: model_seconds / measured time, per algorithm, on the simulated cluster (1 Gbit/s links; the configurations in
#: CALIBRATED_ON, docs/choosing-an-algorithm.md); hierarchical is not measured there (one rank per node): ring's
EFFICIENCY = {"ring": 0.87, "ring_fp16": 0.87, "hierarchical": 0.87, "recursive_doubling": 0.78, "tree": 0.91,
              "ps": 0.90, "ps_sharded": 0.87}
#: seconds per parameter of hvdkit's fp16 compression (casts into reused buffers, 1.5 ns, and float16 sums) on one
#: CPU core of its own (on a GPU they cost next to nothing): benchmarks/workers/fp16_cost.py
CAST_SECONDS_PER_PARAM = 2.5e-9
#: (nodes, parameters) of the simulated runs the factors come from; every other configuration is held out
CALIBRATED_ON = {(2, 25_000_000), (8, 25_000_000)}
#: bandwidth inside one node, for hierarchical allreduce's local step (shared memory or NVLink: well above a NIC)
INTRA_NODE_GBIT = 100.0


def _log2(n: int) -> int:
    return max(1, math.ceil(math.log2(n)))


def bound_seconds(algorithm: str, params: float, nodes: int, link_gbit: float, latency_ms: float, *,
                  dtype_bytes: int = 4, servers: int = 2, ranks_per_node: int = 1) -> float:
    """The analytic time of one reduction of ``params`` values of ``dtype_bytes`` each over full-duplex links of
    ``link_gbit`` Gbit/s per node and ``latency_ms`` one-way latency: ring 2(n-1)/n S/B + 2(n-1) a, tree
    2 log2(n) (S/B + a), recursive doubling log2(n) (S/B + a), one server 2 n S/B + 2 a, s sharded servers
    2 n S/(s B) + 2 a. With several ranks per node, ring and tree count every rank (n = nodes x ranks)."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {', '.join(ALGORITHMS)}, got {algorithm!r}")
    size = params * (2 if algorithm == "ring_fp16" else dtype_bytes)
    t = size * 8 / (link_gbit * 1e9)  # S / B
    a = latency_ms / 1e3
    n = nodes * ranks_per_node
    if algorithm in ("ring", "ring_fp16"):
        return 2 * (n - 1) / n * t + 2 * (n - 1) * a
    if algorithm == "hierarchical":
        local = 2 * (ranks_per_node - 1) / ranks_per_node * size * 8 / (INTRA_NODE_GBIT * 1e9)
        return local + 2 * (nodes - 1) / nodes * t + 2 * (nodes - 1) * a
    if algorithm == "recursive_doubling":
        return _log2(n) * (t + a)
    if algorithm == "tree":
        return 2 * _log2(n) * (t + a)
    if algorithm == "ps":
        return 2 * n * t + 2 * a
    return 2 * n * t / servers + 2 * a


def model_seconds(algorithm: str, params: float, nodes: int, link_gbit: float, latency_ms: float, **kw: Any) -> float:
    """:func:`bound_seconds`, but the tree as Open MPI 4.1 runs it (what ``EFFICIENCY`` divides): whole-buffer
    transfers in a row on the busiest link, buffers >= 1 MiB. Its fixed rules pick a chain or linear reduce below 8
    ranks (n-1 transfers), binomial above (log2 n); a chain, binary or linear broadcast below 16 (n-1), scatter +
    allgather for 16-31 and from 1024 (about 2), a radix-4 k-nomial tree between (3 log4 n)."""
    if algorithm != "tree":
        return bound_seconds(algorithm, params, nodes, link_gbit, latency_ms, **kw)
    n = nodes * kw.get("ranks_per_node", 1)
    steps = (n - 1 if n < 8 else _log2(n)) + (
        n - 1 if n < 16 else 2 * (n - 1) / n if n < 32 or n >= 1024 else 3 * math.ceil(math.log(n, 4)))
    return steps * (params * kw.get("dtype_bytes", 4) * 8 / (link_gbit * 1e9) + latency_ms / 1e3)


def predict_seconds(algorithm: str, params: float, nodes: int, link_gbit: float, latency_ms: float, *,
                    cores_per_rank: float = 1.0, **kw: Any) -> float:
    """:func:`model_seconds` (``dtype_bytes``, ``servers``, ``ranks_per_node``) over the algorithm's measured
    efficiency, plus fp16's casts on ``cores_per_rank`` CPU cores (below 1 where ranks share cores, as on the
    simulated cluster)."""
    t = model_seconds(algorithm, params, nodes, link_gbit, latency_ms, **kw) / EFFICIENCY[algorithm]
    return t + (params * CAST_SECONDS_PER_PARAM / min(1.0, cores_per_rank) if algorithm == "ring_fp16" else 0.0)


def fusion_threshold_bytes(nodes: int, link_gbit: float, latency_ms: float, ranks_per_node: int = 1) -> int:
    """The smallest fused-buffer size whose latency cost stays under 5 % of its transfer time on a ring (2(n-1)
    latencies against 2(n-1)/n of the buffer), within 1-256 MiB; Horovod's default is 128 MiB."""
    n = nodes * ranks_per_node
    need = latency_ms / 1e3 * n / 0.05 * link_gbit * 1e9 / 8
    return int(min(256 << 20, max(1 << 20, 2 ** math.ceil(math.log2(max(need, 1))))))


def plan(params: float, nodes: int, link_gbit: float, latency_ms: float, step_ms: float, *,
         ranks_per_node: int = 1, servers: int = 2, dtype_bytes: int = 4) -> dict[str, Any]:
    """Predicted communication per step for every algorithm, the scaling efficiency it leaves (a step's compute
    over compute + communication: no overlap with the backward pass assumed, so a floor) and a recommendation."""
    kw = {"dtype_bytes": dtype_bytes, "servers": servers, "ranks_per_node": ranks_per_node}
    algos = [a for a in ALGORITHMS if a != "hierarchical" or ranks_per_node > 1]
    comm = {a: predict_seconds(a, params, nodes, link_gbit, latency_ms, **kw) * 1e3 for a in algos}
    rows = {a: {"comm_ms": comm[a], "efficiency": step_ms / (step_ms + comm[a]), "what": ALGORITHMS[a]}
            for a in algos}
    horovod = [a for a in ("ring", "hierarchical") if a in comm]
    best = min(horovod, key=comm.__getitem__)
    # worth its precision loss only when it saves a fifth of the communication and a twentieth of the step
    fp16 = comm["ring_fp16"] < 0.8 * comm["ring"] and comm["ring"] - comm["ring_fp16"] > 0.05 * step_ms
    fastest = min(comm, key=comm.__getitem__)
    fusion = fusion_threshold_bytes(nodes, link_gbit, latency_ms, ranks_per_node)
    advice = [f"algorithm: {ALGORITHMS[best]} ({comm[best]:.1f} ms per step)",
              "compression: fp16 (hvdkit compression='fp16'): predicted "
              f"{comm['ring_fp16']:.1f} ms against {comm['ring']:.1f} ms" if fp16 else
              f"compression: none (fp16 would save too little: {comm['ring_fp16']:.1f} against {comm['ring']:.1f} ms)",
              f"fusion: HOROVOD_FUSION_THRESHOLD >= {fusion >> 20} MiB (Horovod's default 128 MiB "
              f"{'is enough' if fusion <= 128 << 20 else 'is too small'})",
              ("hierarchical: yes (HOROVOD_HIERARCHICAL_ALLREDUCE=1)" if best == "hierarchical" else
               "hierarchical: no" + ("" if ranks_per_node > 1 else " (one rank per node)"))]
    if fastest not in horovod and fastest != "ring_fp16":
        advice.append(f"note: {ALGORITHMS[fastest]} is predicted faster ({comm[fastest]:.1f} ms)")
    eff = step_ms / (step_ms + comm["ring_fp16" if fp16 else best])
    return {"inputs": {"params": params, "nodes": nodes, "ranks_per_node": ranks_per_node, "link_gbit": link_gbit,
                       "latency_ms": latency_ms, "step_ms": step_ms, "dtype_bytes": dtype_bytes},
            "algorithms": rows, "recommended": {"algorithm": best, "fp16_compression": fp16,
                                                "fusion_threshold_bytes": fusion,
                                                "hierarchical": best == "hierarchical", "efficiency": eff},
            "advice": advice}


def params_in(path: str) -> int:
    """The number of parameters in a safetensors file (read from its header: no tensor is loaded)."""
    from safetensors import safe_open

    try:
        with safe_open(path, framework="numpy") as f:
            return sum(math.prod(f.get_slice(k).get_shape()) for k in f.keys())
    except Exception as exc:  # OSError, or safetensors' own SafetensorError for a file that is not one
        raise ValueError(f"--model must be a safetensors file, got {path!r}: {exc}") from None


def _number(lo: float, hi: float, integer: bool = False, lo_open: bool = False):
    """An argparse type: a finite number from ``lo`` (above it with ``lo_open``) to ``hi``, an integer with
    ``integer``; argparse names the argument in front of the message. ``hi`` keeps the arithmetic finite and
    the plan meaningful (a float too large for the cost formulas raised OverflowError)."""
    kind = "an integer" if integer else "a number"
    allowed = f"{kind} > {lo:g} and <= {hi:g}" if lo_open else f"{kind} between {lo:g} and {hi:g}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        ok = (value > lo if lo_open else value >= lo) and value <= hi
        if math.isnan(value) or not ok or (integer and value != int(value)):
            raise argparse.ArgumentTypeError(f"must be {allowed}, got {text!r}")
        return int(value) if integer else value
    return parse


def main(argv: list[str] | None = None) -> int:
    """``hvdkit plan``: parse and check the arguments, print the plan (or its JSON); the exit status."""
    p = argparse.ArgumentParser(prog="hvdkit plan", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--params", type=_number(1, 1e15, integer=True), help="parameters (gradient elements)")
    what.add_argument("--model", help="a .safetensors file: its parameters are counted")
    p.add_argument("--nodes", type=_number(2, 1e6, integer=True), required=True)
    p.add_argument("--ranks-per-node", type=_number(1, 1024, integer=True), default=1, help="processes (GPUs) per node")
    p.add_argument("--link-gbit", type=_number(0, 1e6, lo_open=True), required=True, help="each node's link, Gbit/s")
    p.add_argument("--latency-ms", type=_number(0, 1e6), default=0.05,
                   help="one-way latency between nodes, ms (default 0.05)")
    p.add_argument("--step-ms", type=_number(0, 1e9, lo_open=True), required=True,
                   help="one step's compute time on one rank (forward + backward + update), ms")
    p.add_argument("--dtype-bytes", type=int, choices=[2, 4, 8], default=4, help="bytes per gradient value")
    p.add_argument("--servers", type=_number(1, 1024, integer=True), default=2,
                   help="parameter servers, sharded variant")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    args = p.parse_args(argv)
    params = args.params
    if args.model is not None:
        try:
            params = params_in(args.model)
        except ValueError as exc:
            p.error(str(exc))
    out = plan(params, args.nodes, args.link_gbit, args.latency_ms, args.step_ms, ranks_per_node=args.ranks_per_node,
               servers=args.servers, dtype_bytes=args.dtype_bytes)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"{params / 1e6:.1f} M parameters, {args.nodes} nodes x {args.ranks_per_node} ranks, "
          f"{args.link_gbit:g} Gbit/s, {args.latency_ms:g} ms, {args.step_ms:g} ms compute per step")
    print(f"{'algorithm':<20} {'comm ms/step':>12} {'efficiency':>10}")
    for name, row in out["algorithms"].items():
        print(f"{name:<20} {row['comm_ms']:>12.1f} {row['efficiency']:>10.1%}")
    print(f"expected scaling efficiency (recommended, no overlap): {out['recommended']['efficiency']:.1%}")
    print("\n".join(out["advice"]))
    return 0
