import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))  # fakes.DictOps, shared with tests/unit


@pytest.fixture(scope="session")
def torch_workers():
    """The 2-rank torch workers of test_sync_batchnorm.py and test_precision.py in one launch (one torch
    import per rank for both)."""
    from helpers import horovodrun_several

    return horovodrun_several(("sync_batchnorm_torch.py",), ("precision_torch.py",))
