"""The scaling suite: efficiency from 1 to 2 processes, the step-time budget behind it, and what moves it.

Every job trains the compute-bound model of ``train_torch`` with per-phase timers
(``benchmarks.workers.step_budget``: data, forward+backward, allreduce wait, update, and each
thread's CPU time), in alternating rounds (A B C ..., then reversed):

- the baseline, 1 process with 1 compute thread (the machine's other core is free for its
  Horovod background thread, as it would be for a single-GPU job);
- 2 processes of the same loop with **no communication at all** (independent shards): what two
  processes sharing the cores, caches and memory cost each other, the ceiling no communication
  setting can beat;
- 2 processes with hvdkit's runtime defaults, and with one setting changed at a time: Horovod's own
  defaults, the tensor-fusion threshold, the cycle time, fp16 compression, each rank bound to a core,
  Open MPI's allreduce algorithm (ring, Rabenseifner) instead of its own per-call choice.

Per round and setting: efficiency = samples/s at 2 processes / (2 x the baseline's samples/s of
the same round). The baseline, the ceiling and the defaults, which the targets compare, run
``JUDGED_ROUNDS_FACTOR`` times as many rounds: after the rounds that include every setting they go on
alternating by themselves (settings are paired with the first rounds only). The target is judged on
hvdkit's defaults; the other settings are reported with their per-phase budget, so the report shows
where the step's time goes and what each knob changes.
The jobs the targets compare run longer than the other settings' (``JUDGED_EPOCHS``); each setting is
therefore also compared, round by round, with a defaults job of its own length (``REFERENCE``):
``vs_defaults`` = the setting's samples/s / that job's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from benchmarks.jobs import BenchError, Log, Result, alternate, prefixed, run_worker
from benchmarks.stats import median, quartiles, summary, target

SB = "benchmarks.workers.step_budget"
BASELINE = "1 proc x 1 thread"
CEILING = "2 procs, no communication (independent shards)"
DEFAULTS = "2 procs, hvdkit defaults"
#: hvdkit's defaults again, in a job as long as the other settings' (a full run only): what each setting is
#: compared with, since job length alone moves ms/step.
REFERENCE = "2 procs, hvdkit defaults, as long as the other settings"
BOUND = "2 procs, each rank bound to a core"
#: epochs of the baseline, ceiling and defaults jobs (the first is not timed); the other settings' jobs run 5
JUDGED_EPOCHS = 13
#: the jobs the targets compare
JUDGED = (BASELINE, CEILING, DEFAULTS)
#: rounds of the judged jobs, per round of the suite: after the rounds every setting runs in, the three go on
#: alternating by themselves; with 5 values the quartiles moved the verdict between runs (docs/benchmarks.md,
#: "Scaling 1 -> 2 processes").
JUDGED_ROUNDS_FACTOR = 3


def _ompi_allreduce(algorithm: int) -> dict[str, str]:
    """The environment that makes Open MPI's ``coll/tuned`` use allreduce ``algorithm`` for every call."""
    return {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1", "OMPI_MCA_coll_tuned_allreduce_algorithm": str(algorithm)}


#: setting name -> (extra environment, horovodrun arguments, worker arguments); one change from DEFAULTS each.
SETTINGS: dict[str, tuple[dict[str, str], list[str], list[str]]] = {
    DEFAULTS: ({}, [], []),
    "2 procs, Horovod's defaults (no hvdkit tuning)": ({"HVDKIT_NO_TUNING": "1"}, [], []),
    "2 procs, tensor fusion off (HOROVOD_FUSION_THRESHOLD=0)": ({"HOROVOD_FUSION_THRESHOLD": "0"}, [], []),
    "2 procs, tensor fusion at Horovod's default threshold (128 MiB)": ({"HOROVOD_FUSION_THRESHOLD": str(128 << 20)},
                                                                        [], []),
    "2 procs, cycle time 1 ms": ({"HOROVOD_CYCLE_TIME": "1"}, [], []),
    "2 procs, fp16 compression": ({}, [], ["--compression", "fp16"]),
    BOUND: ({}, ["--binding-args=--bind-to core --map-by core"], []),
    # Open MPI's own choice of allreduce algorithm replaced (its tuned component's dynamic rules):
    "2 procs, Open MPI allreduce: ring": (_ompi_allreduce(4), [], []),
    "2 procs, Open MPI allreduce: Rabenseifner (reduce-scatter + allgather)": (_ompi_allreduce(6), [], []),
}
#: the settings a ``--quick`` run keeps
QUICK = (DEFAULTS, "2 procs, tensor fusion at Horovod's default threshold (128 MiB)")


def _phases(job: Result) -> dict[str, float]:
    """The job's per-step phases (ms), the median over its ranks, and the background threads' CPU ms."""
    ranks = job["ranks"]
    out = {k: median([r["ms_per_step"][k] for r in ranks]) for k in ranks[0]["ms_per_step"]}
    # every thread but the training thread: Horovod's background thread, Open MPI's (and intra-op threads,
    # none here: one compute thread per process)
    out["other_threads_cpu"] = median([sum(v for name, v in r["thread_cpu_ms_per_step"].items() if name != "MainThread")
                                       for r in ranks])
    return out


def budget(per: dict[str, list[Result]]) -> dict[str, dict[str, Any]]:
    """Per job: the median over rounds of each phase (ms per step) with its IQR."""
    out = {}
    for name, jobs in per.items():
        rows = [_phases(j) for j in jobs]
        out[name] = {k: {"median": median([r[k] for r in rows]), "iqr": quartiles([r[k] for r in rows])}
                     for k in rows[0]}
    return out


def efficiency(per: dict[str, list[Result]], name: str) -> list[float]:
    """Per round: samples/s of job ``name`` over twice the baseline's."""
    return [j["samples_per_s"] / (2 * b["samples_per_s"]) for j, b in zip(per[name], per[BASELINE])]


def run(quick: bool, rounds: int, log: Log, settings: Sequence[str] | None = None) -> Result:
    """Run the baseline, the no-communication ceiling and each setting at 2 processes in alternating rounds."""
    log_ = log
    steps = ["--steps", "10" if quick else "20", "--epochs", "3" if quick else "5"]
    # the jobs the targets compare run longer: a median over 12 timed epochs (~10 s) instead of 4 (~3 s) rides
    # out the machine's shorter slow spells, which moved single rounds by 0.2 (docs/benchmarks.md)
    judged = steps if quick else ["--steps", "20", "--epochs", str(JUDGED_EPOCHS)]
    chosen = list(settings) if settings is not None else list(QUICK if quick else SETTINGS)
    bad = [s for s in chosen if s not in SETTINGS]
    if bad:
        raise ValueError(f"settings must be among {', '.join(SETTINGS)}, got {', '.join(bad)}")
    chosen = [DEFAULTS, *(s for s in chosen if s != DEFAULTS)]  # the target is judged on hvdkit's defaults
    one = {"HVDKIT_THREADS": "1"}  # one compute thread per process everywhere, whatever the core count
    jobs: dict[str, Callable[[], Result]] = {
        BASELINE: partial(run_worker, "horovodrun", 1, SB, judged, extra_env=one),
        CEILING: partial(run_worker, "mpirun", 2, SB, ["--impl", "local", *judged], extra_env=one),
    }
    # the settings' reference: the defaults at the settings' length (in a quick run the defaults job is that)
    reference = REFERENCE if judged != steps and len(chosen) > 1 else DEFAULTS
    for name in chosen:
        env, launcher_args, args = SETTINGS[name]
        jobs[name] = partial(run_worker, "horovodrun", 2, SB, [*args, *(judged if name == DEFAULTS else steps)],
                             extra_env={**one, **env},
                             launcher_args=launcher_args)
    if reference == REFERENCE:
        jobs[REFERENCE] = partial(run_worker, "horovodrun", 2, SB, steps, extra_env=one)
    per, ran = alternate(jobs, rounds, log_)
    more, ran_more = alternate({name: jobs[name] for name in JUDGED}, (JUDGED_ROUNDS_FACTOR - 1) * rounds,
                               prefixed(log_, "the judged jobs"), first=rounds)
    for name in JUDGED:
        per[name].extend(more[name])
    ran.extend(ran_more)
    bound = [j["cores"] for j in per.get(BOUND, [])]
    if any(c != 1 for c in bound):
        raise BenchError(f"{BOUND}: the ranks ran on {bound} cores; horovodrun ignored --binding-args (it passes "
                         "them to Open MPI's mpirun only)")
    table: dict[str, dict[str, Any]] = {
        name: {"efficiency": summary(efficiency(per, name)), "samples_per_s": median(
            [j["samples_per_s"] for j in per[name]])} for name in per if name != BASELINE}
    for name in chosen:
        if name != DEFAULTS:
            table[name]["vs_defaults"] = summary([j["samples_per_s"] / d["samples_per_s"]
                                                  for j, d in zip(per[name], per[reference])])
    timings = {f"scaling {name}": [j["ms_per_step"] / 1000 for j in jobs] for name, jobs in per.items()}
    return {"order": ran, "budget": budget(per), "settings": table, "timings": timings,
            "runs": {name: {"rounds": jobs_} for name, jobs_ in per.items()},
            "targets": [
                target("scaling efficiency 1 -> 2 processes, hvdkit defaults (2 procs samples/s / 2 x 1 proc x 1 "
                       "thread)", efficiency(per, DEFAULTS), 0.90),
                target("ceiling: 2 processes with no communication / 2 x 1 proc (reported)", efficiency(per, CEILING),
                       None)]}
