"""A progress bar on rank 0 only (tqdm), quiet on every other rank."""

from __future__ import annotations

from typing import Any

from hvdkit.core.callback import Callback
from hvdkit.core.state import TrainState


class ProgressBar(Callback):
    """One tqdm bar per epoch on rank 0, showing the batch logs; other ranks print nothing."""

    order = 100

    def __init__(self, leave: bool = True, **tqdm_kwargs: Any) -> None:
        self.leave = leave
        self.tqdm_kwargs = tqdm_kwargs
        self._bar: Any = None

    def on_epoch_begin(self, state: TrainState) -> None:
        """Open the epoch's bar (rank 0)."""
        if not state.is_root:
            return
        from tqdm.auto import tqdm

        self._bar = tqdm(total=state.steps_per_epoch, desc=f"epoch {state.epoch + 1}/{state.epochs}",
                         leave=self.leave, dynamic_ncols=True, **self.tqdm_kwargs)

    def on_batch_end(self, state: TrainState) -> None:
        """Advance the bar and show the batch logs."""
        if self._bar is not None:
            self._bar.update(1)
            if state.logs:
                self._bar.set_postfix({k: f"{v:.4g}" for k, v in state.logs.items()}, refresh=False)

    def on_epoch_end(self, state: TrainState) -> None:
        """Show the epoch logs and close the bar."""
        if self._bar is not None:
            self._bar.set_postfix({k: f"{v:.4g}" for k, v in state.logs.items()})
            self._bar.close()
            self._bar = None

    def close(self) -> None:
        """Close a bar left open by an epoch that raised."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
