"""The bootstrap installs from public indexes only, as on a user's machine.

This machine's pip configuration (config files and PIP_* variables) adds local wheel folders that
a user's machine does not have. Here the bootstrap runs with all of it removed: PyPI serves every
pin but the '+cpu' torch build, which comes from a PEP 503 index served on 127.0.0.1 and passed
through HVDKIT_TORCH_INDEX, exactly as a user with a PyTorch mirror would. The new environment
then runs a 2-process Horovod job.

The wheel the local index serves is fetched first with the caller's own pip settings plus the
real PyTorch CPU index (on this machine it comes from the local folder, on a user's machine from
the PyTorch index). The Horovod wheel cache is shared, so the build is reused, not repeated.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from helpers import REPO, WORKERS, read_json, requires_horovod

# A slow_check (scripts/slow-checks.sh): on a fresh machine CI's own first step is this bootstrap from public
# indexes, so a second full install here proves nothing more.
pytestmark = [requires_horovod, pytest.mark.horovod, pytest.mark.slow_check, pytest.mark.timeout(1500)]
PYTORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


class _Index(http.server.SimpleHTTPRequestHandler):
    requests: list[str] = []

    def log_message(self, format: str, *args) -> None:
        type(self).requests.append(self.path)


def _serve(root: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = lambda *a, **k: _Index(*a, directory=str(root), **k)  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/simple/"


def _pep503_index(root: Path, wheels: list[Path]) -> None:
    """``root/simple/<project>/index.html`` linking each wheel with its sha256, per PEP 503."""
    by_project: dict[str, list[Path]] = {}
    for whl in wheels:
        project = re.sub(r"[-_.]+", "-", whl.name.split("-")[0]).lower()
        by_project.setdefault(project, []).append(whl)
    for project, files in by_project.items():
        folder = root / "simple" / project
        folder.mkdir(parents=True)
        links = []
        for whl in files:
            shutil.copy2(whl, folder / whl.name)
            digest = hashlib.sha256(whl.read_bytes()).hexdigest()
            links.append(f'<a href="{whl.name}#sha256={digest}">{whl.name}</a><br>')
        (folder / "index.html").write_text("<!DOCTYPE html><html><body>\n" + "\n".join(links) + "\n</body></html>\n")
    (root / "simple" / "index.html").write_text(
        "<!DOCTYPE html><html><body>" + "".join(f'<a href="{p}/">{p}</a>' for p in by_project) + "</body></html>")


def _isolated_env(**extra: str) -> dict[str, str]:
    """The environment without this machine's pip settings or the test's own virtual environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k != "VIRTUAL_ENV"}
    venv_bin = str(Path(sys.prefix) / "bin")
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p != venv_bin)
    env["PIP_CONFIG_FILE"] = os.devnull  # pip then reads no configuration file at all
    env.update(extra)
    return env


def _cpu_pins() -> list[str]:
    lock = (REPO / "requirements" / "cpu.lock").read_text().splitlines()
    return [line.strip() for line in lock if re.match(r"^[A-Za-z0-9].*\+cpu", line)]


def test_bootstrap_installs_from_public_indexes_with_pip_isolated(tmp_path):
    pins = _cpu_pins()
    assert pins, "requirements/cpu.lock has no '+cpu' pin"
    wheels = tmp_path / "wheels"
    fetch = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", *pins, "-d", str(wheels),
         "--extra-index-url", os.environ.get("HVDKIT_TORCH_INDEX", PYTORCH_CPU_INDEX), "--timeout", "20"],
        capture_output=True, text=True, timeout=900)
    assert fetch.returncode == 0, f"could not fetch {pins} for the local index:\n{fetch.stdout}\n{fetch.stderr}"
    _pep503_index(tmp_path / "index", sorted(wheels.glob("*.whl")))
    server, url = _serve(tmp_path / "index")
    home = tmp_path / "home"
    cache = Path(os.environ.get("HVDKIT_CACHE_DIR") or
                 Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "hvdkit")
    env = _isolated_env(HVDKIT_HOME=str(home), HVDKIT_CACHE_DIR=str(cache), HVDKIT_TORCH_INDEX=url,
                        HVDKIT_PYTHON=sys._base_executable)  # type: ignore[attr-defined]
    try:
        boot = subprocess.run(["bash", str(REPO / "scripts" / "bootstrap.sh")], capture_output=True, text=True,
                              env=env, timeout=1200)
        assert boot.returncode == 0, f"bootstrap failed:\n{boot.stdout[-4000:]}\n{boot.stderr[-8000:]}"
        venv = Path((home / "current-venv").read_text().strip())
        assert venv.parent == home / "venvs"
        py = str(venv / "bin" / "python")

        # The '+cpu' pins came from the local index, through the override, and nothing from elsewhere.
        for pin in pins:
            name = pin.split("==")[0].lower()
            assert f"/simple/{name}/" in _Index.requests, _Index.requests
            assert any(r.endswith(".whl") and f"/simple/{name}/" in r for r in _Index.requests), _Index.requests
        assert "/opt/" not in boot.stderr
        config = subprocess.run([py, "-m", "pip", "config", "list"], capture_output=True, text=True, env=env,
                                timeout=60)
        seen = [line for line in config.stdout.splitlines() if line and not line.startswith(":env:.config-file=")]
        assert seen == [], f"pip still sees a configuration: {config.stdout}"
        listed = json.loads(subprocess.run([py, "-m", "pip", "list", "--format", "json"], capture_output=True,
                                           text=True, env=env, timeout=120, check=True).stdout)
        versions = {p["name"].lower(): p["version"] for p in listed}
        for pin in pins:
            name, version = pin.split("==")
            assert versions[name.lower()] == version

        # The new environment trains: a 2-process Horovod job through torch and TensorFlow.
        out = tmp_path / "run"
        out.mkdir()
        run_env = {**env, "PATH": f"{venv / 'bin'}{os.pathsep}{env['PATH']}", "PYTHONPATH": str(REPO),
                   "TF_CPP_MIN_LOG_LEVEL": "2"}
        job = subprocess.run([str(venv / "bin" / "horovodrun"), "-np", "2", "-H", "localhost:2", py,
                              str(WORKERS / "smoke_allreduce.py"), str(out)], capture_output=True, text=True,
                             env=run_env, timeout=300, start_new_session=True)
        assert job.returncode == 0, f"{job.stdout[-3000:]}\n{job.stderr[-3000:]}"
        for r in (0, 1):
            res = read_json(out / f"rank{r}.json")
            assert res["torch_sum"] == [3.0, 30.0] and res["tf_sum"] == [3.0, 30.0]
    finally:
        server.shutdown()
        shutil.rmtree(home, ignore_errors=True)  # a whole environment: gigabytes
