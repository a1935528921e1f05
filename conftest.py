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


SLOW_CHECK_NOTE = ("slow_check tests (too slow for CI's 35-minute budget) are left out; scripts/slow-checks.sh runs "
                   "them (python -m pytest --slow-checks -m slow_check); the summary names them")
_DESELECTED_SLOW = pytest.StashKey[list[str]]()


def pytest_addoption(parser):
    parser.addoption("--slow-checks", action="store_true",
                     help="also run the tests marked slow_check (scripts/slow-checks.sh passes it)")


def pytest_collection_modifyitems(config, items):
    """Deselect (not skip) the ``slow_check`` tests unless ``--slow-checks`` is given; header and summary say so."""
    if config.getoption("--slow-checks"):
        return
    slow = [item for item in items if item.get_closest_marker("slow_check")]
    config.stash[_DESELECTED_SLOW] = [item.nodeid for item in slow]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow_check")]


def pytest_report_header(config):
    return None if config.getoption("--slow-checks") else SLOW_CHECK_NOTE


def pytest_terminal_summary(terminalreporter, config):
    """Name every deselected slow check, so that CI's log says what it did not run and where that runs."""
    slow = config.stash.get(_DESELECTED_SLOW, [])
    if slow:
        terminalreporter.write_sep("=", f"{len(slow)} slow_check tests deselected (scripts/slow-checks.sh runs them)")
        for nodeid in slow:
            terminalreporter.write_line(nodeid)
