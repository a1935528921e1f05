"""The examples run under real horovodrun and do what their docstrings promise."""

import json
import re

import pytest
from helpers import REPO, horovodrun, horovodrun_several, requires_horovod

pytestmark = [requires_horovod, pytest.mark.horovod, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def torch_examples(tmp_path_factory):
    """The digits example and the synthetic benchmark, one after the other in one launch
    (tests/workers/several.py: one torch import per rank for both)."""
    tmp = tmp_path_factory.mktemp("torch_examples")
    proc = horovodrun_several(
        (str(REPO / "examples/pytorch_mnist.py"), "--metrics-file", str(tmp / "metrics.csv"), "--checkpoint-dir",
         str(tmp / "ckpt")),
        (str(REPO / "examples/pytorch_synthetic_benchmark.py"), "--steps", "5", "--warmup-steps", "1", "--hidden",
         "64", "--json", str(tmp / "r.json")))
    return proc, tmp


def test_digits_example_reaches_95_percent_and_logs_every_epoch(torch_examples):
    proc, tmp = torch_examples
    assert "pytorch_mnist.py" not in proc.failed, proc.stdout[-3000:] + proc.stderr[-3000:]
    acc = float(re.search(r"final validation accuracy: ([0-9.]+)", proc.stdout).group(1))
    assert acc >= 0.95, proc.stdout
    assert len(re.findall(r"epoch +\d+/12 ", proc.stdout)) == 12
    assert len((tmp / "metrics.csv").read_text().splitlines()) == 13  # header + 12 epochs
    assert len(list((tmp / "ckpt").glob("*.json"))) == 2  # keep=2


def test_synthetic_benchmark_reports_throughput(torch_examples):
    proc, tmp = torch_examples
    assert "pytorch_synthetic_benchmark.py" not in proc.failed, proc.stdout[-3000:] + proc.stderr[-3000:]
    res = json.loads((tmp / "r.json").read_text())
    assert res["size"] == 2 and res["total"] > 0 and res["total"] == pytest.approx(2 * res["per_rank"])
    assert "samples/s total" in proc.stdout


@pytest.fixture(scope="module")
def tf_examples(tmp_path_factory):
    """The Keras example for 12 epochs; then one launch (tests/workers/several.py: one TensorFlow import per
    rank) runs the TensorFlow custom-loop example and, after it, the Keras example again on the same
    checkpoints. The custom loop runs first: its printed lines come first and it starts from a fresh process."""
    ckpt = str(tmp_path_factory.mktemp("keras_example") / "ckpt")
    first = horovodrun(REPO / "examples/keras_mnist.py", "--checkpoint-dir", ckpt, "--epochs", "12", timeout=400)
    second = horovodrun_several((str(REPO / "examples/tensorflow_custom_loop.py"), "--epochs", "6"),
                                (str(REPO / "examples/keras_mnist.py"), "--checkpoint-dir", ckpt, "--epochs", "14"),
                                timeout=400)
    return first, second


@pytest.mark.timeout(600)
def test_keras_example_reaches_95_percent_and_resumes(tf_examples):
    proc, again = tf_examples
    acc = float(re.search(r"final validation accuracy: ([0-9.]+)", proc.stdout).group(1))
    assert acc >= 0.95, proc.stdout
    assert len(re.findall(r"epoch +\d+/12 ", proc.stdout)) == 12
    # run again: everything was done, training resumes at epoch 12 and runs 2 more epochs when asked
    assert "keras_mnist.py" not in again.failed, again.stdout[-3000:] + again.stderr[-3000:]
    assert re.findall(r"epoch +(\d+)/14 ", again.stdout) == ["13", "14"], again.stdout


@pytest.mark.timeout(600)
def test_tensorflow_custom_loop_example_trains(tf_examples):
    _, proc = tf_examples
    assert "tensorflow_custom_loop.py" not in proc.failed, proc.stdout[-3000:] + proc.stderr[-3000:]
    acc = float(re.search(r"final validation accuracy: ([0-9.]+)", proc.stdout).group(1))  # the first: its own
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
