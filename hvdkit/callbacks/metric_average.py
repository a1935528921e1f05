"""Average epoch metrics over all workers, so every rank logs the global value."""

from __future__ import annotations

from hvdkit.core.callback import Callback
from hvdkit.core.state import TrainState


class MetricAverage(Callback):
    """At each epoch end, replace every scalar metric by its mean over the ranks.

    One allgather of every rank's metrics (not an allreduce): ranks whose logs hold different metric
    names (validation data on some ranks only, a metric computed on one rank) would otherwise submit
    differently named tensors and wait for each other forever; here every rank raises a ValueError
    naming what each rank has.
    """

    order = 50  # after callbacks that add metrics, before loggers

    def on_epoch_end(self, state: TrainState) -> None:
        """Average the epoch's scalar logs over all ranks."""
        scalars = {}
        for k, v in sorted(state.logs.items()):
            try:
                scalars[k] = float(v)  # Python, NumPy and 0-d tensor scalars
            except (TypeError, ValueError):
                continue
        if state.comm.size == 1:
            return
        gathered = state.comm.allgather_object(scalars)
        names = [sorted(g) for g in gathered]
        if any(n != names[0] for n in names):
            per_rank = "; ".join(f"rank {r}: {', '.join(n) or '(none)'}" for r, n in enumerate(names))
            raise ValueError(f"MetricAverage: ranks logged different metrics at the end of epoch {state.epoch + 1} "
                             f"({per_rank}): give every rank the same metrics and the same validation data "
                             "(each rank its shard of it)")
        state.logs.update({k: sum(g[k] for g in gathered) / len(gathered) for k in scalars})
