"""A driver whose token authentication does not match the Ray cluster's is told what to change, on a real
cluster: one head node started as Ray starts one by default on a machine that holds ``~/.ray/auth_token``
(token authentication on), drivers in processes of their own with their own HOME."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time

import pytest
from helpers import REPO

# a Ray head binds fixed ports (the client server's 10001): one Ray cluster at a time
pytestmark = [pytest.mark.slow, pytest.mark.timeout(240), pytest.mark.shares("ray-head")]
try:
    import ray.train  # noqa: F401
except ImportError:  # pragma: no cover - CI installs the ray extra
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("ray not installed (pip install 'hvdkit[ray]')", allow_module_level=True)

CHECK = ("from hvdkit.integrations.ray.backend import check_resources\n"
         "check_resources(1, {'CPU': 1}, what='RayExecutor(num_workers=1)')\nprint('CONNECTED')\n")


def _clean(env: dict[str, str], home) -> dict[str, str]:
    """``env`` with Ray's per-user state in ``home`` and no authentication variables of the caller's."""
    out = {k: v for k, v in env.items() if not k.startswith("RAY_AUTH_")}
    return {**out, "HOME": str(home), "PYTHONPATH": str(REPO), "RAY_USAGE_STATS_ENABLED": "0"}


@pytest.fixture(scope="module")
def token_cluster(ray_temp_dir):
    """A head node with token authentication on (its HOME holds a token; RAY_AUTH_MODE unset): (address, token)."""
    tmp = ray_temp_dir
    node_home = tmp / "node-home"
    (node_home / ".ray").mkdir(parents=True)
    token = secrets.token_hex(32)
    (node_home / ".ray" / "auth_token").write_text(token)
    env = _clean(dict(os.environ), node_home)
    node = subprocess.Popen(["ray", "start", "--head", "--port=0", "--include-dashboard=false", f"--temp-dir={tmp}",
                             "--num-cpus=1", "--object-store-memory=100000000", "--block", "--disable-usage-stats"],
                            env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not ((tmp / "ray_current_cluster").is_file() and (tmp / "ray_current_cluster").read_text().strip()):
            if time.monotonic() > deadline or node.poll() is not None:
                raise TimeoutError("the head node did not start")
            time.sleep(0.2)  # polling for the file, with a deadline
        yield (tmp / "ray_current_cluster").read_text().strip(), token, tmp
    finally:
        with contextlib.suppress(ProcessLookupError):  # a head that failed to start has gone already
            os.killpg(node.pid, signal.SIGKILL)
        node.wait(timeout=30)


def _driver(address: str, home, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=150, cwd=REPO,
                          env={**_clean(dict(os.environ), home), "RAY_ADDRESS": address, **env})


def test_a_driver_without_the_clusters_token_mode_is_told_what_to_set(token_cluster):
    address, token, tmp = token_cluster
    home = tmp / "driver-home"
    home.mkdir()
    refused = _driver(address, home)
    assert refused.returncode != 0 and "CONNECTED" not in refused.stdout
    assert "ConnectionError: RayExecutor(num_workers=1): cannot reach the Ray cluster" in refused.stderr, \
        refused.stderr[-3000:]
    assert "this driver has no RAY_AUTH_MODE" in refused.stderr and "export RAY_AUTH_MODE=token" in refused.stderr
    # what the message says to do works
    accepted = _driver(address, home, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token)
    assert "CONNECTED" in accepted.stdout, accepted.stderr[-3000:]
