"""``benchmarks/run`` runs its suites for real (quick sizes) and reports measured ratios, plots and JSON.

CI runs one suite end to end, allreduce --quick, and the waiting-rank worker (it checks Horovod patch 0007);
the other suites and the paired workers are ``slow_check`` tests, run by ``scripts/slow-checks.sh``.
"""

import json
import subprocess
import sys

import pytest
from helpers import REPO, requires_horovod

pytestmark = [requires_horovod, pytest.mark.horovod]


ABBA = ["a", "b", "b", "a"]  # two rounds, the order reversed in the second


def _bench(tmp_path, *suites: str, timeout: float) -> tuple[subprocess.CompletedProcess, dict, str]:
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "run"), *suites, "--quick", "--rounds", "2",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=timeout, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, json.loads((tmp_path / "results.json").read_text()), (tmp_path / "report.md").read_text()


def _check_targets(res: dict, suite: str) -> list[int]:
    """Each target's median and IQR lie within its per-round values; the suite's load is recorded. Returns
    each target's round count."""
    for t in res["suites"][suite]["targets"]:
        assert t["rounds"] == len(t["values"]), t
        q1, q3 = t["iqr"]
        assert min(t["values"]) <= q1 <= t["measured"] <= q3 <= max(t["values"]), t
    for load in (res["load"]["before"], res["load"]["after"], res["suites"][suite]["load"]["after"]):
        assert load["load1"] >= 0 and load["cpus"] >= 1
    return [t["rounds"] for t in res["suites"][suite]["targets"]]


def _abba(order: list[str], names: list[str]) -> list[str]:
    """``order`` with each job named by its letter (first job a, second b, ...)."""
    return ["abcdefgh"[names.index(n)] for n in order]


@pytest.mark.slow_check  # 2.5 min of CI for lab code; scripts/slow-checks.sh runs it
@pytest.mark.timeout(600)
def test_bench_allreduce_quick_rounds(tmp_path):
    proc, res, report = _bench(tmp_path, "allreduce", timeout=580)
    ar = res["suites"]["allreduce"]
    rows = ar["rows"]
    assert set(rows) == {"hvdkit (MPI, hvdkit defaults)", "horovod (MPI)", "horovod (Gloo)",
                         "torch.distributed (gloo)", "mpi4py (Open MPI)", "hvdkit (MPI, fp16 compression)"}
    jobs = list(rows)[:5]  # the five alternating jobs, in their launch order
    assert _abba(ar["order"], jobs) == ["a", "b", "c", "d", "e", "e", "d", "c", "b", "a"]
    for name, r in rows.items():
        assert [x["bytes"] for x in r] == [4096 * 4**i for i in range(7)], name
        assert all(0 < x["busbw_iqr"][0] <= x["busbw_gbps"] <= x["busbw_iqr"][1] for x in r), name
    for r in ar["ratios"]:  # per size, one ratio per round for each pair
        for key in ("vs_horovod", "vs_torch_gloo", "fp16_vs_none"):
            assert len(r[key]["values"]) == 2 and all(v > 0 for v in r[key]["values"]), key
    assert _check_targets(res, "allreduce") == [2, 2, 2]
    assert (tmp_path / "allreduce.png").stat().st_size > 10_000
    assert "allreduce bus bandwidth >= torch.distributed gloo" in report and "![allreduce](allreduce.png)" in report
    assert "Load average (1 minute) before and after" in report and "| whole run |" in report
    assert "Targets: median of the per-round values" in proc.stdout
    # every job's per-round seconds per allreduce, in pyperf's format: one benchmark per job and size
    perf = json.loads((tmp_path / "pyperf.json").read_text())
    names = {b["metadata"]["name"] for b in perf["benchmarks"]}
    assert len(names) == 5 * 7 and "allreduce horovod (MPI) 16384 KiB" in names
    assert all(len(b["runs"]) == 2 for b in perf["benchmarks"])


@pytest.mark.slow_check  # scripts/slow-checks.sh; see the module docstring
@pytest.mark.timeout(600)
def test_bench_throughput_and_keras_quick_rounds(tmp_path):
    _proc, res, report = _bench(tmp_path, "throughput", "keras", timeout=580)
    tp, ks = res["suites"]["throughput"], res["suites"]["keras"]
    assert _abba(tp["order"], list(tp["runs"])) == ["a", "b", "c", "d", "d", "c", "b", "a"]
    assert _abba(ks["order"], list(ks["runs"])) == ["a", "b", "c", "c", "b", "a"]
    for suite in ("throughput", "keras"):
        for run in res["suites"][suite]["runs"].values():
            assert len(run["rounds"]) == 2 and run["samples_per_s"] > 0
    # alternating jobs: one value per round; epochs alternating in one job (adapter overhead): 3 x rounds
    # blocks of two rounds judged, and the tiny model's per-step cost reported for each of those 12 rounds
    assert _check_targets(res, "throughput") == [2, 2, 2, 6, 12]
    assert len(tp["paired"]["compute-bound model, 2 procs"]["epoch_times"]["hvdkit"]) == 2 + 12
    assert {j["compression"] for j in tp["runs"]["hvdkit 2 procs, fp16 compression"]["rounds"]} == {"fp16"}
    # fit vs the tape loop: epochs alternating in one job, 3 x rounds blocks of two rounds judged (two untimed
    # warm-up rounds first)
    assert _check_targets(res, "keras") == [2, 2, 6]
    paired = ks["paired"]["fit vs tape loop, 2 procs"]
    assert len(paired["epoch_times"]["fit"]) == len(paired["epoch_times"]["tape"]) == 2 + 12
    assert paired["knobs"]["fit_data"] == "dataset" and paired["steps"] == 10
    assert "Keras model.fit vs the tape loop, epochs alternating in one job" in report
    assert "hvdkit (torch) 2 procs vs PyTorch DDP" in report


@pytest.mark.slow_check  # scripts/slow-checks.sh; see the module docstring
@pytest.mark.timeout(400)
def test_bench_scaling_quick_rounds_budget(tmp_path):
    """The scaling suite: baseline, no-communication ceiling and two settings alternate, the three judged jobs
    for 3 x the rounds; every job's step is split into phases that add up to it; the settings really reach the
    workers."""
    _proc, res, report = _bench(tmp_path, "scaling", timeout=380)
    sc = res["suites"]["scaling"]
    names = ["1 proc x 1 thread", "2 procs, no communication (independent shards)", "2 procs, hvdkit defaults",
             "2 procs, tensor fusion at Horovod's default threshold (128 MiB)"]
    assert list(sc["budget"]) == names
    # two rounds of every job, then the three judged jobs go on alone for 4 more, still alternating
    assert _abba(sc["order"], names) == ["a", "b", "c", "d", "d", "c", "b", "a", *["a", "b", "c", "c", "b", "a"] * 2]
    assert _check_targets(res, "scaling") == [6, 6]
    assert [len(sc["runs"][n]["rounds"]) for n in names] == [6, 6, 6, 2]
    assert len(sc["settings"][names[3]]["efficiency"]["values"]) == 2  # a setting pairs with its own rounds only
    for name, runs in sc["runs"].items():
        for job in runs["rounds"]:
            assert job["size"] == (1 if name == names[0] else 2) and job["threads"] == 1
            for r in job["ranks"]:  # the phases (medians over epochs) add up to the step, less the loop's overhead
                ms = r["ms_per_step"]
                assert 0.8 * ms["step"] <= ms["data"] + ms["forward_backward"] + ms["wait"] + ms["update"] \
                    <= 1.05 * ms["step"], ms
    ceiling = sc["runs"][names[1]]["rounds"][0]  # no Horovod: no allreduce to wait for, no background thread
    assert ceiling["impl"] == "local" and ceiling["ranks"][0]["ms_per_step"]["wait"] == 0
    assert sc["budget"][names[1]]["other_threads_cpu"]["median"] < sc["budget"][names[2]]["other_threads_cpu"]["median"]
    defaults, fused = (sc["runs"][n]["rounds"][0]["env"] for n in names[2:])
    assert defaults["HOROVOD_FUSION_THRESHOLD"] == str(1 << 20) and fused["HOROVOD_FUSION_THRESHOLD"] == str(128 << 20)
    for name in names[2:]:  # with communication, rank 0 gathered both ranks' budgets
        assert len(sc["runs"][name]["rounds"][0]["ranks"]) == 2
    # a quick run's defaults job is as long as the setting's: the setting is compared with it round by round
    fused = sc["runs"][names[3]]["rounds"]
    assert sc["settings"][names[3]]["vs_defaults"]["values"] == pytest.approx(
        [f["samples_per_s"] / d["samples_per_s"] for f, d in zip(fused, sc["runs"][names[2]]["rounds"])])
    assert "vs_defaults" not in sc["settings"][names[2]]
    assert "Scaling 1 -> 2 processes: efficiency" in report and "vs defaults, same length" in report
    assert "![scaling](scaling.png)" in report
    assert (tmp_path / "scaling.png").stat().st_size > 10_000


@pytest.mark.slow_check
@pytest.mark.timeout(300)
def test_adapter_overhead_worker_pairs_both_loops_in_one_job(tmp_path):
    from benchmarks.jobs import run_worker

    r = run_worker("horovodrun", 2, "benchmarks.workers.adapter_overhead",
                   ["--rounds", "4", "--steps", "4", "--inputs", "16", "--hidden", "16", "--batch", "8"],
                   tuned=True, timeout=280)
    assert r["size"] == 2 and r["steps"] == 4 and r["warmup"] == 2
    times = r["epoch_times"]
    assert len(times["hvdkit"]) == len(times["horovod"]) == 4  # one epoch each per round
    a, b = times["hvdkit"][2:], times["horovod"][2:]  # the first 2 rounds, one in each order, are warm-up
    assert r["ratios"] == pytest.approx([a[0] / b[0], a[1] / b[1]])
    # judged: one block of the two timed rounds (one in each order), its epochs summed
    assert r["block_ratios"] == pytest.approx([(a[0] + a[1]) / (b[0] + b[1])])
    assert r["ratio_median"] == r["ratio_quartiles"][0] == r["ratio_quartiles"][1] == r["block_ratios"][0]


@pytest.mark.slow_check
@pytest.mark.timeout(300)
def test_precision_worker_pairs_fp32_and_bf16_in_one_job(tmp_path):
    from benchmarks.jobs import run_worker

    r = run_worker("horovodrun", 2, "benchmarks.workers.precision",
                   ["--rounds", "3", "--steps", "4", "--inputs", "16", "--hidden", "16", "--batch", "8"],
                   tuned=True, timeout=280)
    assert r["size"] == 2 and r["steps"] == 4
    assert len(r["epoch_times"]["32"]) == len(r["epoch_times"]["bf16"]) == 3  # one epoch each per round
    q1, q3 = r["time_ratio_quartiles"]
    assert 0 < q1 <= r["time_ratio_median"] <= q3
    assert r["samples_per_s"]["bf16"] > 0 and r["samples_per_s"]["fp32"] > 0


@pytest.mark.slow_check
@pytest.mark.timeout(300)
def test_step_timing_cost_worker_pairs_the_trainer_with_and_without_step_timing(tmp_path):
    from benchmarks.jobs import run_worker

    r = run_worker("horovodrun", 2, "benchmarks.workers.step_timing_cost",
                   ["--rounds", "4", "--warmup", "2", "--steps", "4", "--inputs", "16", "--hidden", "16", "--batch",
                    "8", "--every", "2"], tuned=True, timeout=280)
    assert r["size"] == 2 and r["steps"] == 4 and r["every"] == 2
    assert len(r["epoch_times"]["on"]) == len(r["epoch_times"]["off"]) == 4  # one epoch each per round
    assert len(r["block_ratios"]) == 1  # the two timed rounds, one block
    assert r["ms_per_step"]["on"] > 0 and r["ms_per_step"]["off"] > 0


@pytest.mark.timeout(300)
def test_waiting_rank_worker_times_the_working_rank_and_the_waiting_threads_cpu(tmp_path):
    from benchmarks.jobs import run_worker

    r = run_worker("horovodrun", 2, "benchmarks.workers.waiting_rank",
                   ["--rounds", "3", "--matmuls", "20", "--threads", "2"], timeout=280)
    assert r["size"] == 2 and r["threads_rank0"] == 2 and r["matmuls"] == 20
    assert len(r["work_s"]) == 3 and all(t > 0 for t in r["work_s"])  # the first round is not in the median
    assert len(r["waiting_cpu_s"]) == 1 and len(r["waiting_cpu_s"][0]) == 2  # rank 1, timed rounds
    # patch 0007: the waiting rank blocks (spinning, it used 0.04-1.2 s per 2 s wait)
    assert max(r["waiting_cpu_s"][0]) < 0.01, r
