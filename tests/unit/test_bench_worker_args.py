"""The bench workers' shared arguments refuse counts they cannot time, naming argument, value and rule."""

import argparse

import pytest

from hvdkit.bench.workers.common import model_arguments, paired_parser


def test_model_sizes_and_timed_rounds_are_checked_before_anything_runs(capsys):
    p = paired_parser("demo")
    args = p.parse_args(["--results", "r.json", "--rounds", "2"])
    assert (args.rounds, args.batch, args.steps) == (2, 256, 20)
    for argv, message in ((["--rounds", "1"], "argument --rounds: must be an integer >= 2 (the first is not timed), "
                                              "got 1"),
                          (["--batch", "0"], "argument --batch: must be an integer >= 1, got 0")):
        with pytest.raises(SystemExit):
            p.parse_args(["--results", "r.json", *argv])
        assert message in capsys.readouterr().err
    q = model_arguments(argparse.ArgumentParser(), steps=30)
    assert q.parse_args(["--results", "r.json"]).steps == 30


@pytest.mark.parametrize("warmup", ["4", "-1"])
def test_keras_overhead_refuses_a_warmup_that_leaves_no_round_timed(monkeypatch, capsys, warmup):
    from hvdkit.bench.workers import keras_overhead

    monkeypatch.setattr("sys.argv", ["keras_overhead", "--results", "r.json", "--rounds", "4", "--warmup", warmup])
    with pytest.raises(SystemExit):
        keras_overhead.parse_args()
    assert (f"argument --warmup: must be an integer from 0 to --rounds - 1 (3: at least one round timed), "
            f"got {warmup}") in capsys.readouterr().err
    monkeypatch.setattr("sys.argv", ["keras_overhead", "--results", "r.json", "--rounds", "4", "--warmup", "3"])
    assert keras_overhead.parse_args().warmup == 3
