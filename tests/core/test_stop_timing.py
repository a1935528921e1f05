"""Stop signals that reach the ranks at different moments, a second signal during a long checkpoint write, and
a launcher that dies by SIGKILL: every rank still ends, soon, at the same step, and what is on disk is whole.

The ranks are signalled directly (as Slurm and Kubernetes do), one at a time; tests/workers/preempt_train.py
holds them at step ``WAIT_AT`` until each has seen its signal or the test lets it on (``go.<rank>``), so the
test decides which rank knows of a signal when the step's agreement runs. No sleeps: the test waits on files
the ranks write.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from helpers import REPO, WORKERS, end_run, ranks_alive, requires_horovod

from hvdkit.core.checkpoint_store import CheckpointStore

WAIT_AT = 20  # epoch 2 of 3 (16 steps an epoch); the checkpoint of the step the ranks stop after is step 21
STOPPED = f"ckpt-000001-{WAIT_AT + 1:010d}"
BOUND_S = 15.0  # signal to the last rank's exit: the step in flight, one checkpoint write, the exits (2 cores)


def _wait_for(*paths: Path, proc: subprocess.Popen, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not all(p.exists() for p in paths):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"never written: {[str(p) for p in paths if not p.exists()]}"
        time.sleep(0.02)


def _wait_gone(out: Path, timeout: float) -> float:
    """Seconds until no rank of the run in ``out`` is left (fails after ``timeout``)."""
    t0 = time.monotonic()
    while ranks_alive(out):
        assert time.monotonic() - t0 < timeout, ranks_alive(out)
        time.sleep(0.05)
    return time.monotonic() - t0


@contextmanager
def _run(out: Path, *extra: str, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen]:
    """The 2-rank run, held at step WAIT_AT; killed with everything it started when the test ends."""
    cmd = ["horovodrun", "-np", "2", "-H", "localhost:2", sys.executable, str(WORKERS / "preempt_train.py"),
           "--out", str(out), "--wait-at-step", str(WAIT_AT), *extra]
    full_env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1", "TF_CPP_MIN_LOG_LEVEL": "2",
                **(env or {})}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env,
                            start_new_session=True)
    try:
        _wait_for(out / "waiting.0", out / "waiting.1", proc=proc)
        yield proc
    finally:
        end_run(proc, out)  # a failed run must not leave ranks behind


def _pid(out: Path, rank: int) -> int:
    return int((out / f"waiting.{rank}").read_text())


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:  # it already stopped: what a late signal may meet
        pass


@requires_horovod
@pytest.mark.horovod
@pytest.mark.timeout(300)
@pytest.mark.parametrize("first, later", [(0, 1), (1, None)], ids=["rank0-then-rank1", "rank1-only"])
def test_a_signal_to_some_ranks_stops_all_at_one_step_with_its_checkpoint(tmp_path, first, later):
    other = 1 - first
    with _run(tmp_path) as proc:
        t0, t0_wall = time.monotonic(), time.time()
        os.kill(_pid(tmp_path, first), signal.SIGTERM)
        _wait_for(tmp_path / f"seen.{first}", proc=proc)
        (tmp_path / f"go.{other}").write_text("")  # the other rank goes on to the agreement knowing of no signal
        if later is not None:
            _wait_for(tmp_path / f"released.{later}", proc=proc)
            _kill(_pid(tmp_path, later), signal.SIGTERM)  # its own signal, somewhere in the stop
        stdout, stderr = proc.communicate(timeout=120)
        seconds = time.monotonic() - t0
    assert ranks_alive(tmp_path) == []
    assert seconds < BOUND_S, (seconds, stderr)
    to_checkpoint = (tmp_path / "ckpt" / f"{STOPPED}.json").stat().st_mtime - t0_wall
    print(f"stop: signal to exit {seconds:.2f} s, to checkpoint {to_checkpoint:.2f} s")
    assert f"SIGTERM: stopped after step {WAIT_AT + 1} (epoch 1); wrote {STOPPED}.safetensors" in stderr, stderr
    assert "did not stop within" not in stderr and "without a new checkpoint" not in stderr, stderr
    assert len(re.findall(r"^\[1,[01]\]<stdout>:epoch 1 loss", stdout, re.M)) == 2, stdout
    assert CheckpointStore(tmp_path / "ckpt").latest().manifest.payload == f"{STOPPED}.safetensors"


@requires_horovod
@pytest.mark.horovod
@pytest.mark.timeout(300)
def test_a_second_signal_during_a_long_save_ends_every_rank_and_keeps_the_last_checkpoint(tmp_path):
    with _run(tmp_path, "--hold-save") as proc:
        for rank in (0, 1):
            os.kill(_pid(tmp_path, rank), signal.SIGTERM)
        # rank 0 is inside the stop's write (its payload on disk, not yet renamed); rank 1 waits in a collective
        _wait_for(tmp_path / f"saving.{WAIT_AT + 1}", proc=proc)
        t0 = time.monotonic()
        os.kill(_pid(tmp_path, 1), signal.SIGTERM)  # the rank inside a collective: no Python handler runs there
        while str(_pid(tmp_path, 1)) in [line.split()[0] for line in ranks_alive(tmp_path)]:
            assert time.monotonic() - t0 < 10, "rank 1 did not end at its second signal"
            time.sleep(0.05)
        _kill(_pid(tmp_path, 0), signal.SIGTERM)  # unless its launcher ended it already
        seconds = _wait_gone(tmp_path, timeout=20)
        _, stderr = proc.communicate(timeout=60)
    print(f"second signal to the last rank's exit: {seconds:.2f} s")
    assert not (tmp_path / "release-save").exists()
    assert "SIGTERM again: exiting now" in stderr, stderr
    found = CheckpointStore(tmp_path / "ckpt").latest()  # checksum verified
    assert found is not None and found.manifest.payload == f"ckpt-000001-{16:010d}.safetensors"
    assert not (tmp_path / "ckpt" / f"{STOPPED}.json").exists()


@requires_horovod
@pytest.mark.horovod
@pytest.mark.timeout(300)
def test_ranks_stop_within_seconds_when_horovodrun_is_killed(tmp_path):
    with _run(tmp_path) as proc:
        os.kill(proc.pid, signal.SIGKILL)  # the launcher alone: mpirun and the ranks are left
        proc.wait()
        seconds = _wait_gone(tmp_path, timeout=BOUND_S)
    print(f"launcher killed to the last rank's exit: {seconds:.2f} s")
