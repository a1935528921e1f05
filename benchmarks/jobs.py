"""Start the benchmark workers under the launcher each peer is used with, always with a timeout, and
alternate the compared jobs in rounds.

pyperf's Runner spawns and times its own worker processes; it cannot start a 2-process horovodrun,
torchrun or TF_CONFIG job, so this small launcher does that (results still export to pyperf's format,
``benchmarks/report.py``).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from hvdkit.runtime.tuning import runtime_defaults

TIMEOUT = 900

#: The repository root: workers run as ``python -m benchmarks.workers.NAME`` from here.
REPO = Path(__file__).resolve().parents[1]

T = TypeVar("T")

#: Where a suite reports progress (one line per message).
Log = Callable[[str], None]

#: One benchmark's or suite's results (JSON-ready).
Result = dict[str, Any]


class BenchError(RuntimeError):
    """A benchmark worker failed; the message holds its output."""
    pass


def _env(tuned: bool) -> dict[str, str]:
    """The caller's environment; without hvdkit's tuned runtime settings unless ``tuned``."""
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # benchmarks/ is not installed: the ranks import it from the checkout
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    if not tuned:
        for name in runtime_defaults(cpu=True):
            env.pop(name, None)
    else:
        env.update({k: v for k, (v, _why) in runtime_defaults(cpu=True).items()})
    return env


def _run(cmd: Sequence[str], env: dict[str, str], out: Path, timeout: float) -> dict:
    proc = subprocess.run(list(cmd), env=env, capture_output=True, text=True, timeout=timeout, cwd=REPO,
                          start_new_session=True)
    if proc.returncode != 0 or not out.exists():
        raise BenchError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return json.loads(out.read_text())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_worker(launcher: str, np: int, module: str, args: Sequence[str], *, tuned: bool = False,
               extra_env: dict[str, str] | None = None, timeout: float = TIMEOUT,
               launcher_args: Sequence[str] = ()) -> dict:
    """Run ``python -m module args --results FILE`` under ``launcher`` with ``np`` processes.

    ``launcher_args`` go to ``horovodrun``/``mpirun`` before the command (e.g. ``--binding-args``)."""
    with tempfile.TemporaryDirectory(prefix="hvdkit-bench-") as tmp:
        out = Path(tmp) / "result.json"
        wargs = [*args, "--results", str(out)]
        env = {**_env(tuned), **(extra_env or {})}
        py = sys.executable
        if launcher in ("horovodrun", "horovodrun-gloo"):
            gloo = ["--gloo"] if launcher == "horovodrun-gloo" else []
            cmd = ["horovodrun", "-np", str(np), "-H", f"localhost:{np}", *gloo, *launcher_args, py, "-m",
                   module, *wargs]
            return _run(cmd, env, out, timeout)
        if launcher == "python":  # one process, no launcher: a job of its own all the same (new session)
            if np != 1:
                raise ValueError(f"np must be 1 for the python launcher (one process), got {np}")
            return _run([py, "-m", module, *wargs], env, out, timeout)
        if launcher == "torchrun":
            cmd = [py, "-m", "torch.distributed.run", "--nproc-per-node", str(np), "--master-port",
                   str(_free_port()), "-m", module, *wargs]
            return _run(cmd, env, out, timeout)
        if launcher == "mpirun":
            cmd = ["mpirun", "--allow-run-as-root", "-np", str(np), "--bind-to", "none", *launcher_args, py,
                   "-m", module, *wargs]
            return _run(cmd, env, out, timeout)
        if launcher == "tf_config":
            ports = [_free_port() for _ in range(np)]
            cluster = {"worker": [f"localhost:{p}" for p in ports]}
            procs = []
            for i in range(np):
                wenv = {**env, "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})}
                procs.append(subprocess.Popen([py, "-m", module, *wargs], env=wenv, cwd=REPO, stdout=subprocess.PIPE,
                                              stderr=subprocess.STDOUT, text=True, start_new_session=True))
            outputs = []
            try:
                for p in procs:
                    outputs.append(p.communicate(timeout=timeout)[0])
            finally:
                for p in procs:
                    if p.poll() is None:
                        p.kill()
            if any(p.returncode != 0 for p in procs) or not out.exists():
                raise BenchError("TF_CONFIG workers failed:\n" + "\n".join(o[-2000:] for o in outputs))
            return json.loads(out.read_text())
        raise ValueError(f"launcher must be python, horovodrun, horovodrun-gloo, torchrun, mpirun or tf_config, "
                         f"got {launcher!r}")


def prefixed(log: Log, suite: str) -> Log:
    """``log`` with every message prefixed by ``suite``."""
    return lambda msg: log(f"{suite}: {msg}")


def order(items: Sequence[T], r: int) -> list[T]:
    """The order of round ``r``: as given on even rounds, reversed on odd ones."""
    return list(items) if r % 2 == 0 else list(reversed(items))


def alternate(jobs: Mapping[str, Callable[[], Any]], rounds: int,
              log: Callable[[str], None] | None = None, first: int = 0) -> tuple[dict[str, list[Any]], list[str]]:
    """Run each of ``jobs`` once per round, in ``order``; return each job's results and the run order.

    ``first``: the index of the first round, for rounds that go on from an earlier call (the order keeps
    alternating across the two)."""
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    results: dict[str, list[Any]] = {name: [] for name in jobs}
    ran: list[str] = []
    for r in range(first, first + rounds):
        for name in order(list(jobs), r):
            if log is not None:
                log(f"round {r + 1}/{first + rounds}: {name}")
            results[name].append(jobs[name]())
            ran.append(name)
    return results, ran
