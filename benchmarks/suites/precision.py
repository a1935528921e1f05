"""bf16 against fp32 step time in hvdkit's Trainer (torch.autocast on this machine's device), epochs
alternating inside one 2-process job."""

from __future__ import annotations

from benchmarks.jobs import Log, Result, run_worker
from benchmarks.stats import in_job_rounds, ratios, target

PR = "benchmarks.workers.precision"


def run(quick: bool, rounds: int, log: Log) -> Result:
    """bf16 against fp32 step time in hvdkit's Trainer (torch.autocast on this machine's device), paired."""
    inner = in_job_rounds(rounds) + 1  # the worker's first round is not timed
    log(f"Trainer precision='bf16' vs '32', 2 procs, {inner} rounds alternating epochs in one job")
    r = run_worker("horovodrun", 2, PR, ["--rounds", str(inner), "--steps", "10" if quick else "20"], tuned=True)
    fp32, bf16 = r["epoch_times"]["32"][1:], r["epoch_times"]["bf16"][1:]
    return {"result": r, "targets": [
        target("bf16 vs fp32 samples/s, Trainer(precision='bf16') over '32', 2 procs on CPU (reported)",
               ratios(fp32, bf16), None)]}
