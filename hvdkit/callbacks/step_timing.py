"""Per-step timing (step time, the wait for the gradients, samples per second) and a hint naming a slow rank."""

from __future__ import annotations

import logging
import socket
import statistics
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from hvdkit.core.callback import Callback
from hvdkit.core.state import TrainState
from hvdkit.core.validation import check_int, check_number

log = logging.getLogger("hvdkit")

#: The batch-log keys :class:`StepTiming` adds (seconds per step, samples per second).
STEP_TIME, COMM_WAIT = "step_time_s", "comm_wait_s"
RANK_SAMPLES, TOTAL_SAMPLES = "rank_samples_per_s", "total_samples_per_s"
#: Below this excess per step over the others' median a slower rank is scheduling noise, not a straggler.
MIN_EXCESS_S = 0.01


class StepTiming(Callback):
    """Time every training step and, every ``every`` steps, put the figures into the batch logs that
    ``MetricsLogger(batch_every=...)`` and ``TensorBoard(batch_every=...)`` write (rank 0's):

    - ``step_time_s``: this rank's mean wall time per step over the last ``every`` steps;
    - ``comm_wait_s``: of that, the mean time blocked waiting for the gradients' allreduce (PyTorch, where
      the distributed optimizer synchronizes them; not measured under Keras, where the allreduce runs inside
      the compiled train step, so the key is absent there);
    - ``rank_samples_per_s`` and ``total_samples_per_s``: this rank's samples per second, and the job's
      (every rank's samples per step over the ranks' mean step time). The PyTorch ``Trainer`` knows the
      batch; with Keras ``model.fit`` pass ``batch_size`` (per rank, as given to ``fit``), otherwise these
      two are absent.

    The first step of a run is left out (compilation, tracing, allocator warm-up), and so is time outside
    the steps (validation, epoch ends). Clock reads only: no tensor is read, nothing waits for a device.

    Straggler hint: every ``every`` steps the ranks exchange their figures (one small allgather, at the same
    global step on every rank). In synchronous training every rank's step takes as long as the slowest
    one's, because the others wait for it in the allreduce, so the figure compared is the time a rank spends
    outside that wait. When one rank's is above ``straggler_factor`` times the median of the others' (and at
    least 10 ms more) in every exchange over the last ``straggler_steps`` steps, rank 0 warns once, naming
    the rank and its host. This needs ``comm_wait_s``: under Keras the hint is off.
    """

    order = 80  # before TensorBoard (90) and MetricsLogger (200), which write the batch logs it adds to

    def __init__(self, every: int = 20, batch_size: int | None = None, straggler_factor: float = 1.5,
                 straggler_steps: int = 20) -> None:
        self.every = check_int("every", every, minimum=1)
        self.batch_size = None if batch_size is None else check_int("batch_size", batch_size, minimum=1)
        self.straggler_factor = check_number("straggler_factor", straggler_factor, minimum=1.0, strict_min=True)
        self.straggler_steps = check_int("straggler_steps", straggler_steps, minimum=1)
        #: The last figures (what the batch logs get), and every rank's last exchange (rank order).
        self.latest: dict[str, float] = {}
        self.ranks: list[dict[str, Any]] = []
        self.warned = False
        self._wait_clock: Callable[[], float | None] | None = None
        self._host = socket.gethostname()
        self._window: deque[tuple[int, list[float]]] = deque()
        self._reset_interval()

    def _reset_interval(self) -> None:
        self._t0: float | None = None  # when the open step began
        self._w0 = 0.0  # the wait clock then
        self._warmup = True
        self._n, self._sum_t, self._sum_w = 0, 0.0, 0.0
        self._bucket: int | None = None

    def on_train_begin(self, state: TrainState) -> None:
        """Start clean; find this adapter's wait clock (``ops.comm_wait_seconds``, if it has one)."""
        self._reset_interval()
        self._window.clear()
        self.latest = {}
        self._wait_clock = getattr(state.ops, "comm_wait_seconds", None)

    def on_reset(self, state: TrainState) -> None:
        """Workers left or joined: the figures so far compare another set of ranks."""
        self.on_train_begin(state)

    def on_epoch_begin(self, state: TrainState) -> None:
        """No step is open across an epoch boundary."""
        self._t0 = None

    def on_batch_begin(self, state: TrainState) -> None:
        """End the previous step, exchange the figures when a multiple of ``every`` steps was passed, and
        start this step's clock."""
        now = time.perf_counter()
        self._close(now)
        # Keras gives the step counter from batch_begin, which always runs on the training thread; its batch
        # ends may run late on a worker thread, so a step's time is measured from one begin to the next
        # (the epoch's last step ends at validation or the epoch's end).
        bucket = state.global_step // self.every
        if self._bucket is None:
            self._bucket = bucket
        elif bucket != self._bucket:  # the same global steps on every rank: the allgather is in step
            self._bucket = bucket
            self._exchange(state)
        self._t0 = time.perf_counter()
        self._w0 = self._wait() or 0.0

    def on_batch_end(self, state: TrainState) -> None:
        """Add the last figures to the step's logs, for the loggers that run after this callback."""
        if self.latest:
            state.logs.update(self.latest)

    def on_eval_begin(self, state: TrainState) -> None:
        """The epoch's last step ended."""
        self._close(time.perf_counter())

    def on_epoch_end(self, state: TrainState) -> None:
        """The epoch's last step ended (when there was no validation)."""
        self._close(time.perf_counter())

    def _wait(self) -> float | None:
        return None if self._wait_clock is None else self._wait_clock()

    def _close(self, now: float) -> None:
        if self._t0 is None:
            return
        dt, wait = now - self._t0, (self._wait() or 0.0) - self._w0
        self._t0 = None
        if self._warmup:
            self._warmup = False
            return
        self._n += 1
        self._sum_t += dt
        self._sum_w += wait

    def _samples_per_step(self, state: TrainState) -> float | None:
        if self.batch_size is not None:
            return float(self.batch_size)
        if state.samples_per_step:
            return state.samples_per_step / state.comm.size  # the Trainer's global batch
        return None

    def _exchange(self, state: TrainState) -> None:
        mine: dict[str, Any] = {"host": self._host, "steps": self._n}
        if self._n:
            mine["step_time"] = self._sum_t / self._n
            if self._wait_clock is not None and self._wait() is not None:
                mine["comm_wait"] = self._sum_w / self._n
            mine["samples"] = self._samples_per_step(state)
        self._n, self._sum_t, self._sum_w = 0, 0.0, 0.0
        comm = state.comm
        self.ranks = comm.allgather_object(mine) if comm.size > 1 else [mine]
        if "step_time" not in mine:
            return
        figures = {STEP_TIME: mine["step_time"]}
        if "comm_wait" in mine:
            figures[COMM_WAIT] = mine["comm_wait"]
        if mine["samples"]:
            figures[RANK_SAMPLES] = mine["samples"] / mine["step_time"]
            if all(r.get("samples") and r.get("step_time") for r in self.ranks):
                # The ranks step together, so the job's rate is all their samples per common step time; each
                # rank's step time estimates that, their mean best (one rank's alone is noisy on short steps).
                mean_time = sum(r["step_time"] for r in self.ranks) / len(self.ranks)
                figures[TOTAL_SAMPLES] = sum(r["samples"] for r in self.ranks) / mean_time
        self.latest = figures
        self._check_straggler(state)

    def _check_straggler(self, state: TrainState) -> None:
        ranks = self.ranks
        if self.warned or len(ranks) < 2 or not all("comm_wait" in r for r in ranks):
            return  # every rank's step takes as long as the slowest's: only the time outside the wait differs
        busy = [max(r["step_time"] - r["comm_wait"], 0.0) for r in ranks]
        steps = min(r["steps"] for r in ranks)
        self._window.append((steps, busy))
        while sum(n for n, _ in self._window) - self._window[0][0] >= self.straggler_steps:
            self._window.popleft()
        covered = sum(n for n, _ in self._window)
        if covered < self.straggler_steps or any(len(b) != len(busy) for _, b in self._window):
            return
        worst: tuple[float, int, float, float] | None = None
        for r in range(len(busy)):
            others = [statistics.median(b[:r] + b[r + 1:]) for _, b in self._window]
            if all(b[r] > self.straggler_factor * m and b[r] - m >= MIN_EXCESS_S
                   for (_, b), m in zip(self._window, others)):
                mean = sum(n * b[r] for n, b in self._window) / covered
                median = sum(n * m for (n, _), m in zip(self._window, others)) / covered
                if worst is None or mean / median > worst[0]:
                    worst = (mean / median, r, mean, median)
        if worst is None:
            return
        self.warned = True
        if state.is_root:
            _, r, mean, median = worst
            log.warning(
                "rank %d on host %s is a straggler: it spends %.3g s per step outside the wait for the gradients "
                "against %.3g s, the median of the other ranks, over the last %d steps, and every rank waits for "
                "it in each allreduce; check that host (CPU/GPU contention, thermal throttling, a slow disk or "
                "network)", r, ranks[r]["host"], mean, median, covered)

    def __repr__(self) -> str:
        return f"StepTiming(every={self.every})"
