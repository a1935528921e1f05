"""Average epoch metrics over all workers, so every rank logs the global value."""

from __future__ import annotations

from typing import Any

from hvdkit.core.callback import Callback
from hvdkit.core.process_set import check_process_set, scoped
from hvdkit.core.state import TrainState


class MetricAverage(Callback):
    """At each epoch end, replace every scalar metric by its mean over the ranks (of ``process_set``).

    An allgather, not an allreduce: ranks that logged different metrics would wait for each other's
    tensors forever; here every rank raises a ValueError naming what each rank has.
    """

    order = 50  # after callbacks that add metrics, before loggers

    def __init__(self, process_set: Any = None) -> None:
        self.process_set = check_process_set(process_set)

    def on_epoch_end(self, state: TrainState) -> None:
        """Average the epoch's scalar logs over all ranks."""
        scalars = {}
        for k, v in sorted(state.logs.items()):
            try:
                scalars[k] = float(v)  # Python, NumPy and 0-d tensor scalars
            except (TypeError, ValueError):
                continue
        comm = scoped(state.comm, self.process_set)
        if state.comm.size == 1:  # the world's size: with a process set every rank takes part in the exchange
            return
        gathered = comm.allgather_object(scalars)
        names = [sorted(g) for g in gathered]
        if any(n != names[0] for n in names):
            where = "" if self.process_set is None else "process-set "
            per_rank = "; ".join(f"{where}rank {r}: {', '.join(n) or '(none)'}" for r, n in enumerate(names))
            raise ValueError(f"MetricAverage: ranks logged different metrics at the end of epoch {state.epoch + 1} "
                             f"({per_rank}): give every rank the same metrics and the same validation data "
                             "(each rank its shard of it)")
        state.logs.update({k: sum(g[k] for g in gathered) / len(gathered) for k in scalars})
