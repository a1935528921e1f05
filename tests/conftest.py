import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
os.environ.setdefault("PYTHONHASHSEED", "0")


@pytest.fixture(scope="module", autouse=True)
def _environ_per_module():
    """End every test module with the environment it started with.

    Tests that initialise hvdkit inside the pytest process (``hk.init``) get Horovod's tuned settings put in
    ``os.environ``, as a user's job does; without this, every job a later module starts inherited them (the
    upstream elastic tests ran with a fusion threshold and a cycle time exported, which their own runs do
    not have, and in full runs only).
    """
    saved = os.environ.copy()
    yield
    if os.environ != saved:
        os.environ.clear()
        os.environ.update(saved)
