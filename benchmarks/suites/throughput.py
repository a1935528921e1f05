"""Training throughput at 2 processes on a compute-bound MLP: hvdkit's Trainer (also with fp16 gradient
compression), a raw Horovod loop with Horovod's defaults and PyTorch DDP in alternating jobs; the adapter
overhead (Trainer vs raw loop) paired inside one job, where separate jobs differ by more than the 2 % target
by themselves (docs/benchmarks.md, "Method"). 1 vs 2 processes: the ``scaling`` suite."""

from __future__ import annotations

from functools import partial

from benchmarks.jobs import Log, Result, alternate, run_worker
from benchmarks.stats import PAIRED_WARMUP, paired_rounds, ratios, runs_summary, samples_per_s, target

TT = "benchmarks.workers.train_torch"
AO = "benchmarks.workers.adapter_overhead"


def timings(per: dict[str, list[Result]]) -> dict[str, list[float]]:
    """Seconds per training step, one per round, for each job (exported to pyperf's format)."""
    return {f"train {name}": [j["ms_per_step"] / 1000 for j in jobs] for name, jobs in per.items()}


def run(quick: bool, rounds: int, log: Log) -> Result:
    """Training throughput at 2 processes: hvdkit's Trainer (also with fp16 gradient compression), raw Horovod
    with its defaults and DDP in alternating jobs; the adapter overhead paired inside one job. (1 vs 2
    processes: the ``scaling`` suite.)"""
    steps = ["--steps", "10" if quick else "20", "--epochs", "3" if quick else "4"]
    launch: dict[str, tuple[str, int, list[str], dict[str, str]]] = {
        "hvdkit 2 procs": ("horovodrun", 2, ["--impl", "hvdkit"], {}),
        "hvdkit 2 procs, fp16 compression": ("horovodrun", 2, ["--impl", "hvdkit", "--compression", "fp16"], {}),
        "horovod loop 2 procs (Horovod defaults)": ("horovodrun", 2, ["--impl", "horovod"], {}),
        "PyTorch DDP (gloo) 2 procs": ("torchrun", 2, ["--impl", "ddp"], {}),
    }
    jobs = {name: partial(run_worker, launcher, np, TT, [*a, *steps], extra_env=env)
            for name, (launcher, np, a, env) in launch.items()}
    per, ran = alternate(jobs, rounds, log)
    two = samples_per_s(per, "hvdkit 2 procs")
    # Adapter overhead needs both in the same processes: separate jobs differ by more than 2 % by
    # themselves on this machine (docs/benchmarks.md, "timing modes").
    inner = str(paired_rounds(rounds))
    log(f"adapter overhead, {inner} rounds alternating epochs in one job (compute-bound model)")
    paired = run_worker("horovodrun", 2, AO, ["--rounds", inner, "--warmup", str(PAIRED_WARMUP)], tuned=True)
    log(f"adapter overhead per step, {inner} rounds alternating epochs in one job, tiny model, 1 process")
    tiny = run_worker("horovodrun", 1, AO, ["--rounds", inner, "--warmup", str(PAIRED_WARMUP), "--inputs", "8",
                                            "--hidden", "8", "--batch", "8", "--steps", "200"], tuned=True)
    tiny_us = [(a - b) / tiny["steps"] * 1e6 for a, b in zip(tiny["epoch_times"]["hvdkit"][PAIRED_WARMUP:],
                                                            tiny["epoch_times"]["horovod"][PAIRED_WARMUP:])]
    ddp = samples_per_s(per, "PyTorch DDP (gloo) 2 procs")
    return {"runs": runs_summary(per), "order": ran, "timings": timings(per),
            "paired": {"compute-bound model, 2 procs": paired, "tiny model, 1 proc": tiny}, "targets": [
        target("hvdkit (torch) 2 procs vs PyTorch DDP, samples/s", ratios(two, ddp), 1.0),
        target("hvdkit 2 procs vs raw Horovod with its defaults, samples/s",
               ratios(two, samples_per_s(per, "horovod loop 2 procs (Horovod defaults)")), 1.0),
        target("hvdkit 2 procs with fp16 gradient compression vs none, samples/s (> 1 means compression helps; "
               "reported)", ratios(samples_per_s(per, "hvdkit 2 procs, fp16 compression"), two), None),
        target("adapter overhead: hvdkit Trainer vs raw Horovod loop, same runtime settings, epochs alternating in "
               "one 2-process job, ms ratio (per block of two rounds)", paired["block_ratios"], 1.02,
               lower_is_better=True),
        target("adapter overhead per step in microseconds, tiny model, 1 process, epochs alternating in one job "
               "(reported)", tiny_us, None)]}
