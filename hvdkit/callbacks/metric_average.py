"""Average epoch metrics over all workers, so every rank logs the global value."""

from __future__ import annotations

from hvdkit.core.callback import Callback
from hvdkit.core.state import TrainState


class MetricAverage(Callback):
    """At each epoch end, replace every scalar metric by its mean over the ranks (one allreduce)."""

    order = 50  # after callbacks that add metrics, before loggers

    def on_epoch_end(self, state: TrainState) -> None:
        """Average the epoch's scalar logs over all ranks (one allreduce)."""
        scalars = {}
        for k, v in sorted(state.logs.items()):
            try:
                scalars[k] = float(v)  # Python, NumPy and 0-d tensor scalars
            except (TypeError, ValueError):
                continue
        if scalars and state.comm.size > 1:
            state.logs.update(state.comm.allreduce_mean(scalars))
