"""A job that makes no progress for HVDKIT_HANG_TIMEOUT seconds ends with a report naming the rank missing from
the collective the others wait in, and its line; the hangs are real ones (tests/workers/hang.py). Without the
report each of them waits for Horovod's stall shutdown (600 s by default)."""

import os
import re
import sched
import subprocess
import sys
import threading
import time

import pytest
from helpers import REPO, WORKERS, have_horovod, horovodrun

from hvdkit.core import hang_report
from hvdkit.runtime.env_vars import check_env

TIMEOUT = 5


def guilty_line(case: str, worker: str = "hang.py") -> int:
    lines = (WORKERS / worker).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if f"GUILTY: {case}" in line)


def rank_line(stderr: str, rank: int) -> str:
    """Rank ``rank``'s line in rank 0's summary."""
    found = re.search(rf"\[(?:\d+,)?0\]<stderr>:  (rank {rank} \(host .*)", stderr)  # mpirun's or Gloo's prefix
    assert found, stderr[-4000:]
    return found.group(1)


@pytest.mark.horovod
@pytest.mark.timeout(200)
@pytest.mark.skipif(not have_horovod(), reason="needs Horovod's torch build")
@pytest.mark.parametrize("case, launcher, guilty, waiting", [
    ("skip_step", (), 1, "rank(s) 0 wait in horovod.torch.optimizer.synchronize (gradients of 'bias', 'weight'); "
                         "missing from it: rank(s) 1"),
    ("broadcast_name", ("--gloo",), 1, "rank(s) 0 wait in horovod.torch.mpi_ops.broadcast 'best_metric.0' "
                                       "float32[3]; missing from it: rank(s) 1"),
    ("data_loader", (), 1, "missing from it: rank(s) 1"),
])
def test_a_stuck_job_ends_with_a_report_naming_the_missing_rank_and_its_line(case, launcher, guilty, waiting):
    start = time.monotonic()
    proc = horovodrun("hang.py", case, extra=launcher, timeout=150, check=False,
                      env={"HVDKIT_HANG_TIMEOUT": str(TIMEOUT)})
    wall = time.monotonic() - start
    err = proc.stderr + proc.stdout
    assert proc.returncode != 0 and "not reached" not in proc.stdout, err[-4000:]
    assert f"no training progress for {TIMEOUT} s (HVDKIT_HANG_TIMEOUT={TIMEOUT})" in err, err[-4000:]
    assert waiting in err, err[-4000:]
    assert f"hang.py:{guilty_line(case)} in " in rank_line(err, guilty), err[-4000:]
    assert "--- rank 1 stacks ---" in err and "Thread MainThread" in err
    # start-up (two torch imports) plus the timeout plus the exchange: well under the stall shutdown
    assert wall < TIMEOUT + 30 + 45, wall


@pytest.mark.horovod
@pytest.mark.timeout(200)
@pytest.mark.skipif(not have_horovod(), reason="needs Horovod's torch build")
def test_a_stuck_elastic_job_ends_too_instead_of_being_restarted():
    """Under Horovod's elastic driver (hvdkit elastic-local, Gloo) every worker exits with the report; the
    driver then stops rather than restarting the stuck workers."""
    proc = subprocess.run([sys.executable, "-m", "hvdkit", "elastic-local", "--np", "2", "--min-np", "1", "--",
                           sys.executable, str(WORKERS / "hang.py"), "elastic_loader"], capture_output=True, text=True,
                          timeout=150, cwd=REPO, start_new_session=True,
                          env={**os.environ, "PYTHONPATH": str(REPO), "HVDKIT_HANG_TIMEOUT": str(TIMEOUT)})
    err = proc.stderr + proc.stdout
    assert proc.returncode != 0 and "not reached" not in proc.stdout, err[-4000:]
    assert "rank(s) 0 wait in horovod.torch.optimizer.synchronize (gradients of 'bias', 'weight'); missing from " \
           "it: rank(s) 1" in err, err[-4000:]
    assert f"not in a collective, at {WORKERS / 'hang.py'}:{guilty_line('data_loader')} in __getitem__" in \
        rank_line(err, 1), err[-4000:]
    assert "exit with status code 124" in err, err[-4000:]


def test_a_bad_timeout_is_refused_naming_the_variable():
    with pytest.raises(ValueError, match=r"HVDKIT_HANG_TIMEOUT must be a number of seconds >= 0.*got '-1'"):
        check_env({"HVDKIT_HANG_TIMEOUT": "-1"})
    assert hang_report.read_timeout({}) == hang_report.DEFAULT_TIMEOUT
    assert hang_report.read_timeout({"HVDKIT_HANG_TIMEOUT": "0"}) == 0


def test_a_rank_is_stuck_only_inside_its_training_loop(monkeypatch):
    """Idle inside the run's loop (a data loader that never returns) is a hang; idle after the loop returned is
    not, even when the run ended by an exception that skipped train_end (Keras does not report it): a notebook
    or a script evaluating on rank 0 alone must not be ended."""
    progress = hang_report._Progress(thread=threading.get_ident())
    monkeypatch.setattr(hang_report, "_progress", progress)
    dog = hang_report.Watchdog(10, lambda: 0, lambda: 1, lambda obj, name: [obj])
    seen = []

    def loop():
        hang_report.set_in_run(True)  # what Engine.train_begin does
        hang_report.heartbeat(step_begins=True)  # what Engine.batch_begin does
        progress.last = time.monotonic() - 100  # no progress since
        seen.append(dog.stuck(time.monotonic()))
        progress.last = time.monotonic()
        seen.append(dog.stuck(time.monotonic()))
        progress.last = time.monotonic() - 100
        raise RuntimeError("the run ends without train_end")

    with pytest.raises(RuntimeError):
        loop()
    assert seen == [True, False]
    assert not dog.stuck(time.monotonic())


def test_a_rank_stuck_before_its_first_step_is_inside_the_run_until_fit_returns(monkeypatch):
    """A data loader stuck on the first batch: no step has begun, so the run's loop frame is not known yet. The
    library call the user made to train (sched's run loop stands for Keras's ``fit`` here) still running
    decides: stuck while it runs, idle once it returned (even without train_end)."""
    progress = hang_report._Progress(thread=threading.get_ident())
    monkeypatch.setattr(hang_report, "_progress", progress)
    dog = hang_report.Watchdog(10, lambda: 0, lambda: 1, lambda obj, name: [obj])
    seen = []

    def first_batch():  # the user's reader, called by the library's loop before any step begins
        progress.last = time.monotonic() - 100
        seen.append(dog.stuck(time.monotonic()))

    fit = sched.scheduler(time.monotonic, lambda _: None)
    fit.enter(0, 1, hang_report.set_in_run, (True,))  # the engine's train_begin, called from inside fit
    fit.enter(0, 2, first_batch)
    fit.run()
    seen.append(dog.stuck(time.monotonic()))  # fit has returned
    assert seen == [True, False]


def test_a_collective_waiting_in_horovods_queue_for_the_timeout_is_a_hang_once_training_began(monkeypatch):
    """Outside a run and with no Horovod frame on the stack (a tf.function's collective), the queue decides: a
    tensor queued for the timeout with no progress since is a hang; a younger one, or a process that never
    trained (rank 1 waiting while rank 0 prepares data at start-up), is not."""
    progress = hang_report._Progress(thread=threading.get_ident())
    monkeypatch.setattr(hang_report, "_progress", progress)
    queued = {"age": 12.0}
    dog = hang_report.Watchdog(10, lambda: 0, lambda: 1, lambda obj, name: [obj],
                               pending=lambda: ("step/HorovodAllreduce_grad_0", queued["age"]))
    now = time.monotonic()
    assert not dog.stuck(now)  # never beat
    progress.last = now - 11
    assert dog.stuck(now)
    queued["age"] = 9.0
    assert not dog.stuck(now)
    progress.last = now - 1
    queued["age"] = 12.0
    assert not dog.stuck(now)  # progress since
    report = hang_report.local_report(0, now, pending=dog._pending)
    assert report.waiting_in == ("Horovod's collective 'step/HorovodAllreduce_grad_0' (run by a traced function: "
                                 "no Python frame calls it)")
    assert "(queued 12 s ago)" in report.line()
    assert "optimizer steps" not in report.line()  # a TensorFlow loop counts none


def test_a_data_thread_stuck_in_the_users_code_is_named_beside_the_training_threads_line(monkeypatch):
    # Keras reads a PyDataset on worker threads: the training thread's own line is the fit() call, and the line
    # that hangs is on another thread.
    monkeypatch.setattr(hang_report, "_progress", hang_report._Progress(thread=threading.get_ident()))
    release, reading = threading.Event(), threading.Event()

    def stuck_read():
        reading.set()
        release.wait(30)

    reader = threading.Thread(target=stuck_read, name="reader")
    reader.start()
    try:
        assert reading.wait(10)
        line = hang_report.local_report(0).line()
    finally:
        release.set()
        reader.join()
    assert "not in a collective, at " in line and "in test_a_data_thread_stuck" in line
    assert f"; other threads in your code: thread reader at {__file__}:" in line and line.endswith("in stuck_read")


def test_the_summary_names_the_ranks_missing_from_each_collective():
    def report(rank, waiting):
        return hang_report.RankReport(rank=rank, host="h", pid=1, idle_s=6, step=3, epoch=0, optimizer_steps=3,
                                      waiting_in=waiting, where=f"train.py:{10 + rank} in main")
    text = hang_report.summary([report(0, "allreduce 'a'"), report(2, "allreduce 'a'"), report(1, None)], 4, 5)
    assert "rank(s) 0, 2 wait in allreduce 'a'; missing from it: rank(s) 1, 3" in text
    assert "rank 1 (host h, pid 1, step 3, epoch 0): not in a collective, at train.py:11 in main" in text
    assert "rank 3: no report within 20 s" in text


@pytest.mark.horovod
@pytest.mark.timeout(200)
@pytest.mark.skipif(not have_horovod("tensorflow"), reason="needs Horovod's torch and TensorFlow builds")
@pytest.mark.parametrize("backend", ["torch", "tensorflow"])
def test_a_rank_stuck_before_keras_fit_begins_is_named_by_the_rank_waiting_at_the_runs_start(backend):
    proc = horovodrun("hang_keras.py", "before_run", timeout=150, check=False,
                      env={"HVDKIT_HANG_TIMEOUT": str(TIMEOUT), "KERAS_BACKEND": backend})
    err = proc.stderr + proc.stdout
    assert proc.returncode != 0 and "not reached" not in proc.stdout, err[-4000:]
    assert f"rank 0: fit on {backend}" in err, err[-4000:]
    assert f"no training progress for {TIMEOUT} s (HVDKIT_HANG_TIMEOUT={TIMEOUT})" in err, err[-4000:]
    assert f"waiting in horovod.{backend}.functions.allgather_object" in rank_line(err, 0), err[-4000:]
    assert "missing from it: rank(s) 1" in err and "rank 1: no report within" in err, err[-4000:]


@pytest.mark.horovod
@pytest.mark.timeout(200)
@pytest.mark.skipif(not have_horovod(), reason="needs Horovod's torch build")
def test_a_rank_stuck_on_its_first_batch_in_keras_fit_says_where():
    """On the PyTorch backend Keras reads a batch before the step begins: the first one is read before any
    step has begun, which the report must still see as inside the run."""
    proc = horovodrun("hang_keras.py", "first_batch", timeout=150, check=False,
                      env={"HVDKIT_HANG_TIMEOUT": str(TIMEOUT), "KERAS_BACKEND": "torch"})
    err = proc.stderr + proc.stdout
    assert proc.returncode != 0 and "not reached" not in proc.stdout, err[-4000:]
    assert "missing from it: rank(s) 1" in err, err[-4000:]
    assert f"not in a collective, at {WORKERS / 'hang_keras.py'}:{guilty_line('first_batch', 'hang_keras.py')} in " \
        "__getitem__" in rank_line(err, 1), err[-4000:]


@pytest.mark.horovod
@pytest.mark.timeout(200)
@pytest.mark.skipif(not have_horovod("tensorflow"), reason="needs Horovod's TensorFlow build")
def test_ranks_waiting_in_eager_tensorflow_collectives_still_exchange_their_reports():
    """Eager Horovod ops reach Horovod under one name: the report's exchange, run eagerly from its own thread,
    failed or paired with the other rank's stuck collective, and rank 0's summary lacked rank 1's line."""
    proc = horovodrun("hang_eager_tf.py", timeout=150, check=False, env={"HVDKIT_HANG_TIMEOUT": str(TIMEOUT)})
    err = proc.stderr + proc.stdout
    assert proc.returncode != 0 and "not reached" not in proc.stdout, err[-4000:]
    assert "exchange failed" not in err, err[-4000:]
    for rank, tensor in ((0, "'gathered_loss' float32[1]"), (1, "'averaged_w' float32[2]")):
        line = rank_line(err, rank)
        assert tensor in line and f"hang_eager_tf.py:{guilty_line(f'rank {rank}', 'hang_eager_tf.py')} in " in line, \
            err[-4000:]
    assert "the ranks wait in different collectives" in err, err[-4000:]
