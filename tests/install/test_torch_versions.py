"""Horovod builds against the newest torch that installs, and a 2-process job trains through hvdkit with it.

CI trains with the torch of requirements/cpu.lock; this check (``scripts/slow-checks.sh torch-next``, a
``slow_check``: a second cold Horovod build) installs ``torch==$HVDKIT_TEST_TORCH`` (default 2.14.1, the
newest this project's machine installs; PyPI's Linux wheel, the CUDA build, which runs on CPU) into a
copy of the locked environment, builds the patched Horovod against it (torch 2.14's headers need C++20:
patch 0003; PyPI's torch is a CUDA build, so the CUDA toolkit of ``HOROVOD_CUDA_HOME``, or
/usr/local/cuda-13.0, is named to the build), and runs a torch allreduce and three
``hvdkit.torch.distribute`` steps under ``horovodrun -np 2``. pip keeps the machine's configuration (where
it has none, the wheels come from PyPI). Environment and wheel are cached outside the checkout.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, WORKERS, read_json, requires_horovod

from hvdkit.runtime.frameworks import untested
from hvdkit.tools.build.horovod_wheel import cache_root

VERSION = os.environ.get("HVDKIT_TEST_TORCH", "2.14.1")
pytestmark = [requires_horovod, pytest.mark.horovod, pytest.mark.slow_check, pytest.mark.timeout(3000)]


def _run(cmd: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, start_new_session=True)
    assert proc.returncode == 0, (f"{' '.join(cmd)} exited {proc.returncode}\n"
                                  f"{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}")
    return proc


def test_horovod_builds_against_the_newer_torch_and_hvdkit_trains_with_it(tmp_path):
    lock = (REPO / "requirements" / "cpu.lock").read_text()
    pins = [line for line in lock.splitlines() if re.match(r"^[A-Za-z0-9]", line) and not line.startswith("torch==")]
    key = hashlib.sha256(lock.encode()).hexdigest()[:12]
    venv = cache_root() / "test-venvs" / f"torch{VERSION}-{key}"
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env.update(PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="2", HVDKIT_CACHE_DIR=str(cache_root()))
    vpy = str(venv / "bin" / "python")
    if not (venv / ".installed").exists():
        _run([sys._base_executable, "-m", "venv", "--clear", str(venv)], env, 300)  # type: ignore[attr-defined]
        req = tmp_path / "pins.txt"
        req.write_text("\n".join(pins) + "\n")
        _run([vpy, "-m", "pip", "install", "-q", "--no-deps", "-r", str(req)], env, 1500)
        # With its dependencies: PyPI's Linux torch brings the CUDA libraries it links against.
        _run([vpy, "-m", "pip", "install", "-q", "--only-binary=:all:", f"torch=={VERSION}"], env, 1500)
        (venv / ".installed").touch()
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
    env["VIRTUAL_ENV"] = str(venv)
    _run([vpy, "-m", "pip", "check"], env, 120)
    # PyPI's torch is a CUDA build, and Horovod then compiles its torch extension against the CUDA
    # toolkit's headers and runtime even without GPU operations: name the toolkit.
    toolkit = env.get("HOROVOD_CUDA_HOME") or next(
        (str(p) for p in (Path("/usr/local/cuda-13.0"), Path("/usr/local/cuda")) if (p / "include").is_dir()), None)
    if toolkit is None:
        pytest.fail("PyPI's torch is a CUDA build and Horovod's torch extension needs a CUDA toolkit to compile: "
                    "install one and set HOROVOD_CUDA_HOME")
    env["HOROVOD_CUDA_HOME"] = env["CUDA_HOME"] = toolkit  # Horovod's CMake, and torch's cpp_extension
    built = _run([vpy, "-m", "hvdkit", "build-horovod"], env, 2400)
    assert "installed horovod 0.28.1+hvdkit.cpu." in built.stdout + built.stderr or "already installed" in built.stdout

    doctor = _run([vpy, "-m", "hvdkit", "doctor"], env, 300).stdout
    assert re.search(rf"^\s+torch\s+{re.escape(VERSION)}\b", doctor, re.M), doctor
    assert untested("torch", VERSION) is None, f"torch {VERSION} passed this check: add it to hvdkit's tested range"

    out = tmp_path / "run"
    out.mkdir()
    _run([str(venv / "bin" / "horovodrun"), "-np", "2", "-H", "localhost:2", vpy, str(WORKERS / "smoke_allreduce.py"),
          str(out), "torch,hvdkit-torch"], env, 300)
    results = [read_json(out / f"rank{r}.json") for r in (0, 1)]
    for r, res in enumerate(results):
        assert res["torch_version"].split("+")[0] == VERSION
        assert (res["rank"], res["size"]) == (r, 2)
        assert res["torch_sum"] == [3.0, 30.0] and res["torch_avg"] == [0.5]
        assert res["hvdkit_torch_weights"] == pytest.approx(res["reference_weights"], abs=1e-6)
    assert results[0]["hvdkit_torch_weights"] == results[1]["hvdkit_torch_weights"]
