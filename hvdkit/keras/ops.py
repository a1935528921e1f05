"""The core's FrameworkOps for Keras 3: LR, momentum correction, and checkpoint snapshots."""

from __future__ import annotations

import math
from typing import Any

import keras
import numpy as np

from hvdkit.core.checkpoint_tree import join, load_numpy, numpy_leaf, numpy_payload, split
from hvdkit.core.rng import capture_host_rng, restore_host_rng
from hvdkit.core.types import Snapshot
from hvdkit.keras.backend import current as backend

# Settings a resume puts back as attributes; the others shape the traced step (accumulation, EMA,
# clipping) or are not settings (the name; the LR is a variable, restored with the others).
_FIXED_SETTINGS = frozenset({"name", "learning_rate", "clipnorm", "clipvalue", "global_clipnorm", "use_ema",
                             "ema_overwrite_frequency", "gradient_accumulation_steps", "loss_scale_factor"})


def _inner(optimizer: keras.optimizers.Optimizer) -> keras.optimizers.Optimizer:
    """The optimizer that holds the LR and slots (inside a ``LossScaleOptimizer``, its inner one)."""
    return getattr(optimizer, "inner_optimizer", optimizer)


class KerasOps:
    """LR and momentum of the compiled optimizer; model, optimizer and RNG state for checkpoints."""

    name = "keras"

    def __init__(self, model: keras.Model) -> None:
        self.model = model
        self._restored_rng: dict[str, Any] | None = None

    @property
    def optimizer(self) -> keras.optimizers.Optimizer:
        """The model's compiled optimizer."""
        opt = getattr(self.model, "optimizer", None)
        if opt is None:
            raise ValueError("the model has no optimizer: call model.compile(optimizer=...) first")
        return opt

    @property
    def lr_in_momentum(self) -> bool:
        # Keras SGD: m = momentum*m - lr*g; var += m. Adam & co keep the LR outside their moments.
        """True for Keras SGD with momentum (its velocity holds the LR)."""
        opt = _inner(self.optimizer)
        return isinstance(opt, keras.optimizers.SGD) and float(opt.momentum) > 0

    def get_lr(self) -> float:
        """The optimizer's LR now (a Keras ``LearningRateSchedule``'s value at the current step)."""
        return float(keras.ops.convert_to_numpy(self.optimizer.learning_rate))

    def set_lr(self, lr: float) -> None:
        """Set the optimizer's LR. A Keras ``LearningRateSchedule`` owns its LR: setting the value it already
        has (a resume, which restores the step it is computed from) is nothing to do; anything else (hvdkit's LR
        callbacks, a rescale for another world size) is a TypeError rather than a silently replaced schedule."""
        if isinstance(_inner(self.optimizer)._learning_rate, keras.optimizers.schedules.LearningRateSchedule):
            now = self.get_lr()
            if math.isclose(lr, now, rel_tol=1e-6, abs_tol=1e-12):
                return
            raise TypeError(f"cannot set the learning rate to {lr:g}: a keras LearningRateSchedule gives it "
                            f"({now:g} now). hvdkit's LR callbacks (LearningRateWarmup, LearningRateSchedule) and "
                            "the linear rescaling after a world-size change need a float learning rate: build "
                            "the optimizer with a float and use hvdkit's LearningRateSchedule callback, or keep "
                            "the keras schedule without hvdkit's LR callbacks")
        self.optimizer.learning_rate = lr

    def scale_momentum(self, factor: float) -> None:
        """Multiply SGD's momentum buffers by ``factor``."""
        for v in getattr(_inner(self.optimizer), "momentums", []) or []:
            if v is not None:
                v.assign(v * factor)

    def weights_finite(self) -> bool:
        """True when every floating-point weight of the model is finite."""
        return all(np.isfinite(w).all() for w in self.model.get_weights() if np.issubdtype(w.dtype, np.floating))

    def hyperparameters(self) -> dict[str, Any]:
        """The optimizer's settings that a checkpoint holds (momentum, betas, ...), as plain values."""
        config = _inner(self.optimizer).get_config()
        return {k: v for k, v in config.items()
                if k not in _FIXED_SETTINGS and isinstance(v, (bool, int, float, str, type(None)))}

    def ensure_built(self) -> None:
        """Create the optimizer's variables now (before the first step)."""
        opt = self.optimizer
        if not opt.built:
            opt.build(self.model.trainable_variables)

    def capture(self) -> Snapshot:
        """Model weights, optimizer variables and RNG state as NumPy values."""
        self.ensure_built()
        return {
            "model": [np.asarray(w) for w in self.model.get_weights()],
            "optimizer": [keras.ops.convert_to_numpy(v) for v in self.optimizer.variables],
            "rng": {**capture_host_rng(), **backend.capture_rng()},
            "settings": self.hyperparameters(),  # Python attributes, not variables: saved beside them
        }

    def capture_staged(self) -> Snapshot:
        """:meth:`capture` (Keras hands out NumPy copies already; nothing to stage)."""
        return self.capture()

    def restore(self, snapshot: Snapshot) -> None:
        """Put a :meth:`capture` snapshot back."""
        self.model.set_weights(snapshot["model"])
        self.ensure_built()
        variables = self.optimizer.variables
        if len(variables) != len(snapshot["optimizer"]):
            raise ValueError(f"checkpoint holds {len(snapshot['optimizer'])} optimizer variables, the optimizer "
                             f"has {len(variables)}: was it saved with another optimizer?")
        for var, value in zip(variables, snapshot["optimizer"]):
            var.assign(value)
        inner = _inner(self.optimizer)
        for name, value in snapshot.get("settings", {}).items():
            if name not in _FIXED_SETTINGS and hasattr(inner, name):
                setattr(inner, name, value)
        rng = snapshot.get("rng")
        if rng:
            restore_host_rng(rng)
            backend.restore_rng(rng)
            self._restored_rng = rng

    def resume_rng(self) -> None:
        """Put the last restored RNG states back once more: Keras's ``fit`` draws from them before its first
        epoch (a look at the data to build the metrics), as the checkpointed run did before its epoch 0 only."""
        rng, self._restored_rng = self._restored_rng, None
        if rng is not None:
            restore_host_rng(rng)
            backend.restore_rng(rng)

    def broadcast_state(self, root_rank: int, process_set: Any = None) -> bool:
        """Every rank (or member of ``process_set``) gets ``root_rank``'s model and optimizer variables
        (slots included); False while the model has no variables yet (before a lazy model's first step)."""
        if not self.model.built or not self.model.variables:
            return False
        self.ensure_built()
        backend.broadcast_variables(list(self.model.variables) + list(self.optimizer.variables), root_rank,
                                    process_set)
        return True

    def dump(self, obj: Any) -> tuple[Any, Any]:
        """``obj`` as a JSON tree plus a payload that writes its arrays as safetensors (format 4:
        docs/checkpoint-format.md); raises ``UnsupportedValueError`` naming any part that is neither."""
        tree, arrays = split(obj, numpy_leaf)
        return tree, numpy_payload(arrays)

    def loads(self, tree: Any, data: bytes) -> Any:
        """Rebuild what :meth:`dump` gave (plain data and arrays only, never code from the file)."""
        return join(tree, load_numpy(data))
