import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))  # fakes.DictOps, shared with tests/unit


@pytest.fixture(scope="session")
def torch_workers(tmp_path_factory):
    """``torch_workers(label)``: the 2-rank torch workers of test_sync_batchnorm.py and test_precision.py in one
    launch (helpers.SharedJob: one torch import per rank for all), Keras's SyncBatchNormalization on the torch
    backend last (the first script to import Keras, with KERAS_BACKEND=torch)."""
    from helpers import SharedJob

    return SharedJob(tmp_path_factory.mktemp("torch-workers"),
                     {"sync_batchnorm": ("sync_batchnorm_torch.py",), "precision": ("precision_torch.py",),
                      "keras_sync_batchnorm": ("sync_batchnorm_keras.py", "torch")})
