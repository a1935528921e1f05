"""The test suite's conftest (tests/conftest.py) applies here too: its ``--slow-checks`` option and the
deselection of ``slow_check`` tests, the per-module environment reset, and tests/ on sys.path (``helpers``).
The repository root goes on sys.path as well: ``benchmarks`` is imported from the checkout, not installed."""

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

_spec = importlib.util.spec_from_file_location("hvdkit_tests_conftest", REPO / "tests" / "conftest.py")
assert _spec is not None and _spec.loader is not None
_shared = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_shared)

_environ_per_module = _shared._environ_per_module
pytest_collection_modifyitems = _shared.pytest_collection_modifyitems


def pytest_addoption(parser):
    try:
        _shared.pytest_addoption(parser)
    except ValueError:  # tests/conftest.py added it already (pytest collects tests/ and benchmarks/ together)
        pass
