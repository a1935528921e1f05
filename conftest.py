"""Options and collection rules for every test folder pytest collects (tests/, benchmarks/tests/): here, at the
repository root, so that they apply whichever folders a run names."""

import os

import pytest


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


SLOW_CHECK_NOTE = ("slow_check tests (too slow for CI's 60-minute budget) are left out; scripts/slow-checks.sh runs "
                   "them (python -m pytest --slow-checks -m slow_check)")


def pytest_addoption(parser):
    parser.addoption("--slow-checks", action="store_true",
                     help="also run the tests marked slow_check (scripts/slow-checks.sh passes it)")


def pytest_collection_modifyitems(config, items):
    """Deselect (not skip) the ``slow_check`` tests unless ``--slow-checks`` is given; the header says so."""
    if config.getoption("--slow-checks"):
        return
    slow = [item for item in items if item.get_closest_marker("slow_check")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow_check")]


def pytest_report_header(config):
    return None if config.getoption("--slow-checks") else SLOW_CHECK_NOTE
