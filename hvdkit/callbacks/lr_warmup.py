"""Gradual learning-rate warm-up under the linear scaling rule (Goyal et al. 2017)."""

from __future__ import annotations

from typing import Any

from hvdkit.core import lr as lrmath
from hvdkit.core.callback import Callback
from hvdkit.core.state import TrainState
from hvdkit.core.validation import check_int, check_number


class LearningRateWarmup(Callback):
    """Ramp the LR from ``T/n`` to ``T`` over ``warmup_epochs`` epochs, updated every batch.

    ``T`` is the LR the optimizer was built with (already scaled by the number of
    workers ``n``). Global step ``k < W*S`` uses ``T * (1/n + (1 - 1/n) * k / (W*S))``.
    ``steps_per_epoch`` defaults to what the trainer (or ``model.fit``) reports.
    ``momentum_correction`` applies Goyal et al.'s correction for optimizers whose
    velocity holds the LR (Keras SGD); PyTorch's SGD needs none and ignores it.
    """

    order = -10

    def __init__(self, warmup_epochs: float = 5, steps_per_epoch: int | None = None,
                 momentum_correction: bool = True, verbose: bool = False) -> None:
        self.warmup_epochs = check_number("warmup_epochs", warmup_epochs, minimum=0)
        if steps_per_epoch is not None:
            check_int("steps_per_epoch", steps_per_epoch, minimum=1)
        self.steps_per_epoch = steps_per_epoch
        self.momentum_correction = bool(momentum_correction)
        self.verbose = bool(verbose)
        self._done_logged = False

    def warmup_steps(self, state: TrainState) -> int:
        """The warm-up length in optimizer steps."""
        spe = self.steps_per_epoch or state.steps_per_epoch
        if not spe:
            raise ValueError(
                "LearningRateWarmup needs steps_per_epoch: pass steps_per_epoch=... or use a trainer "
                "that knows the number of batches per epoch, got None"
            )
        return round(self.warmup_epochs * spe)

    def on_train_begin(self, state: TrainState) -> None:
        """Tell the engine whether to apply momentum correction."""
        state.momentum_correction = self.momentum_correction

    def on_batch_begin(self, state: TrainState) -> None:
        """Set the warm-up LR factor for the current global step."""
        factor = lrmath.warmup_factor(state.global_step, self.warmup_steps(state), state.comm.size)
        state.lr_factors["warmup"] = factor
        if factor == 1.0 and self.verbose and state.is_root and not self._done_logged:
            self._done_logged = True
            print(f"LearningRateWarmup: warm-up done at step {state.global_step}, lr={state.target_lr:g}")

    def __repr__(self) -> str:
        return f"LearningRateWarmup(warmup_epochs={self.warmup_epochs:g})"

    def state_dict(self) -> dict[str, Any]:
        """Whether the end of the warm-up was logged."""
        return {"done_logged": self._done_logged}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self._done_logged = bool(state.get("done_logged", False))
