"""Beyond one machine, simulated: ring, tree, recursive doubling and parameter-server reductions on a cluster of
network namespaces with tc-shaped links (``benchmarks/netsim.py``), one rank per node, each measurement next to
its analytic bound and ``hvdkit plan``'s prediction; then synchronous ring training against asynchronous
parameter-server SGD, with and without a straggler (``benchmarks/workers/async_ps.py``).

Each configuration (algorithm, nodes, link rate, payload) is one job that times ``rounds`` reductions after an
untimed one; ``seconds`` is their median, ``seconds_iqr`` their quartiles. Payloads are gradient sizes of real
models, float32: 25 M parameters (ResNet-50) and 110 M (BERT-base). Needs root (namespaces, tc).

Hierarchical allreduce does not apply here: with one rank per node there is nothing to reduce inside a node
first (``hvdkit plan`` models it for several ranks per node).
"""

from __future__ import annotations

import os
from typing import Any

from benchmarks.jobs import Log, Result
from benchmarks.stats import median, quartiles, target
from hvdkit.tools import plan

M = "benchmarks.workers.netcoll"
RESNET50, BERT_BASE = 25_000_000, 110_000_000


def _ompi(algorithm: int) -> dict[str, str]:
    """Open MPI's coll/tuned made to use allreduce ``algorithm`` for every call."""
    return {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1", "OMPI_MCA_coll_tuned_allreduce_algorithm": str(algorithm)}


#: name -> (worker arguments, environment, plan's algorithm key, server nodes beside the workers)
ALGORITHMS: dict[str, tuple[list[str], dict[str, str], str, int]] = {
    "ring (Horovod, MPI)": (["--algo", "horovod"], _ompi(4), "ring", 0),
    "ring + fp16 compression (Horovod, MPI)": (["--algo", "horovod", "--compression", "fp16"], _ompi(4), "ring_fp16",
                                               0),
    "ring + fp16, hvdkit's compressor (reused buffers)": (["--algo", "horovod", "--compression", "fp16-reuse"],
                                                              _ompi(4), "ring_fp16", 0),
    "recursive doubling (Open MPI)": (["--algo", "mpi"], _ompi(3), "recursive_doubling", 0),
    "tree: reduce + broadcast (Open MPI)": (["--algo", "mpi"], _ompi(2), "tree", 0),
    "parameter server (1 server)": (["--algo", "ps", "--servers", "1"], {}, "ps", 1),
    "parameter servers (2, sharded)": (["--algo", "ps", "--servers", "2"], {}, "ps_sharded", 2),
}
SERVERS = max(a[3] for a in ALGORITHMS.values())


RING, PS, FP16 = "ring (Horovod, MPI)", "parameter server (1 server)", "ring + fp16 compression (Horovod, MPI)"
TREE, FP16_REUSE = "tree: reduce + broadcast (Open MPI)", "ring + fp16, hvdkit's compressor (reused buffers)"
#: Horovod's own fp16 compressor (a diagnosis: hvdkit's FP16Compressor is what plan models)
DIAGNOSTIC = {FP16}


def grid(quick: bool) -> list[tuple[float, int, int, list[str]]]:
    """(link Gbit/s, nodes, payload parameters, algorithms) of every job. ``HVDKIT_NETWORK_GRID`` picks a smaller
    one: ``smoke`` (CI: 2 nodes, 2 M parameters, ring and one parameter server), ``targets`` (only what the
    targets judge beyond ``--quick``: 4 nodes at 110 M, 8 nodes at 25 M), ``tree`` (the tree's calibration row,
    8 nodes, and a held-out one, 4 nodes) or ``fp16`` (ring with and without fp16, 25 M parameters at 2 and 4
    nodes, 1 Gbit/s, and at 2 nodes, 0.5 Gbit/s)."""
    every = list(ALGORITHMS)
    which = os.environ.get("HVDKIT_NETWORK_GRID", "quick" if quick else "full")
    if which == "smoke":
        return [(1.0, 2, 2_000_000, [RING, PS])]
    if which == "targets":
        return [(1.0, 4, BERT_BASE, [RING, PS, FP16, FP16_REUSE]), (1.0, 8, RESNET50, [RING, PS, FP16, FP16_REUSE])]
    if which == "tree":
        return [(1.0, n, RESNET50, [TREE]) for n in (8, 4)]
    if which == "fp16":
        return [(g, n, RESNET50, [RING, FP16, FP16_REUSE]) for g, ns in ((1.0, (2, 4)), (0.5, (2,))) for n in ns]
    if which == "quick":
        return [(1.0, n, RESNET50, every) for n in (2, 4)]
    if which != "full":
        raise ValueError(f"HVDKIT_NETWORK_GRID must be smoke, targets, tree, fp16, quick or full, got {which!r}")
    slow_ps = [a for a in every if a != PS]  # a minute a round at 8 nodes, 110 M
    out = []
    for n in (2, 4, 8):
        out.append((1.0, n, RESNET50, every))
        out.append((1.0, n, BERT_BASE, every if n <= 4 else slow_ps))
        out.append((2.5, n, RESNET50, every))  # skipped where the unshaped link carries less
    return out


def _row(name: str, n: int, gbit: float, alpha_ms: float, nbytes: int, seconds: list[float],
         ceiling_gbit: float) -> dict[str, Any]:
    key = ALGORITHMS[name][2]
    bound = plan.bound_seconds(key, nbytes // 4, n, gbit, alpha_ms)
    return score({"algorithm": name, "plan_algorithm": key, "nodes": n, "link_gbit": gbit, "latency_ms": alpha_ms,
                  "payload_bytes": nbytes, "seconds": median(seconds), "seconds_iqr": quartiles(seconds),
                  "rounds": seconds, "bound_seconds": bound, "bound_over_measured": bound / median(seconds),
                  "link_ceiling_gbit": ceiling_gbit})


def score(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with hvdkit plan's prediction and whether its configuration was held out of plan's calibration
    (from the plan imported now: rows of an older run are scored again with it)."""
    params, n = row["payload_bytes"] // 4, row["nodes"]
    if row["algorithm"] in DIAGNOSTIC:
        return {**row, "plan_seconds": None, "held_out": None}
    # the ranks share this machine's cores: fp16's casts get a share of one
    predicted = plan.predict_seconds(row["plan_algorithm"], params, n, row["link_gbit"], row["latency_ms"],
                                     cores_per_rank=(os.cpu_count() or 1) / n)
    return {**row, "plan_seconds": predicted, "held_out": (n, params) not in plan.CALIBRATED_ON}


def _ceiling(c: Any, rounds: int, params: int) -> float:
    """The unshaped veth + bridge throughput, Gbit/s: 2 nodes exchanging ``params`` float32 values (recursive
    doubling: each sends and receives the whole payload once)."""
    c.shape(None)
    r = c.mpirun(c.hosts(2), M, ["--algo", "mpi", "--params", str(params), "--rounds", str(rounds)], env=_ompi(3),
                 timeout=180)
    return 4 * params * 8 / median(r["payloads"][0]["seconds"]) / 1e9


def run(quick: bool, rounds: int, log: Log) -> Result:
    """Every algorithm on every configuration of ``grid``; sync vs async training; targets."""
    from benchmarks.netsim import Cluster, ClusterError

    rounds = max(rounds, 3)
    configs = grid(quick)
    nodes = max(n for _, n, _, _ in configs) + SERVERS
    rows: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    with Cluster(nodes) as c:
        alpha = c.latency_ms()
        ceiling = _ceiling(c, rounds, min(RESNET50, *(p for _, _, p, _ in configs)))
        log(f"{nodes} namespaces; one-way latency {alpha * 1e3:.0f} us; unshaped link {ceiling:.1f} Gbit/s")
        for gbit, n, params, algos in configs:
            if gbit > ceiling:
                log(f"skipping {gbit:g} Gbit/s: the unshaped link carries {ceiling:.1f}")
                continue
            c.shape(gbit)
            for name in algos:
                wargs, env, _key, servers = ALGORITHMS[name]
                log(f"{name}: {n} nodes, {gbit:g} Gbit/s, {params / 1e6:g} M params")
                # a generous limit: starting the ranks, then the rounds at a third of the bound's speed
                limit = 120 + 3 * (rounds + 1) * plan.bound_seconds(ALGORITHMS[name][2], params, n, gbit, alpha)
                try:
                    r = c.mpirun(c.hosts(n + servers, first=SERVERS - servers), M,
                                 [*wargs, "--params", str(params), "--rounds", str(rounds)], env=env, timeout=limit)
                except ClusterError as exc:  # one failed job costs its row, not the run's other rows
                    log(f"FAILED: {exc}"[:3000])
                    failed.append({"algorithm": name, "nodes": n, "link_gbit": gbit, "payload_bytes": 4 * params,
                                   "error": str(exc)[-2000:]})
                    continue
                rows.append(_row(name, n, gbit, alpha, 4 * params, r["payloads"][0]["seconds"], ceiling))
                if "phases" in r["payloads"][0]:  # rank 0's cast down, allreduce, cast back: medians
                    rows[-1]["phases"] = {k: median(v) for k, v in r["payloads"][0]["phases"].items()}
        training = None
        if os.environ.get("HVDKIT_NETWORK_GRID", "quick") in ("quick", "full"):
            c.shape(1.0)
            try:
                training = sync_vs_async(c, log)
            except ClusterError as exc:  # the reductions above are kept
                log(f"sync vs async training failed: {exc}")
                training = {"error": str(exc)[-2000:]}
    if failed and not rows:
        raise ClusterError(f"every job failed; the first: {failed[0]['error']}")
    return {"rows": rows, "failed": failed, "cluster": c.tag, "latency_ms": alpha, "link_ceiling_gbit": ceiling,
            "training": training,
            "targets": targets(rows), "plan_error": plan_error(rows),
            "calibration": calibration(rows),
            "timings": {f"{r['algorithm']} n={r['nodes']} {r['link_gbit']:g}G {r['payload_bytes'] >> 20}MiB":
                        r["rounds"] for r in rows}}


TRAIN_WORKERS, TARGET_ACCURACY, STRAGGLER = 4, 0.95, 3.0
#: run -> (worker arguments, an extra server node)
TRAINING = {
    "sync ring, all equal": (["--mode", "sync"], 0),
    "async PS, all equal": (["--mode", "async"], 1),
    f"sync ring, one straggler ({1 + STRAGGLER:g}x slower)": (["--mode", "sync", "--straggler", str(STRAGGLER)], 0),
    f"async PS, one straggler ({1 + STRAGGLER:g}x slower)": (["--mode", "async", "--straggler", str(STRAGGLER)], 1),
    "async PS, one straggler, staleness <= 8": (["--mode", "async", "--straggler", str(STRAGGLER),
                                                  "--staleness", "8"], 1),
}


def sync_vs_async(c: Any, log: Log) -> Result:
    """Time to the target accuracy and the final accuracy of each ``TRAINING`` run, 1 Gbit/s links."""
    runs = {}
    for name, (wargs, server) in TRAINING.items():
        log(f"training: {name}")
        r = c.mpirun(c.hosts(TRAIN_WORKERS + server, first=1 - server), "benchmarks.workers.async_ps", wargs,
                     timeout=300)
        hit = next((t for t, acc in r["curve"] if acc >= TARGET_ACCURACY), None)
        runs[name] = {**r, "seconds_to_target": hit}
    return {"model": "64-256-10 MLP on digits (numpy)", "nodes": TRAIN_WORKERS, "target_accuracy": TARGET_ACCURACY,
            "runs": runs}


def _find(rows: list[dict[str, Any]], name: str, n: int, gbit: float, nbytes: int | None = None) -> dict | None:
    hits = [r for r in rows if r["algorithm"] == name and r["nodes"] == n and r["link_gbit"] == gbit
            and (nbytes is None or r["payload_bytes"] == nbytes)]
    return max(hits, key=lambda r: r["payload_bytes"]) if hits else None


def targets(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The network targets (docs/choosing-an-algorithm.md), judged on the per-round values of the rows they name."""
    out = []
    ring, ps, fp16 = RING, PS, FP16
    r4 = _find(rows, ring, 4, 1.0)
    if r4:
        out.append(target(f"ring at 4 nodes, 1 Gbit/s, {r4['payload_bytes'] >> 20} MiB: analytic bound / measured",
                          [r4["bound_seconds"] / s for s in r4["rounds"]], 0.80))
    for n in sorted({r["nodes"] for r in rows}):
        a, b = _find(rows, ps, n, 1.0), _find(rows, ring, n, 1.0)
        if a and b and a["payload_bytes"] == b["payload_bytes"]:
            out.append(target(f"single parameter server / ring, {n} nodes, 1 Gbit/s, {a['payload_bytes'] >> 20} MiB "
                              "(measured seconds, per round)", [x / y for x, y in zip(a["rounds"], b["rounds"])],
                              1.5 if n >= 4 else None))
    # What users get is hvdkit's compressor (``compression="fp16"``): it is judged; Horovod's own
    # ``Compression.fp16`` is reported beside it, the diagnosis of why Horovod's fp16 gains less.
    for what, name, judged in (("hvdkit's compression='fp16' (FP16Compressor, reused buffers)", FP16_REUSE, True),
                               ("Horovod's Compression.fp16 (a diagnosis)", fp16, False)):
        for gbit in sorted({r["link_gbit"] for r in rows}, reverse=True):
            for n in sorted({r["nodes"] for r in rows}):
                a, b = _find(rows, ring, n, gbit), _find(rows, name, n, gbit)
                if a and b and a["payload_bytes"] == b["payload_bytes"]:
                    out.append(target(f"ring: no compression / {what}, {n} nodes, {gbit:g} Gbit/s, "
                                      f"{a['payload_bytes'] >> 20} MiB (speed-up)",
                                      [x / y for x, y in zip(a["rounds"], b["rounds"])],
                                      1.5 if judged and gbit == 1.0 else None))
    held = [abs(r["plan_seconds"] / r["seconds"] - 1) for r in rows if r["held_out"]]
    if held:
        out.append(target("hvdkit plan: |predicted / measured - 1| on held-out configurations (every one)", held,
                          0.25, lower_is_better=True))
    return out


def calibration(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What hvdkit/tools/plan.py's constants would be from this run's calibration rows (``plan.CALIBRATED_ON``): per
    algorithm, the median of plan's model (``plan.model_seconds``) / measured; fp16's cast time per parameter
    beyond ring's efficiency."""
    cal = [r for r in rows if r["held_out"] is False]

    def model(r: dict[str, Any]) -> float:
        return plan.model_seconds(r["plan_algorithm"], r["payload_bytes"] // 4, r["nodes"], r["link_gbit"],
                                  r["latency_ms"])

    eff = {k: median([model(r) / r["seconds"] for r in cal if r["plan_algorithm"] == k])
           for k in sorted({r["plan_algorithm"] for r in cal})}
    casts = [(r["seconds"] - model(r) / eff["ring"]) / (r["payload_bytes"] / 4)
             * min(1.0, (os.cpu_count() or 1) / r["nodes"]) for r in cal
             if r["plan_algorithm"] == "ring_fp16" and "ring" in eff]
    return {"efficiency": eff, "cast_seconds_per_param": median(casts) if casts else None}


def plan_error(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """hvdkit plan's relative error, on the configurations it was calibrated on and on the others, in all and
    per algorithm (``"held_out ring"``...)."""
    out = {}
    for held in (False, True):
        for key in [None, *sorted({r["plan_algorithm"] for r in rows})]:
            errs = [r["plan_seconds"] / r["seconds"] - 1 for r in rows
                    if r["held_out"] is held and key in (None, r["plan_algorithm"])]
            if errs:
                out[("held_out" if held else "calibration") + ("" if key is None else f" {key}")] = {
                    "configurations": len(errs), "median_abs": median([abs(e) for e in errs]),
                    "max_abs": max(abs(e) for e in errs), "worst": max(errs, key=abs)}
    return out


def tables(suite: Result) -> list[tuple[str, list[str], list[list[str]]]]:
    """The report's tables: every measurement with its bound and plan's prediction; training; plan's error."""
    rows = suite["rows"]
    out = [(f"Network (simulated cluster, one rank per node; one-way latency {suite['latency_ms'] * 1e3:.0f} us, "
            f"unshaped link {suite['link_ceiling_gbit']:.1f} Gbit/s): median seconds per reduction (IQR), the "
            "analytic bound, bound / measured, hvdkit plan's prediction (* held out)",
            ["algorithm", "nodes", "Gbit/s", "MiB", "seconds", "IQR", "bound", "bound / measured", "plan"],
            [[r["algorithm"], str(r["nodes"]), f"{r['link_gbit']:g}", str(r["payload_bytes"] >> 20),
              f"{r['seconds']:.3f}", f"{r['seconds_iqr'][0]:.3f}-{r['seconds_iqr'][1]:.3f}",
              f"{r['bound_seconds']:.3f}", f"{r['bound_over_measured']:.2f}",
              "-" if r["plan_seconds"] is None else f"{r['plan_seconds']:.3f}{' *' if r['held_out'] else ''}"]
             for r in rows])]
    casts = [r for r in rows if "phases" in r]
    if casts:
        out.append(("fp16 compression on rank 0, median seconds per round: the cast down, the in-place allreduce "
                    "of the half tensor (and the rate each link carried meanwhile: 2(n-1)/n of it), the cast back",
                    ["algorithm", "nodes", "Gbit/s", "MiB", "cast down", "allreduce", "link Gbit/s", "cast back",
                     "total"],
                    [[r["algorithm"], str(r["nodes"]), f"{r['link_gbit']:g}", str(r["payload_bytes"] >> 20),
                      *(f"{r['phases'][k]:.3f}" for k in ("cast_down", "allreduce")),
                      f"{(r['nodes'] - 1) / r['nodes'] * r['payload_bytes'] * 8 / r['phases']['allreduce'] / 1e9:.2f}",
                      f"{r['phases']['cast_back']:.3f}", f"{r['seconds']:.3f}"] for r in casts]))
    err = suite.get("plan_error") or {}
    if err:
        out.append(("hvdkit plan's error (predicted / measured - 1)", ["set", "configurations", "median |error|",
                                                                        "max |error|", "worst"],
                    [[k, str(v["configurations"]), f"{v['median_abs']:.1%}", f"{v['max_abs']:.1%}",
                      f"{v['worst']:+.1%}"] for k, v in err.items()]))
    tr = suite.get("training")
    if tr and "runs" in tr:
        out.append((f"Synchronous ring vs asynchronous parameter server, {tr['model']} ({tr['nodes']} workers, "
                    f"target accuracy {tr['target_accuracy']:.2f})",
                    ["run", "seconds to target", "final accuracy", "seconds", "updates"],
                    [[name, "not reached" if r["seconds_to_target"] is None else f"{r['seconds_to_target']:.1f}",
                      f"{r['final_accuracy']:.3f}", f"{r['seconds']:.1f}", str(r["updates"])]
                     for name, r in tr["runs"].items()]))
    return out


def plots(suite: Result, out: Any) -> list[Any]:
    """Efficiency against nodes, per algorithm, one panel per link rate (the largest payload measured at every
    node count): the bandwidth-optimal allreduce time, 2(n-1)/n x payload / rate, over the measured time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = suite["rows"]
    rates = sorted({r["link_gbit"] for r in rows})
    if not rows:
        return []
    fig, axes = plt.subplots(1, len(rates), figsize=(6 * len(rates), 4.5), squeeze=False)
    for ax, gbit in zip(axes[0], rates):
        here = [r for r in rows if r["link_gbit"] == gbit]
        payload = min(max(r["payload_bytes"] for r in here if r["nodes"] == n) for n in {r["nodes"] for r in here})
        for name in ALGORITHMS:
            pts = sorted((r["nodes"], 2 * (r["nodes"] - 1) / r["nodes"] * r["payload_bytes"] * 8 / (gbit * 1e9)
                          / r["seconds"]) for r in here
                         if r["algorithm"] == name and r["payload_bytes"] == payload)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
        ax.set_xlabel("nodes (one rank each)")
        ax.set_ylabel("bandwidth-optimal time / measured")
        ax.set_title(f"{gbit:g} Gbit/s links, {payload >> 20} MiB float32")
        ax.set_xticks(sorted({r["nodes"] for r in here}))
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    path = out / "network-efficiency.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


def main(argv: list[str]) -> int:
    """``python -m benchmarks.suites.network DIR...``: the rows of earlier runs (DIR/results.json) scored again
    with the hvdkit plan imported now; prints plan's error per algorithm, calibration and held-out rows apart."""
    import json
    from pathlib import Path

    rows = [score(r) for d in argv for r in json.loads((Path(d) / "results.json").read_text())["suites"]["network"]
            ["rows"]]
    print("| set | configurations | median abs error | max abs error | worst |\n| --- | --- | --- | --- | --- |")
    for k, v in plan_error(rows).items():
        print(f"| {k} | {v['configurations']} | {v['median_abs']:.1%} | {v['max_abs']:.1%} | {v['worst']:+.1%} |")
    print("\n| algorithm | nodes | Gbit/s | MiB | measured s | plan s | error | held out |\n" + "| --- " * 8 + "|")
    for r in rows:
        if r["plan_seconds"] is not None:
            print(f"| {r['plan_algorithm']} | {r['nodes']} | {r['link_gbit']:g} | {r['payload_bytes'] >> 20} | "
                  f"{r['seconds']:.3f} | {r['plan_seconds']:.3f} | {r['plan_seconds'] / r['seconds'] - 1:+.1%} | "
                  f"{'yes' if r['held_out'] else 'no'} |")
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
