"""The hang report: when training makes no progress for ``HVDKIT_HANG_TIMEOUT`` seconds, every rank says
where it is, rank 0 says which ranks are missing from the collective the others wait in, and the job ends.

Horovod's stall inspector names the stalled tensors and the ranks that did not submit them, but not where in
the Python code those ranks are, and it ends the job only after ``HOROVOD_STALL_SHUTDOWN_TIME_SECONDS``.

Progress is a :func:`heartbeat`: the engine beats at every event, the torch optimizer after every
gradient synchronisation, evaluation loops after every batch, hvdkit's own collectives when they return and
TensorFlow's DistributedGradientTape when it is asked for gradients (in a tf.function, once, when traced).
A watchdog thread (started by the adapters' ``init``) fires when this rank has not beaten for the timeout
and it is either inside a training run (between ``on_train_begin`` and ``on_train_end``) or waiting in a
Horovod collective: one called from Python, or one that has waited in Horovod's queue for the timeout (a
traced function's, such as a tf.function's, which no Python frame shows). A process that never trained
with hvdkit, or that has left its training loop and is doing other work, is never ended by it. On firing,
the ranks exchange their reports with one collective from the watchdog thread (the training threads are
blocked, Horovod's background thread is not); ranks that do not answer within :data:`EXCHANGE_SECONDS` are
named as missing. Then every rank exits with :data:`EXIT_CODE`, without running ``finally`` blocks or
``atexit`` handlers: nothing saves a checkpoint of a stuck run, so the last good one is untouched.

Before training, :mod:`hvdkit.core.start_watch` ends a process that has waited in Horovod's ``init`` too long.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from types import FrameType
from typing import Any

from hvdkit.core.exit_now import exit_now
from hvdkit.core.stack_inspection import all_stacks, collective_of, frames_of, is_users, other_threads, user_line

#: The exit status of a job the hang report ended (``timeout``'s convention for "ran out of time").
EXIT_CODE = 124
#: Seconds the ranks wait for each other's reports before rank 0 prints what it has.
EXCHANGE_SECONDS = 20.0
DEFAULT_TIMEOUT = 300.0
ENV = "HVDKIT_HANG_TIMEOUT"

@dataclass
class _Progress:
    """What the last heartbeat said; plain attributes, written by the training thread without a lock."""
    last: float = 0.0  # time.monotonic() of the last beat; 0: never (the watchdog stays idle)
    step: int | None = None
    epoch: int | None = None
    thread: int | None = None  # the thread that trains (the main thread, or a Ray actor's worker thread)
    optimizer_steps: int = 0  # for loops without hvdkit's engine (hk.distribute), which know no step
    run_stack: tuple[tuple[int, Any], ...] = ()  # (id, code) of the frames that began the run, outermost first
    run_user: int = -1  # the index in run_stack of the innermost frame of the user's own code (-1: none)
    loop: tuple[int, Any] | None = None  # the run's loop frame, once a step has begun inside it


_progress = _Progress()


def heartbeat(step: int | None = None, epoch: int | None = None, *, thread: bool = True,
              step_begins: bool = False) -> None:
    """Training made progress (a step, a batch, a collective). ``thread=False`` from code that may run on
    another thread than the training loop (Keras's late batch-end hooks); ``step_begins`` from the engine's
    batch begin, which finds the run's loop frame the first time."""
    p = _progress
    p.last = time.monotonic()
    if step is not None:
        p.step = step
    if epoch is not None:
        p.epoch = epoch
    if thread:
        p.thread = threading.get_ident()
    if step_begins and p.loop is None and p.run_stack:
        p.loop = _loop_frame(sys._getframe(1), p.run_stack)


def _loop_frame(frame: FrameType | None, run_stack: tuple[tuple[int, Any], ...]) -> tuple[int, Any] | None:
    """The innermost frame both the run's beginning and a step's beginning were called from: the loop that
    runs the steps (``Trainer.fit``, Keras's ``fit``, the elastic loop)."""
    while frame is not None:
        if (id(frame), frame.f_code) in run_stack:
            return id(frame), frame.f_code
        frame = frame.f_back
    return None


def optimizer_step() -> None:
    """The distributed optimizer averaged a step's gradients."""
    _progress.optimizer_steps += 1
    heartbeat()


def set_in_run(active: bool) -> None:
    """Inside a training run (the engine's ``train_begin`` .. ``train_end``, while its loop frame is still on
    the stack), no progress for the timeout is a hang even when this rank is not in a collective (a data
    loader that never returns). The loop frame, not this flag alone, decides: a run that ended by an
    exception Keras does not report (``on_train_end`` is not called) must not leave an idle process to be
    ended later."""
    p = _progress
    frames = frames_of(sys._getframe(1)) if active else []
    p.run_stack = tuple((id(f), f.f_code) for f in frames)
    p.run_user = max((i for i, f in enumerate(frames) if is_users(f)), default=-1)
    p.loop = None
    heartbeat()


def in_run(frame: FrameType | None) -> bool:
    """Whether ``frame``'s stack (the training thread's) is inside the run's loop. Before the first step (a
    data loader stuck on the first batch) that loop is not known yet: then the library call the user's code
    made to train (``fit``) must still be running, i.e. the stack still holds the frames that began the run,
    down to at least one below the user's innermost one."""
    p = _progress
    if p.loop is None:
        alive = 0  # how many of the frames that began the run, outermost first, are still running
        for began, now in zip(p.run_stack, ((id(f), f.f_code) for f in frames_of(frame))):
            if began != now:
                break
            alive += 1
        return p.run_user >= 0 and alive > p.run_user + 1
    loop = p.loop
    while frame is not None:
        if (id(frame), frame.f_code) == loop:
            return True
        frame = frame.f_back
    return False


def read_timeout(environ: dict[str, str] | None = None, name: str = ENV,
                 default: float = DEFAULT_TIMEOUT) -> float:
    """``HVDKIT_HANG_TIMEOUT`` (or ``name``) in seconds (default 300, or ``default``; 0 turns it off). The
    value was checked by :func:`hvdkit.runtime.env_vars.check_env` at ``init``."""
    text = (os.environ if environ is None else environ).get(name, "").strip()
    return float(text) if text else default


@dataclass
class RankReport:
    """One rank's view of the hang."""
    rank: int
    host: str
    pid: int
    idle_s: float
    step: int | None
    epoch: int | None
    optimizer_steps: int
    waiting_in: str | None  # "horovod.torch.mpi_ops.allreduce 'name' float32[4, 2]", when in a collective
    where: str  # the innermost line of the user's own code on the training thread
    stacks: str = field(repr=False, default="")
    queued_s: float | None = None  # how long the oldest tensor in Horovod's queue has waited (None: none)
    others: str = ""  # other threads in the user's code (a data loader's), where each is

    def line(self) -> str:
        """One line for the summary."""
        return f"rank {self.rank} {self.status()}"

    def status(self) -> str:
        """Where this process is: ``(host, pid, step, epoch): waiting in ... / not in a collective, at ...``."""
        at = (f", step {self.step}, epoch {self.epoch}" if self.step is not None else
              f", after {self.optimizer_steps} optimizer steps" if self.optimizer_steps else "")  # none: traced TF
        doing = f"waiting in {self.waiting_in}" if self.waiting_in else "not in a collective"
        if self.waiting_in and self.queued_s is not None:
            doing += f" (queued {self.queued_s:g} s ago)"
        also = f"; other threads in your code: {self.others}" if self.others else ""
        return f"(host {self.host}, pid {self.pid}{at}): {doing}, at {self.where}{also}"


#: ``pending()``: the tensor that has waited longest in Horovod's queue on this process and for how many
#: seconds, or None when none waits (a Horovod build without that query: no ``pending``).
Pending = Callable[[], "tuple[str, float] | None"]


def traced_collective(name: str) -> str:
    """How a report names a collective seen only in Horovod's queue: the same text on every rank for the same
    tensor, so the summary can say which ranks are missing from it."""
    return f"Horovod's collective {name!r} (run by a traced function: no Python frame calls it)"


def local_report(rank: int, now: float | None = None, pending: Pending | None = None) -> RankReport:
    """This rank's report, from the training thread's stack (and Horovod's queue, when ``pending``)."""
    p = _progress
    frames = sys._current_frames()
    training = p.thread or threading.main_thread().ident or 0
    frame = frames.get(training)
    queued = pending() if pending else None
    now = now if now is not None else time.monotonic()
    idle = now - p.last
    waiting_in = collective_of(frame)
    if waiting_in is None and queued:
        waiting_in = traced_collective(queued[0])
    return RankReport(rank=rank, host=socket.gethostname(), pid=os.getpid(), idle_s=round(idle, 1), step=p.step,
                      epoch=p.epoch, optimizer_steps=p.optimizer_steps, waiting_in=waiting_in,
                      where=user_line(frame), stacks=all_stacks(),
                      others=other_threads({training, threading.get_ident()}),
                      queued_s=round(queued[1], 1) if queued else None)


def this_process() -> RankReport:
    """:func:`local_report` for a caller that knows no rank (``rank`` -1), reading Horovod's queue as the
    watchdog does, for a collective a traced function waits in."""
    return local_report(-1, pending=_watchdog._pending if _watchdog is not None else None)


def summary(reports: list[RankReport], size: int, timeout: float) -> str:
    """Rank 0's message: every rank's line, and for each collective some ranks wait in, the ranks missing."""
    by_rank = {r.rank: r for r in reports}
    lines = [f"hvdkit: no training progress for {timeout:g} s ({ENV}={timeout:g}): the job is stuck and ends now "
             f"(exit status {EXIT_CODE}). The last checkpoint written is untouched."]
    for rank in range(size):
        report = by_rank.get(rank)
        lines.append("  " + (report.line() if report else
                             f"rank {rank}: no report within {EXCHANGE_SECONDS:g} s (stuck outside Python, "
                             "dead, or not in hvdkit's training loop nor a collective); see its own output"))
    waited: dict[str, list[int]] = {}
    for r in by_rank.values():
        if r.waiting_in:
            waited.setdefault(r.waiting_in, []).append(r.rank)
    for collective, ranks in waited.items():
        missing = [r for r in range(size) if r not in ranks]
        if missing:
            lines.append(f"  rank(s) {_ranks(ranks)} wait in {collective}; missing from it: rank(s) "
                         f"{_ranks(missing)}")
    if len(waited) > 1:
        lines.append("  the ranks wait in different collectives: they called them in a different order or with "
                     "different names (a rank skipped a step, or a name depends on the rank)")
    for rank in range(size):
        report = by_rank.get(rank)
        if report and report.stacks:
            lines.append(f"--- rank {rank} stacks ---\n{report.stacks.rstrip()}")
    return "\n".join(lines)


def _ranks(ranks: list[int]) -> str:
    return ", ".join(str(r) for r in sorted(ranks))


class Watchdog:
    """The thread that notices a hang and reports it. ``allgather(obj, name)`` returns every rank's ``obj`` (a
    collective); ``rank``/``size`` are read when it fires (they change under elastic training)."""

    def __init__(self, timeout: float, rank: Callable[[], int], size: Callable[[], int],
                 allgather: Callable[[object, str], list[Any]], exit: Callable[[int], None] = exit_now,
                 pending: Pending | None = None) -> None:
        self.timeout = timeout
        self._rank, self._size, self._allgather, self._exit = rank, size, allgather, exit
        self._pending = pending
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hvdkit-hang-watchdog", daemon=True)

    def start(self) -> None:
        """Start the thread (idle until the first heartbeat)."""
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread."""
        self._stop.set()

    def stuck(self, now: float) -> bool:
        """Whether this rank has made no progress for the timeout while training or in a collective (one
        called from Python, or one that has waited in Horovod's queue for the timeout)."""
        p = _progress
        if not p.last or now - p.last < self.timeout:
            return False
        queued = self._pending() if self._pending else None
        if queued and queued[1] >= self.timeout:
            return True
        frame = sys._current_frames().get(p.thread or 0)
        return in_run(frame) or collective_of(frame) is not None

    def _run(self) -> None:
        interval = min(5.0, max(0.2, self.timeout / 10))
        while not self._stop.wait(interval):
            if self.stuck(time.monotonic()):
                self.fire()
                return

    def fire(self) -> None:
        """Report, exchange, summarise (rank 0), exit."""
        rank, size = self._rank(), self._size()
        report = local_report(rank, pending=self._pending)
        sys.stderr.write(f"hvdkit: rank {rank} made no progress for {report.idle_s:g} s: {report.line()}\n")
        sys.stderr.flush()
        reports = self._gather(asdict(report), "hvdkit.hang_report", size)
        if rank == 0 or reports is None:
            found = [RankReport(**r) for r in reports or [asdict(report)] if isinstance(r, dict)]
            sys.stderr.write(summary(found, size, self.timeout) + "\n")
        sys.stderr.flush()
        if reports is not None:  # the launcher ends the job at the first exit: rank 0 has printed first
            self._gather(None, "hvdkit.hang_report.printed", size)
        self._exit(EXIT_CODE)

    def _gather(self, obj: object, name: str, size: int) -> list[Any] | None:
        """Every rank's ``obj``, or None when not all answered in time (then each rank prints its own)."""
        if size == 1:
            return [obj]
        result: list[Any] = []

        def run() -> None:
            try:
                result.extend(self._allgather(obj, name))
            except Exception as e:  # Horovod shut down, a rank died: print what this rank knows
                sys.stderr.write(f"hvdkit: the hang report exchange failed ({type(e).__name__}: {e})\n")

        t = threading.Thread(target=run, name="hvdkit-hang-exchange", daemon=True)
        t.start()
        t.join(EXCHANGE_SECONDS)
        return None if t.is_alive() or len(result) != size else result


_watchdog: Watchdog | None = None


def start(rank: Callable[[], int], size: Callable[[], int],
          allgather: Callable[[object, str], list[Any]], pending: Pending | None = None) -> Watchdog | None:
    """Start this process's watchdog once (``init`` may run again under elastic training); ``allgather(obj,
    name)`` is the framework's object allgather; ``pending`` reads Horovod's queue. None when
    ``HVDKIT_HANG_TIMEOUT`` is 0."""
    global _watchdog
    if _progress.last:
        heartbeat(thread=False)  # a re-init (elastic reset) is progress
    if _watchdog is not None:
        return _watchdog
    timeout = read_timeout()
    if timeout <= 0:
        return None
    _watchdog = Watchdog(timeout, rank, size, allgather, pending=pending)
    _watchdog.start()
    return _watchdog

