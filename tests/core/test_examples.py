"""The examples run under real horovodrun and do what their docstrings promise."""

import json
import re

import pytest
from helpers import REPO, SharedJob, horovodrun, requires_horovod

pytestmark = [requires_horovod, pytest.mark.horovod, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def torch_examples(tmp_path_factory):
    """The digits example and the synthetic benchmark, one after the other in one launch
    (helpers.SharedJob: one torch import per rank for both)."""
    return SharedJob(tmp_path_factory.mktemp("torch_examples"), {
        "digits": (str(REPO / "examples/pytorch_mnist.py"), "--metrics-file", "{out}/metrics.csv",
                   "--checkpoint-dir", "{out}/ckpt"),
        "benchmark": (str(REPO / "examples/pytorch_synthetic_benchmark.py"), "--steps", "5", "--warmup-steps", "1",
                      "--hidden", "64", "--json", "{out}/r.json")})


def test_digits_example_reaches_95_percent_and_logs_every_epoch(torch_examples):
    proc, tmp = torch_examples("digits"), torch_examples.folder
    acc = float(re.search(r"final validation accuracy: ([0-9.]+)", proc.stdout).group(1))
    assert acc >= 0.95, proc.stdout
    assert len(re.findall(r"epoch +\d+/12 ", proc.stdout)) == 12
    assert len((tmp / "metrics.csv").read_text().splitlines()) == 13  # header + 12 epochs
    assert len(list((tmp / "ckpt").glob("*.json"))) == 2  # keep=2


def test_synthetic_benchmark_reports_throughput(torch_examples):
    proc, tmp = torch_examples("benchmark"), torch_examples.folder
    res = json.loads((tmp / "r.json").read_text())
    assert res["size"] == 2 and res["total"] > 0 and res["total"] == pytest.approx(2 * res["per_rank"])
    assert "samples/s total" in proc.stdout


@pytest.fixture(scope="module")
def tf_examples(tmp_path_factory):
    """The Keras example for 12 epochs; then one launch (helpers.SharedJob: one TensorFlow import per rank)
    runs the TensorFlow custom-loop example and, after it, the Keras example again on the same checkpoints.
    The custom loop runs first, so that it starts from a fresh process."""
    folder = tmp_path_factory.mktemp("keras_example")
    first = horovodrun(REPO / "examples/keras_mnist.py", "--checkpoint-dir", str(folder / "ckpt"), "--epochs", "12",
                       timeout=400)
    second = SharedJob(folder, {"custom_loop": (str(REPO / "examples/tensorflow_custom_loop.py"), "--epochs", "6"),
                                "keras_again": (str(REPO / "examples/keras_mnist.py"), "--checkpoint-dir",
                                                "{out}/ckpt", "--epochs", "14")}, timeout=400)
    return first, second


@pytest.mark.timeout(600)
def test_keras_example_reaches_95_percent_and_resumes(tf_examples):
    proc, again = tf_examples[0], tf_examples[1]("keras_again")
    acc = float(re.search(r"final validation accuracy: ([0-9.]+)", proc.stdout).group(1))
    assert acc >= 0.95, proc.stdout
    assert len(re.findall(r"epoch +\d+/12 ", proc.stdout)) == 12
    # run again: everything was done, training resumes at epoch 12 and runs 2 more epochs when asked
    assert re.findall(r"epoch +(\d+)/14 ", again.stdout) == ["13", "14"], again.stdout


@pytest.mark.timeout(600)
def test_tensorflow_custom_loop_example_trains(tf_examples):
    proc = tf_examples[1]("custom_loop")
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
