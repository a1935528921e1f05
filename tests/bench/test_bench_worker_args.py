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


@pytest.mark.parametrize("worker", ["keras_overhead", "adapter_overhead"])
@pytest.mark.parametrize("warmup", ["3", "4", "-1"])
def test_overhead_workers_refuse_a_warmup_that_leaves_no_block_timed(monkeypatch, capsys, worker, warmup):
    """Both overhead workers judge blocks of two timed rounds, so --warmup must leave two."""
    import importlib
    import subprocess
    import sys

    # the arguments are checked before any framework is imported: a fresh interpreter shows none loaded
    code = (f"import sys, hvdkit.bench.workers.{worker}; "
            "print(sorted({'torch', 'tensorflow', 'horovod'} & set(sys.modules)))")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          check=True).stdout.strip() == "[]"
    parse = importlib.import_module(f"hvdkit.bench.workers.{worker}").parse_args

    monkeypatch.setattr("sys.argv", [worker, "--results", "r.json", "--rounds", "4", "--warmup", warmup])
    with pytest.raises(SystemExit):
        parse()
    assert (f"argument --warmup: must be an integer from 0 to --rounds - 2 (2: two rounds, one in each order, "
            f"timed), got {warmup}") in capsys.readouterr().err
    monkeypatch.setattr("sys.argv", [worker, "--results", "r.json", "--rounds", "4", "--warmup", "2"])
    assert parse().warmup == 2
