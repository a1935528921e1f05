"""Tables (rich), plots (matplotlib) and a markdown report from benchmark results."""

from __future__ import annotations

import platform
from pathlib import Path

from hvdkit.bench.launch import Result
from hvdkit.runtime.tuning import available_cores


def _verdict(t: Result) -> str:
    if t["goal"] is None or t["measured"] is None:
        return "reported"
    ok = t["measured"] <= t["goal"] if t.get("lower_is_better") else t["measured"] >= t["goal"]
    return "met" if ok else "MISSED"


def targets(results: Result) -> list[Result]:
    """Each target's measured value, goal and verdict from the suites' results."""
    return [dict(t, verdict=_verdict(t)) for suite in results["suites"].values() for t in suite.get("targets", [])]


def _human(nbytes: int) -> str:
    return f"{nbytes // (1 << 20)} MiB" if nbytes >= 1 << 20 else f"{nbytes // 1024} KiB"


def print_tables(results: Result) -> None:
    """Print one table per suite and the targets to the terminal."""
    from rich.console import Console
    from rich.table import Table

    con = Console()
    suites = results["suites"]
    if "allreduce" in suites:
        rows = suites["allreduce"]["rows"]
        t = Table(title="Allreduce bus bandwidth, GB/s (2 processes)")
        t.add_column("size")
        for name in rows:
            t.add_column(name, justify="right")
        t.add_column("hvdkit / horovod", justify="right")
        t.add_column("hvdkit / torch gloo", justify="right")
        for i, r in enumerate(suites["allreduce"]["ratios"]):
            t.add_row(_human(r["bytes"]), *[f"{rows[n][i]['busbw_gbps']:.2f}" for n in rows],
                      f"{r['vs_horovod']:.2f}", f"{r['vs_torch_gloo']:.2f}")
        con.print(t)
    for key in ("throughput", "keras"):
        if key in suites:
            t = Table(title=f"Training throughput ({key})")
            for c in ("run", "samples/s", "ms/step"):
                t.add_column(c, justify="right" if c != "run" else "left")
            for name, r in suites[key]["runs"].items():
                t.add_row(name, f"{r['samples_per_s']:.0f}", f"{r['ms_per_step']:.1f}")
            con.print(t)
    if "paired" in suites.get("throughput", {}):
        t = Table(title="Adapter overhead, paired epochs in one job (hvdkit Trainer vs raw Horovod loop)")
        for c in ("model", "hvdkit ms/step", "raw ms/step", "us/step", "ratio median", "ratio IQR"):
            t.add_column(c, justify="right" if c != "model" else "left")
        for name, r in suites["throughput"]["paired"].items():
            t.add_row(*_paired_row(name, r))
        con.print(t)
    if "checkpoint" in suites:
        r = suites["checkpoint"]["result"]
        t = Table(title=f"Checkpoint, {r['model_mb']:.0f} MB model (MB/s)")
        for c in ("torch.save", "hvdkit save", "torch.load", "hvdkit restore"):
            t.add_column(c, justify="right")
        m = r["mb_per_s"]
        t.add_row(*(f"{m[k]:.0f}" for k in ("torch_save", "hvdkit_save", "torch_load", "hvdkit_load")))
        con.print(t)
    t = Table(title="Targets (measured ratios, this run)")
    for c in ("target", "measured", "verdict"):
        t.add_column(c)
    for tg in targets(results):
        t.add_row(tg["target"], "-" if tg["measured"] is None else f"{tg['measured']:.3f}", tg["verdict"])
    con.print(t)


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
        ax.set_ylabel("bus bandwidth (GB/s)")
        ax.set_title("Allreduce, 2 processes, float32")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        made.append(out / "allreduce.png")
        fig.savefig(made[-1], dpi=110)
        plt.close(fig)
    runs = {}
    for key in ("throughput", "keras"):
        if key in suites:
            runs.update({f"{n}": r["samples_per_s"] for n, r in suites[key]["runs"].items()})
    if runs:
        fig, ax = plt.subplots(figsize=(9, 0.5 * len(runs) + 1.5))
        names = list(runs)
        ax.barh(names, [runs[n] for n in names], color=["tab:blue" if "hvdkit" in n else "tab:gray" for n in names])
        ax.invert_yaxis()
        ax.set_xlabel("samples/s (all processes)")
        ax.set_title("Training throughput, compute-bound MLP (hvdkit in blue)")
        for i, n in enumerate(names):
            ax.text(runs[n], i, f" {runs[n]:.0f}", va="center", fontsize=8)
        fig.tight_layout()
        made.append(out / "throughput.png")
        fig.savefig(made[-1], dpi=110)
        plt.close(fig)
    return made


def _paired_row(name: str, r: Result) -> list[str]:
    ms, q = r["ms_per_step"], r["ratio_quartiles"]
    return [name, f"{ms['hvdkit']:.3f}", f"{ms['horovod']:.3f}", f"{r['overhead_us_per_step']:+.0f}",
            f"{r['ratio_median']:.3f}", f"{q[0]:.3f}-{q[1]:.3f}"]


def markdown(results: Result, plots: list[Path]) -> str:
    """The results as a Markdown report."""
    lines = [f"Measured {results['date']} on {results['machine']}.", "", f"Command: `{results['command']}`", ""]
    lines += ["| target | measured | verdict |", "| --- | --- | --- |"]
    for tg in targets(results):
        m = "-" if tg["measured"] is None else f"{tg['measured']:.3f}"
        lines.append(f"| {tg['target']} | {m} | {tg['verdict']} |")
    suites = results["suites"]
    if "allreduce" in suites:
        rows = suites["allreduce"]["rows"]
        lines += ["", "Allreduce bus bandwidth (GB/s), 2 processes:", "",
                  "| size | " + " | ".join(rows) + " | hvdkit / horovod | hvdkit / torch gloo |",
                  "| --- " * (len(rows) + 3) + "|"]
        for i, r in enumerate(suites["allreduce"]["ratios"]):
            cells = [f"{rows[n][i]['busbw_gbps']:.2f}" for n in rows]
            ratios = f" | {r['vs_horovod']:.2f} | {r['vs_torch_gloo']:.2f} |"
            lines.append(f"| {_human(r['bytes'])} | " + " | ".join(cells) + ratios)
    for key in ("throughput", "keras"):
        if key in suites:
            lines += ["", f"Training throughput ({key}):", "", "| run | samples/s | ms/step |", "| --- | --- | --- |"]
            for n, r in suites[key]["runs"].items():
                lines.append(f"| {n} | {r['samples_per_s']:.0f} | {r['ms_per_step']:.1f} |")
    if "paired" in suites.get("throughput", {}):
        lines += ["", "Adapter overhead, paired epochs in one job (hvdkit Trainer vs raw Horovod loop):", "",
                  "| model | hvdkit ms/step | raw ms/step | us/step | ratio median | ratio IQR |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for name, r in suites["throughput"]["paired"].items():
            lines.append("| " + " | ".join(_paired_row(name, r)) + " |")
    if "checkpoint" in suites:
        r = suites["checkpoint"]["result"]
        m = r["mb_per_s"]
        lines += ["", f"Checkpoint, {r['model_mb']:.0f} MB model, MB/s (median of 3):", "",
                  "| torch.save | hvdkit save | torch.load | hvdkit restore |", "| --- | --- | --- | --- |",
                  "| " + " | ".join(f"{m[k]:.0f}" for k in ("torch_save", "hvdkit_save", "torch_load",
                                                             "hvdkit_load")) + " |"]
    lines += [""] + [f"![{p.stem}]({p.name})" for p in plots]
    return "\n".join(lines) + "\n"


def machine() -> str:
    """Facts about this machine recorded beside the results."""
    return (f"{platform.node() or 'host'}: {available_cores()} cores, {platform.machine()}, "
            f"Python {platform.python_version()}")
