"""Options and collection rules for every test folder pytest collects (tests/, benchmarks/tests/): here, at the
repository root, so that they apply whichever folders a run names."""

import json
import os
import shutil
import tempfile
from pathlib import Path

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


@pytest.hookimpl(tryfirst=True)  # the groups are written for every collected test, before -m/-k deselect some
def pytest_collection_modifyitems(config, items):
    """Deselect (not skip) the ``slow_check`` tests unless ``--slow-checks`` is given; header and summary say so.
    Then group the tests for pytest-xdist (``-n``, ``--dist loadgroup``; see ``_group_for_workers``)."""
    if not config.getoption("--slow-checks"):
        slow = [item for item in items if item.get_closest_marker("slow_check")]
        config.stash[_DESELECTED_SLOW] = [item.nodeid for item in slow]
        if hasattr(config, "workeroutput"):  # an xdist worker: the controller prints the summary
            config.workeroutput["slow_checks"] = config.stash[_DESELECTED_SLOW]
        if slow:
            config.hook.pytest_deselected(items=slow)
            items[:] = [item for item in items if not item.get_closest_marker("slow_check")]
    _group_for_workers(items, config)


def _group_for_workers(items, config):
    """Give every test the group of everything it must run beside, in one worker process: its whole module
    (module fixtures, shared launches), every module that uses the same session fixture of this suite (a
    ``SharedJob`` launch, the Docker engine) and every test marked ``shares`` with that fixture's name or the same
    resource (see setup.cfg). A worker writes the groups where the controller's scheduler reads them
    (``pytest_xdist_make_scheduler``), and runs the largest groups first, so that the last one to start is a
    short one: ``horovod`` tests take about 25 s each, the others well under 1 s."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None or "hvdkit_groups" not in workerinput:
        return
    parent: dict[str, str] = {}

    def root(key):
        while parent.setdefault(key, key) != key:
            key = parent[key]
        return key

    for item in items:
        module = item.nodeid.split("::")[0]
        info = getattr(item, "_fixtureinfo", None)
        shared = [name for name, defs in (info.name2fixturedefs.items() if info else ())
                  if defs and defs[-1].scope == "session" and defs[-1].baseid]  # baseid "": pytest's own fixtures
        for key in shared + [m.args[0] for m in item.iter_markers("shares")]:
            parent[root(key)] = root(module)
    weight: dict[str, float] = {}
    for item in items:
        group = root(item.nodeid.split("::")[0])
        weight[group] = weight.get(group, 0.0) + (25.0 if item.get_closest_marker("horovod") else 0.5)
    items.sort(key=lambda item: -weight[root(item.nodeid.split("::")[0])])  # stable: each group keeps its order
    # Every worker collects the same tests and writes the same groups; os.replace makes each write whole.
    target = Path(workerinput["hvdkit_groups"])
    staged = target.with_name(f"{target.name}.{workerinput['workerid']}")
    staged.write_text(json.dumps({item.nodeid: root(item.nodeid.split("::")[0]) for item in items}))
    os.replace(staged, target)


_GROUPS_FILE = pytest.StashKey[Path]()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """pytest-xdist's controller: tell each worker where to write the test groups."""
    config = node.config
    if _GROUPS_FILE not in config.stash:
        config.stash[_GROUPS_FILE] = Path(tempfile.mkdtemp(prefix="hvdkit-xdist-")) / "groups.json"
    node.workerinput["hvdkit_groups"] = str(config.stash[_GROUPS_FILE])


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` (setup.cfg) with the groups the workers wrote: pytest-xdist's own reads an ``@group``
    suffix it writes into ``item._nodeid``, which pytest 9.2 ignores, so it would split every group."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:  # read once: every worker has collected (and written) before scheduling
                self.groups = json.loads(config.stash[_GROUPS_FILE].read_text())
            return self.groups.get(nodeid, nodeid.split("::")[0])

    return GroupScheduling(config, log)


def pytest_unconfigure(config):
    if _GROUPS_FILE in config.stash:
        shutil.rmtree(config.stash[_GROUPS_FILE].parent, ignore_errors=True)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """``-n auto``: one worker per core, at most 4. Most tests start 2-rank jobs; part of each job's time is spent
    waiting (process start, rendezvous, timeouts), which a second worker fills on a 2-core machine."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return int(os.environ["PYTEST_XDIST_AUTO_NUM_WORKERS"])
    return max(1, min(4, len(os.sched_getaffinity(0))))


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """pytest-xdist's controller: take the deselected slow checks from a worker, for the summary."""
    node.config.stash[_DESELECTED_SLOW] = node.workeroutput.get("slow_checks", [])


def pytest_report_header(config):
    return None if config.getoption("--slow-checks") else SLOW_CHECK_NOTE


def pytest_terminal_summary(terminalreporter, config):
    """Name every deselected slow check, so that CI's log says what it did not run and where that runs."""
    slow = config.stash.get(_DESELECTED_SLOW, [])
    if slow:
        terminalreporter.write_sep("=", f"{len(slow)} slow_check tests deselected (scripts/slow-checks.sh runs them)")
        for nodeid in slow:
            terminalreporter.write_line(nodeid)
