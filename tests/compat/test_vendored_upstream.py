"""The vendored upstream Horovod tests are unedited copies (third_party/horovod-0.28.1-test/)."""

import hashlib
import os
from pathlib import Path

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
    upstream = Path(os.environ.get("HVDKIT_UPSTREAM_TESTS",
                                   VENDORED.parents[1].parent / "shared/upstream/horovod-0.28.1/test"))
    for name in _sums():
        original = upstream.parent / name if name == "LICENSE" else upstream / name
        if original.is_file():
            assert original.read_bytes() == (VENDORED / name).read_bytes(), name
