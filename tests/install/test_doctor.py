"""``hvdkit doctor`` on the real build, and in an environment without Horovod."""

import json
import subprocess
import sys
import venv

import pytest
from helpers import REPO, requires_horovod


@requires_horovod
@pytest.mark.timeout(180)
def test_doctor_shows_the_build_matrix_and_exits_0():
    proc = subprocess.run([sys.executable, "-m", "hvdkit", "doctor", "--json"], capture_output=True, text=True,
                          timeout=150, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rep = json.loads(proc.stdout)
    build = rep["facts"]["horovod_build"]
    assert build["frameworks"] == {"tensorflow": True, "torch": True}
    assert build["controllers"] == {"mpi": True, "gloo": True}
    assert build["tensor_operations"]["mpi"] and build["tensor_operations"]["gloo"]
    assert "+hvdkit.cpu." in rep["facts"]["horovod"]
    mpirun = subprocess.run(["mpirun", "--version"], capture_output=True, text=True, timeout=30).stdout
    assert rep["facts"]["mpi"] == mpirun.strip().splitlines()[0]
    assert rep["ok"] is True
    text = subprocess.run([sys.executable, "-m", "hvdkit", "doctor"], capture_output=True, text=True, timeout=150,
                          cwd=REPO).stdout
    assert "Horovod build" in text and "threads per rank" in text


@pytest.mark.timeout(120)
def test_doctor_without_horovod_exits_nonzero_and_says_how_to_install(tmp_path):
    env_dir = tmp_path / "bare"
    venv.create(env_dir, with_pip=False)
    proc = subprocess.run([str(env_dir / "bin" / "python"), "-m", "hvdkit", "doctor"], capture_output=True,
                          text=True, timeout=100, cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 1
    assert "Horovod is not installed" in proc.stdout
    assert "hvdkit build-horovod" in proc.stdout
