"""Supported Python versions: one list, followed by the bootstrap's choice, pyproject and doctor."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from hvdkit.tools.build.pythons import SUPPORTED, is_supported, supported_names

REPO = Path(__file__).resolve().parents[2]
FIND = REPO / "scripts" / "find-python.sh"


def test_find_python_lists_the_supported_versions():
    text = FIND.read_text()
    listed = re.search(r'^SUPPORTED="([^"]+)"', text, re.M).group(1).split()
    assert listed == [f"{a}.{b}" for a, b in SUPPORTED]


def test_pyproject_requires_python_matches_the_supported_versions():
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    lo, hi = SUPPORTED[0], SUPPORTED[-1]
    assert meta["requires-python"] == f">={lo[0]}.{lo[1]},<{hi[0]}.{hi[1] + 1}"
    prefix = "Programming Language :: Python :: 3."
    classified = {c.rsplit(" ", 1)[1] for c in meta["classifiers"] if c.startswith(prefix)}
    assert classified == {f"{a}.{b}" for a, b in SUPPORTED}


def test_supported_names_and_check():
    assert supported_names() == "3.11, 3.12, 3.13"
    assert is_supported((3, 12, 1)) and not is_supported((3, 10, 13)) and not is_supported((3, 14, 0))


def _find(env_python: str | None, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    if env_python is not None:
        env["HVDKIT_PYTHON"] = env_python
    return subprocess.run(["bash", str(FIND)], capture_output=True, text=True, env=env, timeout=60)


def test_find_python_honours_a_supported_choice(tmp_path):
    proc = _find(sys.executable, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert Path(proc.stdout.strip()).resolve() == Path(sys.executable).resolve()


def test_find_python_refuses_an_unsupported_choice_naming_it(tmp_path):
    fake = tmp_path / "python3.10"
    fake.write_text("#!/bin/sh\necho 3.10\n")
    fake.chmod(0o755)
    proc = _find(str(fake), tmp_path)
    assert proc.returncode == 1
    assert f"HVDKIT_PYTHON={fake} is Python 3.10; supported: 3.11 3.12 3.13" in proc.stderr


def test_find_python_refuses_a_choice_that_does_not_run(tmp_path):
    proc = _find(str(tmp_path / "nope"), tmp_path)
    assert proc.returncode == 1 and "does not run" in proc.stderr


def test_find_python_picks_a_supported_interpreter_from_path(tmp_path):
    proc = _find(None, tmp_path)
    if proc.returncode != 0:
        pytest.fail(f"no supported interpreter on /usr/bin:/bin: {proc.stderr}")
    out = proc.stdout.strip()
    version = subprocess.run([out, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True,
                             text=True, check=True).stdout.strip()
    assert version in {str(v) for v in SUPPORTED}
