"""HOROVOD_*/HVDKIT_* values Horovod would take silently are refused by init() and reported by doctor."""

import os
import subprocess
import sys
import venv

import pytest
from helpers import REPO, requires_horovod

from hvdkit.runtime.env_vars import ENV_VARS, check_env, env_problems, misspelt
from hvdkit.runtime.tuning import runtime_defaults
from hvdkit.tools import doctor


def test_bad_values_are_named_with_the_value_and_what_is_allowed():
    env = {"HOROVOD_FUSION_THRESHOLD": "abc", "HOROVOD_CYCLE_TIME": "-1", "HVDKIT_THREADS": "0",
           "HVDKIT_NO_TUNING": "yes", "HOROVOD_STALL_CHECK_TIME_SECONDS": "60"}
    problems = dict(env_problems(env))
    assert set(problems) == {"HOROVOD_FUSION_THRESHOLD must be an integer number of bytes >= 0, got 'abc'",
                             "HOROVOD_CYCLE_TIME must be a number of milliseconds > 0, got '-1'",
                             "HVDKIT_THREADS must be an integer >= 1, got '0'",
                             "HVDKIT_NO_TUNING must be 0 or 1, got 'yes'"}
    assert problems["HOROVOD_CYCLE_TIME must be a number of milliseconds > 0, got '-1'"] == \
        "export HOROVOD_CYCLE_TIME=0.1, or unset HOROVOD_CYCLE_TIME"
    with pytest.raises(ValueError, match=r"HOROVOD_CYCLE_TIME must .* got '-1'.*HOROVOD_FUSION_THRESHOLD .* 'abc'"):
        check_env(env)
    for bad in ("nan", "inf", "0", ""):
        assert env_problems({"HOROVOD_CYCLE_TIME": bad}), bad


def test_a_misspelt_hvdkit_variable_is_refused_naming_the_one_meant():
    # Ignored, HVDKIT_HANG_TIMOUT=0 would leave the 300 s watchdog on, to end a long first torch.compile.
    problems = env_problems({"HVDKIT_HANG_TIMOUT": "0", "HVDKIT_THREAD": "2"})
    assert problems == [
        ("HVDKIT_HANG_TIMOUT is set, but hvdkit reads no such variable: HVDKIT_HANG_TIMEOUT is meant, and its "
         "default is in force", "export HVDKIT_HANG_TIMEOUT='0' and unset HVDKIT_HANG_TIMOUT"),
        ("HVDKIT_THREAD is set, but hvdkit reads no such variable: HVDKIT_THREADS is meant, and its default is in "
         "force", "export HVDKIT_THREADS='2' and unset HVDKIT_THREAD")]
    # hvdkit's tools' own variables, and Horovod's many others, are no misspellings
    assert env_problems({"HVDKIT_SLURM_START_TIMEOUT": "60", "HVDKIT_LAUNCHER_DIR": "/x", "HVDKIT_HOME": "/y",
                         "HOROVOD_GLOO_RENDEZVOUS_ADDR": "10.0.0.1", "HVDKIT_MY_OWN": "1", "HVDKIT_PYTHON3": "x",
                         "HVDKIT_HOMES": "x", "HVDKIT_THREADS_X": "1"}) == []
    assert [m for _, m in misspelt({"HVDKIT_STRAT_TIMEOUT": "1", "HVDKIT_NO_TUNNING": "1", "HVDKIT_STOP_GRACF": "1"})] \
        == ["HVDKIT_STOP_GRACE", "HVDKIT_START_TIMEOUT"]  # replaced, swapped; an added letter is no slip


def test_every_value_hvdkit_sets_and_every_example_passes():
    assert env_problems({k: v for k, (v, _why) in runtime_defaults(cpu=True).items()}) == []
    assert env_problems({name: example for name, (_ok, _allowed, example) in ENV_VARS.items()}) == []
    check_env({})


def test_doctor_reports_a_bad_variable_with_its_fix(monkeypatch):
    monkeypatch.setattr(doctor, "_horovod_build", lambda report: None)  # the build is not what is tested here
    monkeypatch.setenv("HOROVOD_CYCLE_TIME", "-1")
    text = doctor.render(doctor.collect())
    assert "HOROVOD_CYCLE_TIME must be a number of milliseconds > 0, got '-1'" in text
    assert "fix: export HOROVOD_CYCLE_TIME=0.1, or unset HOROVOD_CYCLE_TIME" in text
    assert "No problems found" not in text


@requires_horovod
@pytest.mark.timeout(120)
def test_init_refuses_a_bad_value_before_horovod_starts():
    # hvdkit.keras's init makes the same call; importing TensorFlow would add 15 s here
    code = "import hvdkit.torch as hk\nhk.init()\nprint('INITIALISED')"
    env = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2", "HOROVOD_FUSION_THRESHOLD": "abc"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=100, env=env)
    assert proc.returncode != 0 and "INITIALISED" not in proc.stdout
    assert "ValueError: bad environment variable(s): HOROVOD_FUSION_THRESHOLD must be an integer number of " \
           "bytes >= 0, got 'abc'" in proc.stderr


@pytest.mark.timeout(120)
@pytest.mark.parametrize("threads", ["0", "four"])
def test_doctor_lists_bad_threads_and_stop_grace_as_problems_without_a_traceback(tmp_path, threads):
    # A bare environment (no Horovod): doctor's own checks, without importing the frameworks.
    env_dir = tmp_path / "bare"
    venv.create(env_dir, with_pip=False)
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HVDKIT_THREADS": threads,
           "HVDKIT_STOP_GRACE": "forever"}
    proc = subprocess.run([str(env_dir / "bin" / "python"), "-m", "hvdkit", "doctor"], capture_output=True,
                          text=True, timeout=100, cwd=REPO, env=env)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert f"HVDKIT_THREADS must be an integer >= 1, got '{threads}'" in proc.stdout
    assert "HVDKIT_STOP_GRACE must be a number of seconds >= 0, got 'forever'" in proc.stdout
    assert "threads per rank   unknown: HVDKIT_THREADS is not valid (see Problems)" in proc.stdout


def test_a_rank_not_below_its_size_is_refused():
    problems = [p for p, _ in env_problems({"HOROVOD_RANK": "5", "HOROVOD_SIZE": "2", "HOROVOD_LOCAL_RANK": "1",
                                            "HOROVOD_LOCAL_SIZE": "1", "HOROVOD_CROSS_RANK": "0",
                                            "HOROVOD_CROSS_SIZE": "1"})]
    assert problems == ["HOROVOD_RANK must be below HOROVOD_SIZE=2, got '5'",
                        "HOROVOD_LOCAL_RANK must be below HOROVOD_LOCAL_SIZE=1, got '1'"]
    assert [p for p, _ in env_problems({"HOROVOD_RANK": "x", "HOROVOD_SIZE": "2"})] == \
        ["HOROVOD_RANK must be an integer >= 0, got 'x'"]  # named once, by what it may hold


@requires_horovod
@pytest.mark.timeout(120)
@pytest.mark.parametrize("env, message", [
    ({"HOROVOD_RANK": "5", "HOROVOD_SIZE": "2"}, "HOROVOD_RANK=5 and HOROVOD_SIZE=2 set, but no launcher started "
                                                 "this process"),
    ({"HOROVOD_SIZE": "2"}, "HOROVOD_SIZE=2 set, but no launcher started this process"),
])
def test_plain_python_with_a_rank_and_size_is_refused_instead_of_training_alone(env, message):
    code = "import hvdkit.torch as hk\nhk.init()\nprint('INITIALISED', hk.rank(), hk.size())"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=100,
                          env={**os.environ, "PYTHONPATH": str(REPO), **env})
    assert proc.returncode != 0 and "INITIALISED" not in proc.stdout, proc.stdout
    assert message in proc.stderr and "Horovod would ignore them and train alone as rank 0 of 1" in proc.stderr
