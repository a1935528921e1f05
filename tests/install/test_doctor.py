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
    # Both forms at once: each spends its time importing the frameworks in its own processes.
    as_json, as_text = (subprocess.Popen([sys.executable, "-m", "hvdkit", "doctor", *flags], stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True, cwd=REPO) for flags in (["--json"], []))
    try:
        out, err = as_json.communicate(timeout=150)
        text = as_text.communicate(timeout=150)[0]
    finally:
        for proc in (as_json, as_text):
            proc.kill()
            proc.wait()
    assert as_json.returncode == 0, out + err
    rep = json.loads(out)
    build = rep["facts"]["horovod_build"]
    assert build["frameworks"] == {"tensorflow": True, "torch": True}
    assert build["controllers"] == {"mpi": True, "gloo": True}
    assert build["tensor_operations"]["mpi"] and build["tensor_operations"]["gloo"]
    assert "+hvdkit.cpu." in rep["facts"]["horovod"]
    mpirun = subprocess.run(["mpirun", "--version"], capture_output=True, text=True, timeout=30).stdout
    assert rep["facts"]["mpi"] == mpirun.strip().splitlines()[0]
    assert rep["ok"] is True
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
