"""horovodrun keeps what the extensions were built with (``hvdkit/tools/build/patches/0011-launcher-keeps-the-
extensions-build-flags.patch``): upstream's launcher imported horovod.tensorflow in a new process before every
job only to ask whether MPI (or Gloo) was built in: seconds per launch (docs/benchmarks.md, "Starting a job").
"""

import json
import os
import subprocess
import sys

import pytest
from helpers import REPO, requires_horovod

pytestmark = [requires_horovod, pytest.mark.horovod, pytest.mark.timeout(180)]

ASK = "from horovod.common import util\nprint(util.mpi_built(), util.gloo_built())"
# the probe starts a process through multiprocessing.get_context('fork'): here that ends the interpreter instead
NO_PROBE = "import multiprocessing, sys\nmultiprocessing.get_context = lambda *a, **k: sys.exit('probed')\n"


def _ask(home, *, probe_allowed: bool) -> subprocess.CompletedProcess:
    code = ("" if probe_allowed else NO_PROBE) + ASK
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HOME": str(home)}, cwd=REPO)


def _kept(home) -> list:
    return sorted((home / ".horovod").glob("built-*.json"))


def test_the_answers_are_kept_per_home_and_a_damaged_file_is_asked_again(tmp_path):
    first = _ask(tmp_path, probe_allowed=False)
    assert first.returncode != 0 and "probed" in first.stderr, first  # nothing kept yet: the launcher probes

    asked = _ask(tmp_path, probe_allowed=True)
    assert asked.returncode == 0 and asked.stdout.split() == ["True", "True"], asked
    [kept] = _kept(tmp_path)
    assert json.loads(kept.read_text()) == {"mpi_built": True, "gloo_built": True}

    again = _ask(tmp_path, probe_allowed=False)
    assert again.returncode == 0 and again.stdout.split() == ["True", "True"], again  # no probe this time

    kept.write_text("{")  # damaged: never trusted
    damaged = _ask(tmp_path, probe_allowed=False)
    assert damaged.returncode != 0 and "probed" in damaged.stderr, damaged


def test_a_rebuilt_extension_library_is_asked_again(tmp_path):
    from horovod.common import util

    lib = tmp_path / "horovod" / "torch" / f"mpi_lib_v2{util.get_ext_suffix()}"
    lib.parent.mkdir(parents=True)
    lib.write_bytes(b"built once")
    before = util._built_flags_path(str(tmp_path / "horovod"))
    assert util._built_flags_path(str(tmp_path / "horovod")) == before
    lib.write_bytes(b"built again")
    assert util._built_flags_path(str(tmp_path / "horovod")) != before


def test_horovodrun_keeps_the_answer_it_asked_for(tmp_path):
    script = tmp_path / "noop.py"
    script.write_text("pass\n")
    proc = subprocess.run(["horovodrun", "-np", "1", "-H", "localhost:1", sys.executable, str(script)],
                          capture_output=True, text=True, timeout=150, env={**os.environ, "HOME": str(tmp_path)},
                          start_new_session=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    [kept] = _kept(tmp_path)
    assert json.loads(kept.read_text())["mpi_built"] is True
