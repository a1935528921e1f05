"""The benchmark statistics and round order on fixed inputs; expected values worked out by hand.

Quartiles are the inclusive (linear interpolation) kind: for n sorted values x0..x(n-1), quartile p
sits at position (n-1)p, interpolated between its neighbours.
"""

import pytest

from hvdkit.bench import report
from hvdkit.bench.rounds import alternate, order
from hvdkit.bench.stats import UNCLEAR, block_ratios, median, quartiles, ratios, target, verdict


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


def _run(*targets_: tuple[str, list[float], float | None]) -> dict:
    return {"suites": {"s": {"targets": [target(text, values, goal) for text, values, goal in targets_]}}}


def test_compare_two_runs_target_by_target(tmp_path, capsys):
    from hvdkit.bench import compare

    quiet = _run(("a >= 1", [1.2, 1.3, 1.4, 1.5], 1.0), ("b >= 1", [1.1, 1.2, 1.3, 1.4], 1.0),
                 ("c reported", [0.4, 0.5], None), ("only quiet", [1.0, 1.0], 1.0))
    burner = _run(("a >= 1", [1.3, 1.35, 1.6, 1.7], 1.0), ("b >= 1", [0.9, 1.0, 1.05, 1.1], 1.0),
                  ("c reported", [0.9, 1.1], None))
    rows = compare.compare(quiet, burner)
    assert [r["target"] for r in rows] == ["a >= 1", "b >= 1", "c reported"]  # matched by text; extras dropped
    # a: quiet median 1.35 (IQR 1.275-1.425), burner 1.475 (1.3375-1.625): only quiet's median in burner's IQR
    assert rows[0]["medians"] == "one way" and rows[0]["agree"]
    # b: quiet met (1.175-1.325 above 1), burner unclear (0.975-1.0625 holds 1): the verdicts differ
    assert rows[1]["first"]["verdict"] == "met" and rows[1]["second"]["verdict"] == UNCLEAR and not rows[1]["agree"]
    assert rows[1]["medians"] == "no"
    # c: 0.45 (0.425-0.475) vs 1.0 (0.95-1.05): reported both times, medians far apart
    assert rows[2]["agree"] and rows[2]["medians"] == "no"
    (tmp_path / "q.json").write_text(__import__("json").dumps(quiet))
    (tmp_path / "b.json").write_text(__import__("json").dumps(burner))
    assert compare.main([str(tmp_path / "q.json"), str(tmp_path / "b.json"), "--names", "quiet", "burner"]) == 1
    out = capsys.readouterr().out
    assert "| quiet: median (IQR) | burner: median (IQR) |" in out and "Verdicts agree on 2 of 3 targets." in out
    assert "met / UNCLEAR (spread crosses target) (DIFFER)" in out
    assert "Targets only in quiet, not compared: only quiet." in out and "Targets only in burner" not in out
    assert "quiet: Priority: not recorded" in out  # these runs record no priority
    assert compare.main([str(tmp_path / "q.json"), str(tmp_path / "q.json")]) == 0
    (tmp_path / "bad.json").write_text("[]")
    assert compare.main([str(tmp_path / "bad.json"), str(tmp_path / "q.json")]) == 2
    assert "must be an hvdkit bench results.json (no 'suites' in it)" in capsys.readouterr().err
