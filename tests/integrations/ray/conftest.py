import shutil
import tempfile
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def ray_temp_dir():
    """A ``ray start --temp-dir`` of the module's own, short: Ray's AF_UNIX sockets live under it and their paths
    must stay under 108 bytes, which pytest's per-worker temporary folders can exceed."""
    folder = Path(tempfile.mkdtemp(prefix="hkray-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)
