"""A Docker engine for the Docker tests: the one that runs, or one started here and stopped afterwards.

If no engine answers on the socket, Debian's ``docker.io`` is installed when missing and ``dockerd`` is
started by hand with the overlay2 storage driver (no systemd here), writing to its own log file. Readiness
is a bounded poll of the engine's ``/_ping`` endpoint, not a sleep. An engine this module started is
stopped (SIGTERM, then SIGKILL after a bounded wait) when the tests end; one that was already running is
left alone. Images stay in the engine's data root (``/var/lib/docker``), so later runs build warm.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

SOCKET = Path(os.environ.get("HVDKIT_DOCKER_SOCKET", "/var/run/docker.sock"))
LOG = Path(os.environ.get("HVDKIT_DOCKERD_LOG", "/var/log/hvdkit-dockerd.log"))
START_TIMEOUT = 90.0
STOP_TIMEOUT = 60.0


@dataclass
class Engine:
    socket: Path
    started_here: bool
    log: Path | None = None
    process: subprocess.Popen | None = None


def _unavailable(why: str) -> NoReturn:
    """In CI a missing engine is a failure (the Docker checks must run there); elsewhere a skip."""
    if os.environ.get("CI") == "true":
        pytest.fail(why)
    pytest.skip(why)


def ping(sock: Path = SOCKET, timeout: float = 2.0) -> bool:
    """True when an engine answers ``GET /_ping`` with ``OK`` on the unix socket."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(str(sock))
            s.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            reply = b""
            while chunk := s.recv(4096):
                reply += chunk
    except OSError:
        return False
    return reply.startswith(b"HTTP/1.") and b" 200 " in reply.split(b"\r\n", 1)[0] and reply.endswith(b"OK")


def _install_docker_io() -> None:
    if os.geteuid() != 0:
        _unavailable("no Docker engine runs and dockerd is not installed; installing docker.io needs root")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-qq"],
                ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "docker.io"]):
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
        if proc.returncode != 0:
            _unavailable(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")


def _dockerd() -> str | None:
    return shutil.which("dockerd") or next((p for p in ("/usr/sbin/dockerd", "/usr/bin/dockerd")
                                            if os.access(p, os.X_OK)), None)


def start() -> Engine:
    """The running engine, or a new ``dockerd --storage-driver overlay2`` (installed first if missing)."""
    if ping():
        return Engine(SOCKET, started_here=False)
    if _dockerd() is None:
        _install_docker_io()
    dockerd = _dockerd()
    if dockerd is None:
        _unavailable("dockerd not found after installing docker.io")
    if os.geteuid() != 0:
        _unavailable("no Docker engine runs, and starting dockerd needs root")
    LOG.parent.mkdir(parents=True, exist_ok=True)
    with open(LOG, "wb") as log:  # a fresh log per start; dockerd keeps its own copy of the descriptor
        log.write(f"--- hvdkit tests: dockerd started at {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode())
        log.flush()
        proc = subprocess.Popen([str(dockerd), "--storage-driver", "overlay2", "--host", f"unix://{SOCKET}"],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if ping():
            return Engine(SOCKET, started_here=True, log=LOG, process=proc)
        if proc.poll() is not None:
            break
        time.sleep(0.2)  # polling interval; the condition is the engine's answer
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=30)
    tail = LOG.read_text(errors="replace")[-3000:]
    pytest.fail(f"dockerd did not answer on {SOCKET} within {START_TIMEOUT:.0f} s "
                f"(exit status {proc.returncode}); its log {LOG}:\n{tail}")


def stop(engine: Engine) -> None:
    """Stop the engine if (and only if) :func:`start` started it."""
    if not engine.started_here or engine.process is None:
        return
    engine.process.terminate()
    try:
        engine.process.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        engine.process.kill()
        engine.process.wait(timeout=30)


@pytest.fixture(scope="session")
def docker_engine():
    """A Docker engine for the session; stopped at the end only if it was started here."""
    engine = start()
    try:
        yield engine
    finally:
        stop(engine)
