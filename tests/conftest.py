import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
os.environ.setdefault("PYTHONHASHSEED", "0")


@pytest.fixture(scope="session")
def keras_workers(tmp_path_factory):
    """``keras_workers(label)``: the 2-rank Keras workers of tests/keras/test_keras_eval_events.py,
    test_agreed_stop.py, test_nonfinite_keras.py and tests/core/test_sync_batchnorm.py, in one launch
    (helpers.SharedJob): each launch costs a TensorFlow import on every rank. vocabulary_events.py runs first:
    its assertions depend on what was imported first (deprecation warnings raised at import)."""
    from helpers import SharedJob

    return SharedJob(tmp_path_factory.mktemp("keras-workers"), {
        "vocabulary": ("vocabulary_events.py", "keras"), "stop": ("keras_stop.py",),
        "numerics": ("numerics_keras.py",), "sync_batchnorm": ("sync_batchnorm_keras.py",)})


@pytest.fixture(scope="session")
def keras_torch_workers(tmp_path_factory):
    """``keras_torch_workers(label)``: 2-rank Keras workers on ``KERAS_BACKEND=torch`` in one launch, for
    tests/compat/test_horovod_keras_dropin.py, tests/keras/test_nonfinite_keras.py and
    tests/core/test_precision.py (the TensorFlow runs of the same scripts have their own launches, share
    ``keras_workers``' or are slow checks). The Horovod-style script runs first, from a fresh Keras."""
    from helpers import SharedJob

    folder = tmp_path_factory.mktemp("keras-torch-workers")
    (folder / "dropin").mkdir()
    return SharedJob(folder, {"dropin": ("horovod_keras_dropin.py", "{out}/dropin"), "numerics": ("numerics_keras.py",),
                              "precision": ("precision_keras.py",)}, env={"KERAS_BACKEND": "torch"})
