"""The vendored upstream Horovod tests are unedited copies (third_party/horovod-0.28.1-test/)."""

import hashlib
import os
from pathlib import Path

import pytest

VENDORED = Path(__file__).resolve().parents[2] / "third_party" / "horovod-0.28.1-test"


def _sums() -> dict[str, str]:
    lines = (VENDORED / "SHA256SUMS").read_text().splitlines()
    return {name: digest for digest, name in (line.split(None, 1) for line in lines if line.strip())}


def test_vendored_files_match_their_recorded_checksums():
    sums = _sums()
    assert {"parallel/test_torch.py", "parallel/test_tensorflow.py", "LICENSE",
            "integration/elastic_common.py", "integration/test_elastic_torch.py",
            "integration/test_elastic_tensorflow2.py", "integration/data/elastic_torch_main.py",
            "integration/data/elastic_tensorflow2_main.py"} <= set(sums)
    for name, digest in sums.items():
        assert hashlib.sha256((VENDORED / name).read_bytes()).hexdigest() == digest, name


def test_vendored_files_equal_the_upstream_tree_where_it_is_present():
    given = os.environ.get("HVDKIT_UPSTREAM_TESTS")
    upstream = Path(given or VENDORED.parents[1].parent / "shared/upstream/horovod-0.28.1/test")
    if not upstream.is_dir():
        # a named tree that is not there is a mistake; the default one is only present beside this project's clone
        assert not given, f"HVDKIT_UPSTREAM_TESTS={given!r} is not a folder (want Horovod v0.28.1's test/ tree)"
        pytest.skip(f"no upstream Horovod test tree at {upstream} (set HVDKIT_UPSTREAM_TESTS to compare)")
    for name in _sums():
        original = upstream.parent / name if name == "LICENSE" else upstream / name
        assert original.is_file(), f"{name} is vendored but not in the upstream tree {upstream}"
        assert original.read_bytes() == (VENDORED / name).read_bytes(), name
