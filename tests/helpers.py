"""Start real Horovod jobs for the integration tests (always with a timeout)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
WORKERS = REPO / "tests" / "workers"


def have_horovod(framework: str = "torch") -> bool:
    import importlib.util

    return shutil.which("horovodrun") is not None and importlib.util.find_spec(f"horovod.{framework}") is not None


requires_horovod = pytest.mark.skipif(
    not have_horovod() and os.environ.get("CI") != "true",
    reason="needs the patched Horovod build (./run.sh test installs it)",
)


def horovodrun(script: str | Path, *args: str, np: int = 2, timeout: float = 240, env: dict | None = None,
               extra: tuple[str, ...] = (), check: bool = True, cwd: str | Path | None = None
               ) -> subprocess.CompletedProcess:
    """``horovodrun -np N -H localhost:N python SCRIPT ARGS``; output captured, killed after ``timeout`` s."""
    script = Path(script)
    if not script.is_absolute():
        script = WORKERS / script
    cmd = ["horovodrun", "-np", str(np), "-H", f"localhost:{np}", *extra, sys.executable, str(script), *args]
    full_env = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full_env, start_new_session=True,
                          cwd=cwd)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {proc.returncode}\n--- stdout\n{proc.stdout[-6000:]}"
                             f"\n--- stderr\n{proc.stderr[-6000:]}")
    return proc


def read_json(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def tagged_json(stdout: str, tag: str) -> list[dict]:
    """The JSON objects printed after ``TAG `` (by each rank), read with ``raw_decode`` so that horovodrun's
    ``[1,0]<stdout>:`` prefixes glued to the end of a line do not matter. The prefixes are removed first:
    horovodrun tags each write it forwards, and one ``print`` can arrive as two (``TAG[1,0]<stdout>: {...``)."""
    stdout = re.sub(r"\[\d+,\d+\]<std(?:out|err)>:", "", stdout)
    decoder, rows = json.JSONDecoder(), []
    for m in re.finditer(re.escape(tag) + " ", stdout):
        rows.append(decoder.raw_decode(stdout, m.end())[0])
    return rows


def horovodrun_several(*runs: tuple[str, ...], timeout: float = 280) -> subprocess.CompletedProcess:
    """One 2-rank launch of tests/workers/several.py running each ``(script, *args)`` of ``runs`` in turn (one
    framework import per rank for several tests). Not checked: ``.failed`` holds the scripts that raised or
    exited non-zero on some rank, for each test to check its own; any other non-zero exit fails here."""
    args = [a for i, run in enumerate(runs) for a in ((["--"] if i else []) + list(run))]
    proc = horovodrun("several.py", *args, timeout=timeout, check=False)
    said = re.findall(r"several\.py: (.+) failed", proc.stderr)
    proc.failed = {name for line in said for name in line.split(", ")}
    assert proc.failed or proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc
