"""The tested framework range: ``hvdkit doctor`` shows it, and ``init()`` warns about a version outside it."""

import subprocess
import sys

import pytest
from helpers import REPO, requires_horovod

from hvdkit.runtime.frameworks import TESTED, untested
from hvdkit.runtime.frameworks import tested_range as range_of
from hvdkit.tools import doctor


def test_versions_inside_the_range_pass_and_outside_name_the_range():
    low, high = TESTED["torch"]
    assert untested("torch", f"{low}.0+cpu") is None and untested("torch", f"{high}.9") is None
    newer = f"{int(high.split('.')[0])}.{int(high.split('.')[1]) + 1}.0"
    message = untested("torch", newer)
    assert message and f"torch {newer}" in message and range_of("torch") in message
    assert untested("torch", "not-a-version") and untested("torch", None) is None


def test_doctor_reports_an_untested_framework_as_a_problem(monkeypatch):
    versions = {"torch": "9.0.0", "tensorflow-cpu": TESTED["tensorflow"][0] + ".0", "keras": "3.15.1"}
    monkeypatch.setattr(doctor, "_version", lambda dist: versions.get(dist))
    monkeypatch.setattr(doctor, "_horovod_build", lambda report: None)
    report = doctor.collect()
    assert report.facts["tested"]["torch"] == range_of("torch")
    assert any("torch 9.0.0 is outside" in what for what, _fix in report.problems)
    assert not any("tensorflow" in what and "outside" in what for what, _fix in report.problems)
    assert "(tested: " in doctor.render(report)


@requires_horovod
@pytest.mark.timeout(120)
def test_torch_init_warns_about_an_untested_torch():
    code = ("import warnings, torch; torch.__version__ = '9.0.0'\n"
            "import hvdkit.torch as hk\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always'); hk.init()\n"
            "print([str(x.message) for x in w if 'outside the versions' in str(x.message)])\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=100, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "torch 9.0.0 is outside the versions hvdkit is tested with" in proc.stdout
