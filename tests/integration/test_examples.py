"""The examples run under real horovodrun and do what their docstrings promise."""

import json
import re

import pytest
from helpers import REPO, horovodrun, requires_horovod

pytestmark = [requires_horovod, pytest.mark.horovod, pytest.mark.timeout(300)]


def test_digits_example_reaches_95_percent_and_logs_every_epoch(tmp_path):
    log = tmp_path / "metrics.csv"
    proc = horovodrun(REPO / "examples/pytorch_mnist.py", "--metrics-file", str(log), "--checkpoint-dir",
                      str(tmp_path / "ckpt"))
    acc = float(re.search(r"final validation accuracy: ([0-9.]+)", proc.stdout).group(1))
    assert acc >= 0.95, proc.stdout
    assert len(re.findall(r"epoch +\d+/12 ", proc.stdout)) == 12
    assert len(log.read_text().splitlines()) == 13  # header + 12 epochs
    assert len(list((tmp_path / "ckpt").glob("*.json"))) == 2  # keep=2


def test_synthetic_benchmark_reports_throughput(tmp_path):
    out = tmp_path / "r.json"
    proc = horovodrun(REPO / "examples/pytorch_synthetic_benchmark.py", "--steps", "5", "--warmup-steps", "1",
                      "--hidden", "64", "--json", str(out))
    res = json.loads(out.read_text())
    assert res["size"] == 2 and res["total"] > 0 and res["total"] == pytest.approx(2 * res["per_rank"])
    assert "samples/s total" in proc.stdout
