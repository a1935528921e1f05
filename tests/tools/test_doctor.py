"""``hvdkit doctor`` on the real build, and in an environment without Horovod."""

import json
import subprocess
import sys
import venv

import pytest
from helpers import REPO, requires_horovod

from hvdkit.runtime.frameworks import keras_backend
from hvdkit.runtime.tuning import has_ofi_fabric


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
    assert rep["facts"]["horovodrun_btl"] == ("^openib" if has_ofi_fabric() else "^openib,ofi")
    assert rep["ok"] is True
    assert "Horovod build" in text and "threads per rank" in text
    assert rep["facts"]["keras_backend"].startswith(("tensorflow (supported", "torch (supported"))
    assert "keras_backend" in text


def test_the_keras_backend_is_read_as_keras_reads_it(tmp_path):
    both = lambda name: True  # noqa: E731
    assert keras_backend({"KERAS_BACKEND": "torch"}, str(tmp_path), both) == ("torch", "KERAS_BACKEND")
    assert keras_backend({}, str(tmp_path), both) == ("tensorflow", "Keras's default")  # no keras.json
    # only torch installed (hvdkit's CUDA image): torch, where Keras would fail to import TensorFlow
    assert keras_backend({}, str(tmp_path), lambda name: name == "torch")[0] == "torch"
    (tmp_path / ".keras").mkdir()
    (tmp_path / ".keras" / "keras.json").write_text('{"backend": "jax"}')
    assert keras_backend({}, str(tmp_path), both) == ("jax", str(tmp_path / ".keras" / "keras.json"))
    assert keras_backend({"KERAS_BACKEND": "torch"}, str(tmp_path), both)[0] == "torch"
    (tmp_path / "kh").mkdir()
    (tmp_path / "kh" / "keras.json").write_text("not json")
    assert keras_backend({"KERAS_HOME": str(tmp_path / "kh")}, str(tmp_path), both)[0] == "tensorflow"


@pytest.mark.timeout(120)
def test_doctor_without_horovod_exits_nonzero_and_says_how_to_install(tmp_path):
    env_dir = tmp_path / "bare"
    venv.create(env_dir, with_pip=False)
    proc = subprocess.run([str(env_dir / "bin" / "python"), "-m", "hvdkit", "doctor"], capture_output=True,
                          text=True, timeout=100, cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 1
    assert "Horovod is not installed" in proc.stdout
    assert "hvdkit build-horovod" in proc.stdout


def test_a_framework_whose_horovod_extension_is_missing_is_not_reported_as_built(tmp_path, monkeypatch):
    # Horovod's framework modules import without their extension (they print a warning and set
    # _MPI_LIB_AVAILABLE = False): a TensorFlow-only build must not show torch as built.
    from hvdkit.tools import doctor

    pkg = tmp_path / "horovod"
    (pkg / "tensorflow").mkdir(parents=True)
    (pkg / "torch").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "tensorflow" / "__init__.py").write_text(
        "_MPI_LIB_AVAILABLE = True\n"
        + "".join(f"def {n}_built():\n    return {n in ('mpi', 'nccl')}\n"
                  for n in ("mpi", "gloo", "nccl", "ddl", "ccl")))
    (pkg / "torch" / "__init__.py").write_text(
        "print('Extension horovod.torch has not been built')\n_MPI_LIB_AVAILABLE = False\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    report = doctor.Report()
    report.facts.update(torch="2.13.0", tensorflow="2.21.0")
    doctor._horovod_build(report)
    build = report.facts["horovod_build"]
    assert build["frameworks"] == {"tensorflow": True, "torch": False}
    assert build["tensor_operations"]["nccl"] is True
    assert any("without torch support" in p[0] for p in report.problems), report.problems


@pytest.mark.parametrize(("backend", "shown", "problem"), [
    ("tensorflow", "tensorflow (supported by hvdkit.keras; from KERAS_BACKEND)", None),
    ("torch", "torch (supported by hvdkit.keras; from KERAS_BACKEND)", None),
    ("jax", "jax (not supported by hvdkit.keras: keras.distribution is JAX's native path; from KERAS_BACKEND)",
     "Keras's backend is jax"),
])
def test_doctor_shows_the_keras_backend_and_whether_hvdkit_supports_it(monkeypatch, backend, shown, problem):
    from hvdkit.tools import doctor

    monkeypatch.setenv("KERAS_BACKEND", backend)
    report = doctor.Report(facts={"tensorflow": "2.21.0", "torch": "2.13.0"})
    doctor._keras_backend(report)
    assert report.facts["keras_backend"] == shown
    problems = [p for p, _ in report.problems]
    assert problems == [] if problem is None else (len(problems) == 1 and problem in problems[0])


@pytest.mark.parametrize("name, value", [("HOROVOD_CYCLE_TIME", "-1"), ("HVDKIT_THREADS", "abc")])
def test_a_setting_init_refuses_makes_doctor_exit_1(monkeypatch, capsys, name, value):
    # A CI gate on `hvdkit doctor` must not pass an environment in which every init() fails.
    from hvdkit.runtime.env_vars import check_env
    from hvdkit.tools import doctor

    monkeypatch.setattr(doctor, "_horovod_build", lambda report: None)  # the build is not what is checked
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=name):
        check_env()  # what init() runs first
    assert doctor.main(as_json=True) == 1
    rep = json.loads(capsys.readouterr().out)
    assert rep["ok"] is False
    assert any(p["problem"].startswith(f"{name} must be") for p in rep["problems"])
    monkeypatch.delenv(name)
    doctor.main(as_json=True)
    assert not any(name in p["problem"] for p in json.loads(capsys.readouterr().out)["problems"])
