"""The benchmark statistics and round order on fixed inputs; expected values worked out by hand.

Quartiles are the inclusive (linear interpolation) kind: for n sorted values x0..x(n-1), quartile p
sits at position (n-1)p, interpolated between its neighbours.
"""

import pytest

from benchmarks import report
from benchmarks.jobs import alternate, order
from benchmarks.stats import UNCLEAR, block_ratios, median, quartiles, ratios, target, verdict


def test_median_and_quartiles_by_hand():
    # [1, 2, 3, 4]: median (2+3)/2 = 2.5; Q1 at position 0.75 -> 1 + 0.75 = 1.75; Q3 at 2.25 -> 3 + 0.25 = 3.25
    assert median([4, 1, 3, 2]) == 2.5
    assert quartiles([4, 1, 3, 2]) == pytest.approx([1.75, 3.25])
    # [0.8, 0.9, 1.1, 1.2, 1.3]: positions 1 and 3 fall on values -> 0.9 and 1.2; median 1.1
    assert median([1.3, 0.9, 1.1, 1.2, 0.8]) == 1.1
    assert quartiles([1.3, 0.9, 1.1, 1.2, 0.8]) == pytest.approx([0.9, 1.2])
    # two rounds: positions 0.25 and 0.75 between 2 and 4 -> 2.5 and 3.5 (inside the values, never beyond)
    assert quartiles([4, 2]) == pytest.approx([2.5, 3.5])
    assert quartiles([3.0]) == [3.0, 3.0]


def test_per_round_ratios_pair_rounds_and_refuse_unequal_counts():
    assert ratios([2, 3, 9], [4, 6, 3]) == [0.5, 0.5, 3.0]
    with pytest.raises(ValueError, match="must pair up, got 2 and 3 rounds"):
        ratios([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="no values"):
        median([])


def test_block_ratios_sum_two_rounds_each_and_cancel_which_ran_first():
    # A runs 10 % slower when it goes second (rounds 1, 3: BA) and 10 % faster when first: per-round
    # ratios swing 0.9 / 1.1, each block of two reads the true 1.0.
    a, b = [0.9, 1.1, 0.9, 1.1, 0.9], [1.0, 1.0, 1.0, 1.0, 1.0]
    assert ratios(a, b) == [0.9, 1.1, 0.9, 1.1, 0.9]
    assert block_ratios(a, b) == pytest.approx([1.0, 1.0])  # the odd last round is left out
    assert block_ratios([3.0, 1.0], [1.0, 1.0]) == [2.0]  # (3 + 1) / (1 + 1), not the mean of 3 and 1
    with pytest.raises(ValueError, match="must pair up, got 3 and 2 rounds"):
        block_ratios([1.0, 1.0, 1.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="a block needs two rounds, got 1"):
        block_ratios([1.0], [1.0])


@pytest.mark.parametrize(("iqr", "goal", "lower", "expected"), [
    ([0.9, 1.2], 1.0, False, UNCLEAR),   # the goal lies inside the IQR
    ([0.9, 1.2], 0.85, False, "met"),    # the whole IQR above the goal
    ([0.9, 1.2], 0.9, False, "met"),     # Q1 exactly on the goal counts as met
    ([0.9, 1.2], 1.25, False, "MISSED"),  # the whole IQR below the goal
    ([0.9, 1.2], 1.02, True, UNCLEAR),   # lower is better, goal inside
    ([0.9, 1.2], 1.2, True, "met"),      # Q3 exactly on the goal
    ([0.9, 1.2], 0.85, True, "MISSED"),  # the whole IQR above a lower-is-better goal
    ([0.9, 1.2], None, False, "reported"),
])
def test_verdict_flags_a_spread_that_crosses_the_target(iqr, goal, lower, expected):
    assert verdict(1.1, iqr, goal, lower_is_better=lower) == expected


def test_verdict_without_a_spread_compares_the_value():
    assert verdict(1.1, None, 1.0) == "met"
    assert verdict(0.9, None, 1.0) == "MISSED"


def test_target_holds_median_iqr_and_rounds():
    t = target("x vs y", [4, 1, 3, 2], 2.0)
    assert t["measured"] == 2.5 and t["iqr"] == pytest.approx([1.75, 3.25]) and t["rounds"] == 4
    assert t["values"] == [4.0, 1.0, 3.0, 2.0]
    results = {"suites": {"s": {"targets": [t, target("z", [1.5, 1.7], 1.0)]}}}
    assert [x["verdict"] for x in report.targets(results)] == [UNCLEAR, "met"]


def test_rounds_alternate_abba():
    assert order(["a", "b"], 0) == ["a", "b"] and order(["a", "b"], 1) == ["b", "a"]
    calls: list[str] = []
    jobs = {n: (lambda n=n: calls.append(n) or len(calls)) for n in ("a", "b", "c")}
    per, ran = alternate(jobs, 3)
    assert ran == calls == ["a", "b", "c", "c", "b", "a", "a", "b", "c"]
    assert per == {"a": [1, 6, 7], "b": [2, 5, 8], "c": [3, 4, 9]}
    with pytest.raises(ValueError, match="rounds must be at least 1, got 0"):
        alternate(jobs, 0)
    calls.clear()  # rounds that go on from round 3 (index 3: reversed) keep alternating, and log their numbers
    logged: list[str] = []
    _, ran = alternate(jobs, 2, logged.append, first=3)
    assert ran == ["c", "b", "a", "a", "b", "c"]
    assert logged[0] == "round 4/5: c" and logged[-1] == "round 5/5: c"


def test_report_states_load_and_flags_unclear():
    load = {"before": {"load1": 0.5, "cpus": 2, "t": 10.0}, "after": {"load1": 2.25, "cpus": 2, "t": 70.0}}
    results = {"date": "d", "machine": "m", "command": "c", "rounds": 4, "load": load,
               "suites": {"s": {"load": load, "targets": [target("x vs y", [4, 1, 3, 2], 2.0)]}}}
    md = report.markdown(results, [])
    assert "| x vs y | >= 2 | 2.500 | 1.750-3.250 | 4 | UNCLEAR (spread crosses target) |" in md
    assert "| s | 0.50 | 2.25 | 2 | 1.0 |" in md and "| whole run | 0.50 | 2.25 | 2 | 1.0 |" in md


def test_timings_export_to_pyperf_and_two_runs_compare_with_pyperf(tmp_path):
    """Each suite's per-round timings become one pyperf benchmark (one run per round), and pyperf's own
    compare_to reads two runs' files: the comparison of a quiet and a loaded run needs no code of ours."""
    import subprocess
    import sys

    def run(scale: float) -> dict:
        # five rounds each, close together: pyperf hides a difference it cannot call significant
        per_round = [scale * x * 1e-3 for x in (1.0, 1.01, 0.99, 1.0, 1.02)]
        return {"suites": {"allreduce": {"timings": {"allreduce hvdkit 1024 KiB": per_round}},
                           "keras": {"timings": {"train fit": [0.02, 0.03, 0.025]}}, "precision": {}}}

    quiet, loaded = report.pyperf_suite(run(1.0)), report.pyperf_suite(run(2.0))
    assert sorted(quiet.get_benchmark_names()) == ["allreduce hvdkit 1024 KiB", "train fit"]
    fit = quiet.get_benchmark("train fit")
    assert fit.get_nrun() == 3 and fit.median() == 0.025 and fit.get_unit() == "second"
    assert report.pyperf_suite({"suites": {"precision": {}}}) is None  # nothing timed, no file
    quiet.dump(str(tmp_path / "quiet.json"))
    loaded.dump(str(tmp_path / "loaded.json"))
    proc = subprocess.run([sys.executable, "-m", "pyperf", "compare_to", str(tmp_path / "quiet.json"),
                           str(tmp_path / "loaded.json")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert ("allreduce hvdkit 1024 KiB: Mean +- std dev: [quiet] 1.00 ms +- 0.01 ms -> [loaded] 2.01 ms +- 0.02 ms: "
            "2.00x slower") in proc.stdout, proc.stdout
