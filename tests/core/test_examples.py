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


def test_keras_example_reaches_95_percent_and_resumes(tmp_path):
    ckpt = str(tmp_path / "ckpt")
    proc = horovodrun(REPO / "examples/keras_mnist.py", "--checkpoint-dir", ckpt, "--epochs", "12", timeout=400)
    acc = float(re.search(r"final validation accuracy: ([0-9.]+)", proc.stdout).group(1))
    assert acc >= 0.95, proc.stdout
    assert len(re.findall(r"epoch +\d+/12 ", proc.stdout)) == 12
    # run again: everything was done, training resumes at epoch 12 and runs 2 more epochs when asked
    proc = horovodrun(REPO / "examples/keras_mnist.py", "--checkpoint-dir", ckpt, "--epochs", "14", timeout=400)
    assert re.findall(r"epoch +(\d+)/14 ", proc.stdout) == ["13", "14"], proc.stdout


def test_tensorflow_custom_loop_example_trains(tmp_path):
    proc = horovodrun(REPO / "examples/tensorflow_custom_loop.py", "--epochs", "6", timeout=400)
    acc = float(re.search(r"final validation accuracy: ([0-9.]+)", proc.stdout).group(1))
    assert acc >= 0.9, proc.stdout


# The PyTorch one is a slow_check: tests/elastic/test_elastic.py runs torch elastic in depth in CI.
@pytest.mark.parametrize("example", [pytest.param("pytorch_elastic.py", marks=pytest.mark.slow_check),
                                     "keras_elastic.py"])
def test_elastic_example_under_elastic_local(tmp_path, example):
    """The Keras one under mixed_float16 (fit_elastic with the loss-scaled optimizer; test_elastic.py covers
    float32 elastic Keras in depth)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    extra = ["--precision", "mixed_float16"] if example == "keras_elastic.py" else []
    proc = subprocess.run([sys.executable, "-m", "hvdkit", "elastic-local", "--np", "2", "--min-np", "1", "--dir",
                           str(tmp_path), "--", sys.executable, str(REPO / "examples" / example),
                           "--epochs", "4", *extra], capture_output=True, text=True, timeout=280, env=env,
                          start_new_session=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "hosts file (edit to remove/add hosts)" in proc.stderr
    found = re.search(r"final validation accuracy: (0\.\d+) after 0 reset\(s\)", proc.stdout)
    assert found and float(found.group(1)) >= 0.9, proc.stdout[-2000:]
