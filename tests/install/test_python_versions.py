"""Horovod builds and a 2-process job runs on each supported Python, not only on CI's 3.11.

CI runs the whole suite on 3.11 and deselects this test (``slow_check``): on a fresh machine another
interpreter costs CI a second cold Horovod build (7.4 minutes for 3.11's on CI's 2-core machine) plus its
environment. ``scripts/slow-checks.sh pythons`` runs it for every other supported version
(HVDKIT_TEST_PYTHONS="3.12 3.13"; without that variable, the newest). The environment is made from
requirements/cpu.lock with pip isolated from this machine's configuration, without the '+cpu' torch
pins: a '+cpu' torch for these interpreters exists only on the PyTorch CPU index, which this machine
cannot reach, so the Horovod build here is TensorFlow + MPI + Gloo (what a torch build adds on 3.12+,
the 0005-no-stdlib-distutils patch, is checked by applying the patches in the build).
Environment and wheel are cached outside the checkout, so a second run costs about a minute.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess

import pytest
from helpers import REPO, WORKERS, read_json, requires_horovod
from test_install import _isolated_env

from hvdkit.tools.build.horovod_wheel import cache_root
from hvdkit.tools.build.pythons import SUPPORTED

NEWEST = f"{SUPPORTED[-1][0]}.{SUPPORTED[-1][1]}"
VERSIONS = os.environ.get("HVDKIT_TEST_PYTHONS", NEWEST).split()
pytestmark = [requires_horovod, pytest.mark.horovod, pytest.mark.slow_check, pytest.mark.timeout(2400)]


def _interpreter(version: str) -> str:
    proc = subprocess.run(["bash", str(REPO / "scripts" / "find-python.sh")], capture_output=True, text=True,
                          env={**os.environ, "HVDKIT_PYTHON_VERSION": version, "HVDKIT_PYTHON": ""}, timeout=60)
    if proc.returncode != 0:
        message = f"no Python {version} interpreter: {proc.stderr.strip()} (install python{version}, or pyenv)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return proc.stdout.strip()


def _run(cmd: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, start_new_session=True)
    assert proc.returncode == 0, (f"{' '.join(cmd)} exited {proc.returncode}\n"
                                  f"{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}")
    return proc


@pytest.mark.parametrize("version", VERSIONS)
def test_horovod_builds_and_a_two_process_job_runs(version, tmp_path):
    py = _interpreter(version)
    lock = (REPO / "requirements" / "cpu.lock").read_text()
    # pyspark comes only as a 450 MB sdist, and nothing here uses Spark (its tests run on CI's 3.11)
    pins = [line for line in lock.splitlines() if re.match(r"^[A-Za-z0-9]", line) and "+cpu" not in line
            and not line.startswith("pyspark==")]
    key = hashlib.sha256(lock.encode()).hexdigest()[:12]
    venv = cache_root() / "test-venvs" / f"py{version.replace('.', '')}-{key}-no-torch"
    env = _isolated_env(PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="2", HVDKIT_CACHE_DIR=str(cache_root()))
    vpy = str(venv / "bin" / "python")
    if not (venv / ".installed").exists():
        _run([py, "-m", "venv", "--clear", str(venv)], env, 300)
        req = tmp_path / "pins.txt"
        req.write_text("\n".join(pins) + "\n")
        # wheels where they exist: some pins publish only an sdist (python-hostlist)
        _run([vpy, "-m", "pip", "install", "-q", "--no-deps", "--prefer-binary", "-r", str(req)], env, 1500)
        (venv / ".installed").touch()
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
    env["VIRTUAL_ENV"] = str(venv)
    _run([vpy, "-m", "pip", "check"], env, 120)
    built = _run([vpy, "-m", "hvdkit", "build-horovod"], env, 2000)
    assert "installed horovod 0.28.1+hvdkit.cpu." in built.stdout + built.stderr or "already installed" in built.stdout

    doctor = _run([vpy, "-m", "hvdkit", "doctor"], env, 300).stdout
    assert re.search(rf"^\s+python\s+{re.escape(version)}\.", doctor, re.M), doctor
    assert re.search(r"^\s+supported pythons\s+3\.11, 3\.12, 3\.13$", doctor, re.M), doctor

    out = tmp_path / "run"
    out.mkdir()
    _run([str(venv / "bin" / "horovodrun"), "-np", "2", "-H", "localhost:2", vpy, str(WORKERS / "smoke_allreduce.py"),
          str(out), "tf"], env, 300)
    for r in (0, 1):
        res = read_json(out / f"rank{r}.json")
        assert res["python"].startswith(version + ".")
        assert (res["tf_rank"], res["tf_size"]) == (r, 2)
        assert res["tf_sum"] == [3.0, 30.0]
