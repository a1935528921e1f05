"""Start real Horovod jobs for the integration tests (always with a timeout)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
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
    full_env = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONFAULTHANDLER": "1",
                **(env or {})}
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env,
                          start_new_session=True, cwd=cwd) as launch:
        try:
            stdout, stderr = launch.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise LaunchTimeout(cmd, timeout, *_stacks_then_kill(launch)) from None
    proc = subprocess.CompletedProcess(cmd, launch.returncode, stdout, stderr)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {proc.returncode}\n--- stdout\n{proc.stdout[-6000:]}"
                             f"\n--- stderr\n{proc.stderr[-6000:]}")
    return proc


class LaunchTimeout(subprocess.TimeoutExpired):
    """A launch that did not finish in time, with what its ranks printed, every thread's stack included."""

    def __str__(self) -> str:
        return (f"{super().__str__()}; the ranks' stacks when it was ended:\n--- stdout\n{(self.output or '')[-8000:]}"
                f"\n--- stderr\n{(self.stderr or '')[-8000:]}")


def _stacks_then_kill(launch: subprocess.Popen, grace: float = 15) -> tuple[str, str]:
    """SIGABRT to every Python process under a launch that timed out (``PYTHONFAULTHANDLER=1`` makes each print
    every thread's stack, which mpirun forwards), then the whole launch killed: a hang names where each rank
    waited instead of ending silently. Where gdb is installed, each rank's native threads come first: a rank
    stuck inside Horovod's C++ (its ``init`` waiting on MPI) shows only ``basics.py`` in Python."""
    import psutil

    try:
        ranks = [p for p in psutil.Process(launch.pid).children(recursive=True) if p.name().startswith("python")]
    except psutil.Error:
        ranks = []
    native = "".join(_native_stacks(rank.pid) for rank in ranks) if shutil.which("gdb") else ""
    for rank in ranks:
        try:
            rank.send_signal(signal.SIGABRT)
        except psutil.Error:
            pass
    try:
        out, err = launch.communicate(timeout=grace)
    except subprocess.TimeoutExpired:
        os.killpg(launch.pid, signal.SIGKILL)
        out, err = launch.communicate()
    finally:
        with contextlib.suppress(ProcessLookupError):  # whatever of the launch outlived mpirun
            os.killpg(launch.pid, signal.SIGKILL)
    return out, (err or "") + native


def _native_stacks(pid: int) -> str:
    try:
        proc = subprocess.run(["gdb", "-p", str(pid), "-batch", "-ex", "thread apply all bt 20"], capture_output=True,
                              text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return f"\n--- native stacks of pid {pid}: gdb did not finish in 60 s\n"
    # only the threads in Horovod, MPI, PMIx or Gloo: torch and TensorFlow start dozens of idle pool threads
    threads = re.split(r"\n(?=Thread \d+ )", proc.stdout)
    kept = ["\n".join(line for line in t.splitlines() if line.startswith(("#", "Thread "))) for t in threads
            if re.search(r"horovod|MPI|mpi_|ompi|opal|pmix|orte|gloo", t, re.I) and t.startswith("Thread ")]
    return f"\n--- native stacks of pid {pid} (Horovod, MPI and Gloo threads)\n" + "\n".join(kept) + "\n"


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


class SharedJob:
    """One 2-rank launch of tests/workers/in_one_job.py running each labelled ``(script, *args)`` of ``runs`` in
    turn (each launch costs a framework import per rank, so several tests share one). ``{out}`` in an argument
    becomes ``folder``. ``job(label)`` is that script's run as a ``CompletedProcess`` whose stdout and stderr are
    both ranks' (rank 0's first); it raises, naming the script and the one that failed, when the script did not
    return on both ranks (the job stops at the first script that raises: its peer may wait in a collective)."""

    def __init__(self, folder: Path, runs: dict[str, tuple[str, ...]], timeout: float = 280,
                 env: dict | None = None) -> None:
        self.folder, self.runs = folder, runs
        args: list[str] = []
        for k, spec in enumerate(runs.values()):
            args += (["---"] if k else []) + [a.replace("{out}", str(folder)) for a in spec]
        self.proc = horovodrun("in_one_job.py", str(folder), *args, timeout=timeout, check=False, env=env)

    def __call__(self, label: str) -> subprocess.CompletedProcess:
        stem = f"{list(self.runs).index(label)}-{Path(self.runs[label][0]).name}"
        if sorted(p.name for p in self.folder.glob(f"{stem}.rank*.done")) != [f"{stem}.rank{r}.done" for r in (0, 1)]:
            errors = "\n".join(f"{p.name}:\n{p.read_text()}" for p in sorted(self.folder.glob("*.error")))
            raise AssertionError(f"{label} ({stem}) did not finish on both ranks of the shared job (exit status "
                                 f"{self.proc.returncode})\n{errors}\n--- stdout\n{self.proc.stdout[-4000:]}\n"
                                 f"--- stderr\n{self.proc.stderr[-4000:]}")
        read = lambda suffix: "".join((self.folder / f"{stem}.rank{r}.{suffix}").read_text() for r in (0, 1))  # noqa: E731
        return subprocess.CompletedProcess(self.runs[label], 0, read("out"), read("err"))


def ranks_alive(out: Path, script: str = "preempt_train.py") -> list[str]:
    """``pid args`` of the processes running ``script`` for the run writing to ``out`` (``ps -ww``: whole lines)."""
    ps = subprocess.run(["ps", "-ww", "-eo", "pid,args"], capture_output=True, text=True, check=True).stdout
    return [line for line in ps.splitlines() if script in line and str(out) in line]


def end_run(proc: subprocess.Popen, out: Path, script: str = "preempt_train.py") -> None:
    """Kill a launcher still running, with its process group, and any rank of the run left behind."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    for line in ranks_alive(out, script):
        os.kill(int(line.split()[0]), signal.SIGKILL)


def signal_mid_run(out: Path, sig: int, script: str, *args: str, extra: tuple[str, ...] = (),
                   env: dict | None = None) -> tuple[subprocess.CompletedProcess, float, list[str]]:
    """Start ``horovodrun -np 2 [EXTRA] python SCRIPT ARGS``, wait until both ranks wrote ``out/waiting.<rank>``
    (the script then waits there for a signal), signal the launcher alone; return the finished launcher, the
    seconds from the signal to its exit and the ranks of this run (``out`` in their arguments) still running
    then. TensorFlow's log level is left at its default unless ``env`` sets it."""
    cmd = ["horovodrun", "-np", "2", "-H", "localhost:2", *extra, sys.executable, str(WORKERS / script), *args]
    full_env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
    full_env.pop("TF_CPP_MIN_LOG_LEVEL", None)  # a test checks that TensorFlow's start-up lines do not show
    full_env.update(env or {})
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while not all((out / f"waiting.{r}").exists() for r in (0, 1)):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the ranks never reached the step"
            time.sleep(0.05)
        t0 = time.monotonic()
        os.kill(proc.pid, sig)  # the launcher's PID only, not its process group
        stdout, stderr = proc.communicate(timeout=60)
        seconds = time.monotonic() - t0
        return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr), seconds, ranks_alive(out, script)
    finally:
        end_run(proc, out, script)  # a failed run must not leave ranks behind
