"""Elastic training for Keras 3: what the core's :class:`~hvdkit.core.elastic.loop.ElasticLoop` needs
from Keras. Run it under ``horovodrun --min-np/--max-np --host-discovery-script`` (``hvdkit
elastic-local`` on one machine)::

    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.01 * hk.size())), loss=...)
    model.build(x.shape)
    history = hk.fit_elastic(model, x, y, epochs=10, batch_size=32, commit_every=10,
                             callbacks=[LearningRateWarmup(warmup_epochs=2), Checkpoint("ckpt/")])

The state is Horovod's ``ObjectState`` over the model's and optimizer's variables plus the loop's snapshot
(Horovod's ``TensorFlowKerasState`` fails on Keras 3; its ``TensorFlowState`` broadcasts when created, a
collective before the elastic sync). An epoch's remaining steps run as one ``model.fit`` over this worker's
share: plain Keras callbacks see one ``fit`` per such call, hvdkit's callbacks one training run.
It runs on either Keras backend: the broadcasts and Horovod's retry loop are the backend's
(:mod:`hvdkit.keras.backend`), the rest is Keras 3.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import keras
import numpy as np
from horovod.common.elastic import ObjectState

from hvdkit.core.elastic.loop import ElasticLoop
from hvdkit.core.elastic.state import LoopCommit
from hvdkit.core.history import History
from hvdkit.core.rows import map_leaves, num_rows
from hvdkit.keras.backend import current as _backend
from hvdkit.keras.engine_bridge import EngineBridge, KerasLogs, engine_for, scalar_logs, val_logs
from hvdkit.keras.ops import KerasOps
from hvdkit.keras.optimizer import is_distributed


class KerasVariablesState(ObjectState):
    """A Horovod ``ObjectState`` over a Keras 3 model's and optimizer's variables (and any ``kwargs``):
    ``commit`` copies them to host memory, ``restore`` puts the copy back, ``sync`` broadcasts rank 0's.
    Nothing is broadcast when it is created (only the elastic sync may)."""

    def __init__(self, model: keras.Model, optimizer: keras.optimizers.Optimizer | None = None,
                 **kwargs: Any) -> None:
        ops = KerasOps(model)
        optimizer = optimizer if optimizer is not None else ops.optimizer
        if not optimizer.built:
            optimizer.build(model.trainable_variables)
        self.model, self.optimizer = model, optimizer
        self._vars = list(model.variables) + list(optimizer.variables)
        self._values = self._copies()
        super().__init__(bcast_object=_backend.hvd.broadcast_object, get_rank=_backend.hvd.rank, **kwargs)

    def _copies(self) -> list[np.ndarray]:
        # convert_to_numpy copies (np.array): a view of a torch variable on the CPU would follow its updates
        return [keras.ops.convert_to_numpy(v) for v in self._vars]

    def save(self) -> None:
        """Commit: copy the variables' values to host memory, then the plain values."""
        self._values = self._copies()
        super().save()

    def restore(self) -> None:
        """Roll the variables and the plain values back to the last commit."""
        for var, value in zip(self._vars, self._values):
            var.assign(value)
        super().restore()

    def sync(self) -> None:
        """Rank 0's variables and plain values to every worker."""
        _backend.broadcast_variables(self._vars, root_rank=0)
        self._values = self._copies()
        super().sync()


class KerasElasticState(LoopCommit, KerasVariablesState):
    """The model's and optimizer's variables plus the elastic loop's snapshot, committed together."""

    def __init__(self, model: keras.Model, loop: ElasticLoop) -> None:
        self._loop = loop
        super().__init__(model, hvdkit=loop.snapshot())


class _StepHooks(keras.callbacks.Callback):
    """Tells the elastic loop where each step of one ``fit`` call begins and ends."""

    async_safe = True  # step_end moves no counter (the loop knows: batch_end_in_step is False)

    def __init__(self, loop: ElasticLoop) -> None:
        super().__init__()
        self.loop = loop
        self.epoch_logs: dict[str, float] = {}

    def on_train_batch_begin(self, batch: int, logs: KerasLogs = None) -> None:
        self.loop.step_begin(batch)  # may commit, and raise HostsUpdatedInterrupt: fit stops, Horovod resets

    def on_train_batch_end(self, batch: int, logs: KerasLogs = None) -> None:
        self.loop.step_end(batch, logs)
        if self.loop.engine.state.stop_training:
            self.model.stop_training = True

    def on_test_begin(self, logs: KerasLogs = None) -> None:
        self.loop.engine.eval_begin()

    def on_test_end(self, logs: KerasLogs = None) -> None:
        self.loop.engine.eval_end(val_logs(logs))

    def on_epoch_end(self, epoch: int, logs: KerasLogs = None) -> None:
        self.epoch_logs = scalar_logs(logs)


def _rows_at(data: Any, idx: Sequence[int]) -> Any:
    return map_leaves(data, lambda a: np.asarray(a)[np.asarray(idx)])


class KerasElasticAdapter:
    """The :class:`~hvdkit.core.elastic.loop.ElasticAdapter` for a compiled Keras model on in-memory arrays."""

    batch_end_in_step = False  # Keras may run batch-end hooks later, on another thread

    def __init__(self, model: keras.Model, x: Any, y: Any, callbacks: list[keras.callbacks.Callback],
                 verbose: int | str, validation_data: Any = None) -> None:
        self.model, self.x, self.y, self.callbacks, self.verbose = model, x, y, callbacks, verbose
        self.validation_data = validation_data

    def make_state(self, loop: ElasticLoop) -> KerasElasticState:
        """The elastic state over this model's variables."""
        return KerasElasticState(self.model, loop)

    def run(self, func: Callable[[KerasElasticState], None]) -> Callable[[KerasElasticState], None]:
        """Horovod's retry loop for this backend (on TensorFlow, counting any Horovod op error as a failure)."""
        return _backend.elastic_run(func)

    def train_steps(self, loop: ElasticLoop, indices: Sequence[int]) -> dict[str, float]:
        """One ``model.fit`` over this worker's ``indices``; returns its epoch logs."""
        hooks = _StepHooks(loop)
        epoch = loop.engine.state.epoch
        self.model.fit(_rows_at(self.x, indices), _rows_at(self.y, indices), batch_size=loop.batch_size,
                       epochs=epoch + 1, initial_epoch=epoch, shuffle=False, callbacks=[*self.callbacks, hooks],
                       verbose=self.verbose, validation_data=self.validation_data)
        return hooks.epoch_logs


def fit_elastic(model: keras.Model, x: Any, y: Any = None, *, epochs: int, batch_size: int,
                validation_data: Any = None, callbacks: Iterable[keras.callbacks.Callback] = (),
                commit_every: int = 10, shuffle: bool = True, seed: int = 0, verbose: int | str = "auto") -> History:
    """Train ``model`` on in-memory arrays ``x``, ``y``, surviving workers that leave or join; the same
    shape as :func:`hvdkit.torch.fit_elastic`.

    ``validation_data`` (``(x_val, y_val)``, as for ``model.fit``) is evaluated by every worker at each
    epoch's end, between ``on_eval_begin`` and ``on_eval_end``; its results join the logs as ``val_*``.
    Returns hvdkit's :class:`~hvdkit.core.history.History`, as :func:`hvdkit.torch.fit_elastic` does:
    ``history`` holds every epoch of this run (averaged over workers when ``MetricAverage`` is among the
    callbacks) and ``elastic`` the loop's resets and recovery times.
    """
    if y is None:
        raise ValueError("y must be the targets for x (an array, or a list/dict of arrays), got None")
    if validation_data is not None and (not isinstance(validation_data, tuple | list) or
                                        len(validation_data) not in (2, 3)):
        raise ValueError("validation_data must be (x_val, y_val) or (x_val, y_val, sample_weight), as for "
                         f"model.fit, got {type(validation_data).__name__}")
    if not is_distributed(getattr(model, "optimizer", None)):
        raise ValueError("model must be compiled with hvdkit.keras.DistributedOptimizer(...) for fit_elastic, got "
                         f"optimizer {type(getattr(model, 'optimizer', None)).__name__}")
    if not model.built:
        raise ValueError("model must be built before fit_elastic: call model.build(input_shape) (every worker "
                         "needs the same variables before the first sync)")
    per_call = getattr(model, "steps_per_execution", 1) or 1
    if per_call != 1:  # Keras's batch hooks then run once per execution, and the commits fall between steps
        raise ValueError(f"fit_elastic commits and recovers at steps, so the model must be compiled with "
                         f"steps_per_execution=1, got {per_call}")
    n = num_rows(x, "x")
    if num_rows(y, "y") != n:
        raise ValueError(f"x and y must hold the same number of samples, got {n} and {num_rows(y, 'y')}")
    callbacks = list(callbacks)
    engine = engine_for(model)
    loop = ElasticLoop(engine, n, epochs=epochs, batch_size=batch_size, commit_every=commit_every, shuffle=shuffle,
                       seed=seed)
    for cb in callbacks:
        if isinstance(cb, EngineBridge):
            cb.set_model(model)  # registers hvdkit's core callbacks on the engine before train_begin
    try:
        return loop.run(KerasElasticAdapter(model, x, y, callbacks, verbose, validation_data))
    finally:
        engine.dispatcher.clear()  # the next fit registers the callbacks it is given
