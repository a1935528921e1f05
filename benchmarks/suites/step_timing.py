"""What ``StepTiming`` costs: hvdkit's Trainer with per-step timing against without, epochs alternating in one
2-process job (a tiny model, so the per-step cost is as visible as it gets, and the compute-bound MLP)."""

from __future__ import annotations

from benchmarks.jobs import Log, Result, run_worker
from benchmarks.stats import PAIRED_WARMUP, paired_rounds, target

ST = "benchmarks.workers.step_timing_cost"


def run(quick: bool, rounds: int, log: Log) -> Result:
    """Trainer with StepTiming(every=20) over without, time per epoch, paired in one job per model."""
    inner = str(paired_rounds(rounds))
    warm = ["--rounds", inner, "--warmup", str(PAIRED_WARMUP)]
    log(f"StepTiming on vs off, tiny model, 2 procs, {inner} rounds alternating epochs in one job")
    tiny = run_worker("horovodrun", 2, ST, [*warm, "--inputs", "8", "--hidden", "8", "--batch", "8",
                                            "--steps", "50" if quick else "200"], tuned=True)
    log(f"StepTiming on vs off, compute-bound MLP, 2 procs, {inner} rounds alternating epochs in one job")
    mlp = run_worker("horovodrun", 2, ST, [*warm, "--steps", "5" if quick else "20"], tuned=True)
    tiny_us = [(a - b) / tiny["steps"] * 1e6 for a, b in zip(tiny["epoch_times"]["on"][PAIRED_WARMUP:],
                                                            tiny["epoch_times"]["off"][PAIRED_WARMUP:])]
    return {"paired": {"tiny model, 2 procs": tiny, "compute-bound model, 2 procs": mlp}, "targets": [
        target("StepTiming on vs off, tiny model, 2 procs, epochs alternating in one job, time ratio (per block of "
               "two rounds)", tiny["block_ratios"], 1.02, lower_is_better=True),
        target("StepTiming on vs off, compute-bound MLP, 2 procs, epochs alternating in one job, time ratio (per "
               "block of two rounds)", mlp["block_ratios"], 1.01, lower_is_better=True),
        target("StepTiming cost per step in microseconds, tiny model, 2 procs (reported)",
               tiny_us, None)]}
