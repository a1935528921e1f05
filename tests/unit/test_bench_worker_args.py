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
