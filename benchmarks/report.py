"""Tables (rich), plots (matplotlib), a markdown report and pyperf's JSON from benchmark results.

The tables are built once (``tables``) and rendered twice: to the terminal and to ``report.md``. Each suite's
per-round timings also go to ``pyperf.json`` (one pyperf benchmark per job), so two runs compare with
``python -m pyperf compare_to A/pyperf.json B/pyperf.json``.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from benchmarks.jobs import Result
from benchmarks.stats import verdict
from hvdkit.runtime.tuning import available_cores

#: A table: its title, column names and rows of cells.
Table = tuple[str, list[str], list[list[str]]]

#: The step-time budget's columns (``benchmarks.suites.scaling``): phase key -> heading.
BUDGET = {"step": "step", "data": "data", "forward_backward": "forward+backward", "wait": "allreduce wait",
          "update": "update", "other_threads_cpu": "CPU of the other threads (Horovod, MPI)"}


def targets(results: Result) -> list[Result]:
    """Each target's median, IQR, goal and verdict from the suites' results."""
    return [dict(t, verdict=verdict(t["measured"], t.get("iqr"), t["goal"], t.get("lower_is_better", False)))
            for suite in results["suites"].values() for t in suite.get("targets", [])]


def _human(nbytes: int) -> str:
    return f"{nbytes // (1 << 20)} MiB" if nbytes >= 1 << 20 else f"{nbytes // 1024} KiB"


def _iqr(q: list[float] | None, fmt: str = ".3f") -> str:
    return "-" if q is None else f"{q[0]:{fmt}}-{q[1]:{fmt}}"


def _with_iqr(s: Result, fmt: str = ".2f") -> str:
    return f"{s['median']:{fmt}} ({_iqr(s['iqr'], fmt)})"


def _goal(t: Result) -> str:
    return "-" if t["goal"] is None else f"{'<=' if t.get('lower_is_better') else '>='} {t['goal']:g}"


def _load_rows(results: Result) -> list[list[str]]:
    def cells(w: str, load: Result) -> list[str]:
        return [w, f"{load['before']['load1']:.2f}", f"{load['after']['load1']:.2f}", str(load["before"]["cpus"]),
                f"{(load['after']['t'] - load['before']['t']) / 60:.1f}"]

    rows = [cells(name, s["load"]) for name, s in results["suites"].items() if "load" in s]
    if "after" in results.get("load", {}):
        rows.append(cells("whole run", results["load"]))
    return rows


def tables(results: Result) -> list[Table]:
    """Every table of the report: targets, machine load, and one or more per suite."""
    suites = results["suites"]
    out: list[Table] = []
    out.append(("Targets: median of the per-round values, IQR, rounds", ["target", "goal", "median", "IQR", "rounds",
                                                                         "verdict"],
                [[t["target"], _goal(t), "-" if t["measured"] is None else f"{t['measured']:.3f}",
                  _iqr(t.get("iqr")), str(t.get("rounds", "-")), t["verdict"]] for t in targets(results)]))
    if _load_rows(results):
        out.append(("Load average (1 minute) before and after", ["suite", "load before", "load after", "CPUs",
                                                                 "minutes"], _load_rows(results)))
    if "allreduce" in suites:
        rows, ratios = suites["allreduce"]["rows"], suites["allreduce"]["ratios"]
        out.append(("Allreduce bus bandwidth, GB/s (2 processes), medians over rounds; ratios: median (IQR)",
                    ["size", *rows, "hvdkit / horovod", "hvdkit / torch gloo", "fp16 compression vs none"],
                    [[_human(r["bytes"]), *[f"{rows[n][i]['busbw_gbps']:.2f}" for n in rows],
                      _with_iqr(r["vs_horovod"]), _with_iqr(r["vs_torch_gloo"]), _with_iqr(r["fp16_vs_none"])]
                     for i, r in enumerate(ratios)]))
    for key in ("throughput", "keras"):
        if key in suites:
            out.append((f"Training throughput ({key}), medians over rounds",
                        ["run", "samples/s", "ms/step", "ms/step IQR"],
                        [[n, f"{r['samples_per_s']:.0f}", f"{r['ms_per_step']:.1f}", _iqr(r["ms_per_step_iqr"], ".1f")]
                         for n, r in suites[key]["runs"].items()]))
    if "scaling" in suites:
        sc = suites["scaling"]
        eff = {name: _with_iqr(row["efficiency"], ".3f") for name, row in sc["settings"].items()}
        vs = {name: _with_iqr(row["vs_defaults"], ".3f") for name, row in sc["settings"].items()
              if "vs_defaults" in row}
        out.append(("Scaling 1 -> 2 processes: efficiency (2 procs samples/s / 2 x 1 proc, median and IQR over "
                    "rounds), each setting's samples/s over the defaults' in jobs of the same length, and the "
                    "step-time budget, ms per step (medians over rounds and ranks)",
                    ["run", "efficiency", "vs defaults, same length", *BUDGET.values()],
                    [[name, eff.get(name, "baseline"), vs.get(name, "-"),
                      *[f"{phases[k]['median']:.2f}" for k in BUDGET]]
                     for name, phases in sc["budget"].items()]))
    if "paired" in suites.get("throughput", {}):
        out.append(("Adapter overhead, epochs alternating in one job (hvdkit Trainer vs raw Horovod loop)",
                    ["model", "hvdkit ms/step", "raw ms/step", "us/step", "ratio median, blocks", "ratio IQR, blocks"],
                    [_paired_row(n, r) for n, r in suites["throughput"]["paired"].items()]))
    if "paired" in suites.get("keras", {}):
        out.append(("Keras model.fit vs the tape loop, epochs alternating in one job (same model, tf.data input)",
                    ["run", "fit ms/step", "tape ms/step", "ratio median, blocks", "ratio IQR, blocks",
                     "traces (fit, tape)"],
                    [[n, f"{r['ms_per_step']['fit']:.2f}", f"{r['ms_per_step']['tape']:.2f}",
                      f"{r['ratio_median']:.3f}", _iqr(r["ratio_quartiles"]),
                      f"{r['traces']['fit']}, {r['traces']['tape']}"]
                     for n, r in suites["keras"]["paired"].items()]))
    if "network" in suites:
        from benchmarks.suites.network import tables as network_tables

        out += network_tables(suites["network"])
    if "gpu" in suites:
        from benchmarks.suites.gpu import tables as gpu_tables

        out += gpu_tables(suites["gpu"])
    if "precision" in suites:
        r = suites["precision"]["result"]
        out.append(("Precision, epochs alternating in one 2-process job", ["fp32 ms/step", "bf16 ms/step"],
                    [[f"{r['ms_per_step']['fp32']:.1f}", f"{r['ms_per_step']['bf16']:.1f}"]]))
    return out


def _paired_row(name: str, r: Result) -> list[str]:
    ms, q = r["ms_per_step"], r["ratio_quartiles"]
    return [name, f"{ms['hvdkit']:.3f}", f"{ms['horovod']:.3f}", f"{r['overhead_us_per_step']:+.0f}",
            f"{r['ratio_median']:.3f}", _iqr(q)]


def print_tables(results: Result) -> None:
    """Print the tables to the terminal, the targets last."""
    from rich.console import Console
    from rich.table import Table as RichTable

    con = Console()
    con.print(f"{results['machine']}; {results['rounds']} rounds")
    made = tables(results)
    for title, header, rows in [*made[1:], made[0]]:
        t = RichTable(title=title)
        for i, c in enumerate(header):
            t.add_column(c, justify="left" if i == 0 else "right")
        for row in rows:
            t.add_row(*row)
        con.print(t)


def markdown(results: Result, plots: list[Path]) -> str:
    """The results as a Markdown report."""
    lines = [f"Measured {results['date']} on {results['machine']}.", "",
             f"Command: `{results['command']}` ({results['rounds']} rounds; the implementations of each comparison "
             "alternate A B B A ...; a verdict is met or missed only when the whole IQR is on one side of the goal)."]
    for title, header, rows in tables(results):
        lines += ["", f"{title}:", "", "| " + " | ".join(header) + " |", "| --- " * len(header) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
    lines += [""] + [f"![{p.stem}]({p.name})" for p in plots]
    return "\n".join(lines) + "\n"


def plot(results: Result, out: Path) -> list[Path]:
    """Write the bandwidth and throughput plots (PNG) into ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    suites = results["suites"]
    if "allreduce" in suites:
        fig, ax = plt.subplots(figsize=(8, 5))
        for name, rows in suites["allreduce"]["rows"].items():
            ax.plot([r["bytes"] for r in rows], [r["busbw_gbps"] for r in rows], marker="o", label=name)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("buffer size (bytes)")
        ax.set_ylabel("bus bandwidth (GB/s), median over rounds")
        ax.set_title("Allreduce, 2 processes, float32")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        made.append(out / "allreduce.png")
        fig.savefig(made[-1], dpi=110)
        plt.close(fig)
    if "network" in suites:
        from benchmarks.suites.network import plots as network_plots

        made += network_plots(suites["network"], out)
    if "scaling" in suites:
        made.append(_budget_plot(suites["scaling"]["budget"], out / "scaling.png"))
    runs = {}
    for key in ("throughput", "keras"):
        if key in suites:
            runs.update({f"{n}": r["samples_per_s"] for n, r in suites[key]["runs"].items()})
    if runs:
        fig, ax = plt.subplots(figsize=(9, 0.5 * len(runs) + 1.5))
        names = list(runs)
        ax.barh(names, [runs[n] for n in names], color=["tab:blue" if "hvdkit" in n else "tab:gray" for n in names])
        ax.invert_yaxis()
        ax.set_xlabel("samples/s (all processes), median over rounds")
        ax.set_title("Training throughput, compute-bound MLP (hvdkit in blue)")
        for i, n in enumerate(names):
            ax.text(runs[n], i, f" {runs[n]:.0f}", va="center", fontsize=8)
        fig.tight_layout()
        made.append(out / "throughput.png")
        fig.savefig(made[-1], dpi=110)
        plt.close(fig)
    return made


def _budget_plot(budget: Result, path: Path) -> Path:
    """Stacked bars: each scaling job's step split into its phases (medians)."""
    import matplotlib.pyplot as plt

    names = list(budget)
    fig, ax = plt.subplots(figsize=(10, 0.5 * len(names) + 1.8))
    left = [0.0] * len(names)
    for key in ("data", "forward_backward", "wait", "update"):
        vals = [budget[n][key]["median"] for n in names]
        ax.barh(names, vals, left=left, label=BUDGET[key])
        left = [a + b for a, b in zip(left, vals)]
    ax.invert_yaxis()
    ax.set_xlabel("ms per step (median over rounds and ranks)")
    ax.set_title("Scaling 1 -> 2 processes: where a step's time goes")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def load() -> dict[str, Any]:
    """The machine's state now: 1-minute load average, CPU count, wall time (and a monotonic clock)."""
    return {"load1": os.getloadavg()[0], "cpus": os.cpu_count(), "at": dt.datetime.now().isoformat(timespec="seconds"),
            "t": time.monotonic()}


def _cpu_and_memory() -> str:
    model, mem = "", ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
        with open("/proc/meminfo") as f:
            kib = next((int(ln.split()[1]) for ln in f if ln.startswith("MemTotal")), 0)
        mem = f"{kib / (1 << 20):.0f} GiB" if kib else ""
    except OSError:
        pass
    return ", ".join(x for x in (model, mem) if x)


def _versions() -> str:
    found = []
    for dist in ("torch", "tensorflow", "tensorflow-cpu", "keras", "horovod"):
        try:
            found.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            pass
    return ", ".join(found)


def machine() -> str:
    """Facts about this machine recorded beside the results."""
    extra = "; ".join(x for x in (_cpu_and_memory(), _versions()) if x)
    return (f"{platform.node() or 'host'}: {available_cores()} cores, {platform.machine()}, "
            f"Python {platform.python_version()}" + (f" ({extra})" if extra else ""))


def pyperf_suite(results: Result) -> Any:
    """Every suite's per-round timings (``"timings"``: name -> seconds per round) as a pyperf BenchmarkSuite,
    one run per round; None when no suite recorded any."""
    import pyperf

    benches = []
    for suite in results["suites"].values():
        for name, values in suite.get("timings", {}).items():
            runs = [pyperf.Run([v], metadata={"name": name, "unit": "second"}, collect_metadata=False)
                    for v in values if v > 0]
            if runs:
                benches.append(pyperf.Benchmark(runs))
    return pyperf.BenchmarkSuite(benches) if benches else None
