"""Horovod 0.28.1's own example scripts (examples/horovod/, changed only in the import line, the offline
data and what Keras 3 forces) train under horovodrun -np 2 through hvdkit.

Each runs from a copy in a temporary folder (they write checkpoints into the working directory); where
a script has no option for its length, the copy shortens it (the substitution must match exactly once).
"""

import re
import shutil

import pytest
from helpers import REPO, horovodrun, requires_horovod

pytestmark = [requires_horovod, pytest.mark.horovod, pytest.mark.timeout(400)]

EXAMPLES = REPO / "examples" / "horovod"


def copy_example(tmp_path, name, shorten=()):
    for helper in (EXAMPLES / "offline_mnist.py", REPO / "examples" / "data" / "digits.npz", EXAMPLES / name):
        shutil.copy(helper, tmp_path / helper.name)
    script = tmp_path / name
    text = script.read_text()
    for old, new in shorten:
        assert text.count(old) == 1, (name, old)
        text = text.replace(old, new)
    script.write_text(text)
    return script


def test_pytorch_mnist(tmp_path):
    script = copy_example(tmp_path, "pytorch_mnist.py")
    # the digits stand-in has 1,437 training images: smaller batches and a larger LR than for MNIST
    proc = horovodrun(script, "--epochs", "3", "--batch-size", "16", "--lr", "0.05", "--fp16-allreduce", timeout=300,
                      cwd=tmp_path)
    accuracies = [float(a) for a in re.findall(r"Accuracy: ([0-9.]+)%", proc.stdout)]
    assert len(accuracies) == 3, proc.stdout[-3000:]  # rank 0 prints the averaged test metrics each epoch
    assert accuracies[-1] > 80.0, proc.stdout[-3000:]


def test_tensorflow2_keras_mnist(tmp_path):
    script = copy_example(tmp_path, "tensorflow2_keras_mnist.py", shorten=[
        ("steps_per_epoch=500 // hvd.size()", "steps_per_epoch=60 // hvd.size()"), ("epochs=24", "epochs=3")])
    proc = horovodrun(script, timeout=360, cwd=tmp_path)
    out = proc.stdout
    assert "finished gradual learning rate warmup to 0.002" in out, out[-3000:]
    accuracies = [float(a) for a in re.findall(r"accuracy: ([0-9.]+)", out)]
    assert accuracies and accuracies[-1] > 0.8, out[-3000:]
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*.keras")) == [f"checkpoint-{e}.keras" for e in (1, 2, 3)]


# A slow_check: in CI, tests/compat/test_horovod_api.py checks DistributedGradientTape's values across two ranks
# and tests/core/test_examples.py trains hvdkit's own custom-loop example.
@pytest.mark.slow_check
def test_tensorflow2_mnist_custom_loop(tmp_path):
    script = copy_example(tmp_path, "tensorflow2_mnist.py", shorten=[
        ("dataset.take(10000 // hvd.size())", "dataset.take(80 // hvd.size())")])
    proc = horovodrun(script, timeout=360, cwd=tmp_path)
    losses = [float(v) for v in re.findall(r"Step #\d+\tLoss: ([0-9.]+)", proc.stdout)]
    assert len(losses) == 4 and losses[-1] < losses[0], proc.stdout[-3000:]
    assert list(tmp_path.glob("checkpoints-1.index")), sorted(p.name for p in tmp_path.iterdir())


# Both synthetic benchmarks (about 66 and 39 s on CI's 2-core machine) run in scripts/slow-checks.sh; in CI
# tensorflow2_keras_mnist covers the Keras fit path (the custom-loop path: see tensorflow2_mnist_custom_loop).
@pytest.mark.slow_check
@pytest.mark.parametrize("name", ["tensorflow2_synthetic_benchmark.py", "tensorflow2_keras_synthetic_benchmark.py"])
def test_tensorflow2_synthetic_benchmarks(tmp_path, name):
    script = copy_example(tmp_path, name)
    args = ["--no-cuda", "--model", "MobileNetV2", "--batch-size", "4", "--num-batches-per-iter", "2",
            "--num-iters", "2"]
    if name == "tensorflow2_synthetic_benchmark.py":
        args += ["--num-warmup-batches", "1"]
    proc = horovodrun(script, *args, timeout=360, cwd=tmp_path)
    assert re.search(r"Total img/sec on 2 CPU\(s\): [0-9.]+", proc.stdout), proc.stdout[-3000:]


def elastic_local(tmp_path, script, *args):
    """``hvdkit elastic-local --np 2 --min-np 1``: Horovod's elastic driver with two local 'hosts'."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2"}
    proc = subprocess.run([sys.executable, "-m", "hvdkit", "elastic-local", "--np", "2", "--min-np", "1", "--dir",
                           str(tmp_path / "run"), "--", sys.executable, str(script), *args], capture_output=True,
                          text=True, timeout=300, env=env, start_new_session=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


# The two elastic examples (about 27 and 42 s on CI's 2-core machine) run in scripts/slow-checks.sh; in CI
# upstream's elastic torch scenarios (test_upstream_elastic.py), test_horovod_elastic_state.py and hvdkit's own
# elastic examples under elastic-local and on the namespace cluster cover these paths.
@pytest.mark.slow_check
def test_pytorch_mnist_elastic(tmp_path):
    script = copy_example(tmp_path, "pytorch_mnist_elastic.py")
    proc = elastic_local(tmp_path, script, "--epochs", "2", "--batch-size", "16", "--lr", "0.05")
    accuracy = float(re.search(r"Test set: Average loss: [0-9.]+, Accuracy: ([0-9.]+)%", proc.stdout).group(1))
    assert accuracy > 80.0, proc.stdout[-3000:]


@pytest.mark.slow_check
def test_tensorflow2_keras_mnist_elastic(tmp_path):
    script = copy_example(tmp_path, "tensorflow2_keras_mnist_elastic.py", shorten=[
        ("steps_per_epoch=500 // hvd.size()", "steps_per_epoch=40 // hvd.size()"),
        ("epochs=24-state.epoch", "epochs=2-state.epoch")])
    proc = elastic_local(tmp_path, script)
    accuracies = [float(a) for a in re.findall(r"accuracy: ([0-9.]+)", proc.stdout)]
    assert accuracies and accuracies[-1] > 0.8, proc.stdout[-3000:]
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*.keras")) == ["checkpoint-1.keras", "checkpoint-2.keras"]
