"""Docker for real: an engine (started here if none runs), the images built from docker/, and the
compose cluster demo run to the end, also through the loss of a worker.

Every test has a timeout; the heavy steps (base image, CPU image) are module fixtures built once.
"""

from __future__ import annotations

import subprocess

import pytest
from docker_engine import docker_engine  # noqa: F401 - the session fixture

pytestmark = [pytest.mark.slow]


def docker(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)} exited {proc.returncode}\n{proc.stdout[-3000:]}\n"
                             f"{proc.stderr[-3000:]}")
    return proc


@pytest.mark.timeout(200)
def test_engine_answers_with_overlay2(docker_engine):  # noqa: F811
    info = docker("info", "--format", "{{.Driver}}").stdout.strip()
    assert info == "overlay2", info
