"""Elastic training for Keras 3: Horovod's elastic driver with hvdkit's engine and callbacks.

Run it under ``horovodrun --min-np/--max-np --host-discovery-script`` (``hvdkit elastic-local``
on one machine)::

    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.01 * hk.size())), loss=...)
    model.build(x.shape)
    history = hk.fit_elastic(model, x, y, epochs=10, batch_size=32, commit_every=10,
                             callbacks=[LearningRateWarmup(warmup_epochs=2), Checkpoint("ckpt/")])

Horovod's ``TensorFlowKerasState`` is built on ``horovod.tensorflow.keras``, which fails with
Keras 3, and its ``TensorFlowState`` broadcasts when it is created (a collective before the
elastic sync, the deadlock of horovod#2652) and not in ``sync`` under eager execution. So the
state here is Horovod's ``ObjectState`` (commit/rollback of plain values, broadcast from rank 0
at each sync) plus the model's and optimizer's variables, hvdkit's counters, callback states and
LR (:class:`~hvdkit.core.elastic.ElasticProgress`) and the data position
(:class:`~hvdkit.core.elastic_sampler.ElasticIndexSampler`).

Each epoch is one ``model.fit`` call over this worker's share of the samples not yet trained in
that epoch; after a failure or a host change the survivors roll back to the last commit and the
rest of the epoch is dealt out over the new set of workers. Plain Keras callbacks passed in see
one ``fit`` per epoch (``on_train_begin`` every epoch); hvdkit's callbacks see one training run.
After a reset mid-epoch, that epoch's logged loss covers the steps since the reset.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import horovod.tensorflow as hvd
import keras
import numpy as np
import tensorflow as tf
from horovod.common.elastic import ObjectState, run_fn
from horovod.common.exceptions import HorovodInternalError

from hvdkit.core.elastic import ElasticProgress
from hvdkit.core.elastic_sampler import ElasticIndexSampler
from hvdkit.core.validation import check_int
from hvdkit.keras.callbacks.bridge import EngineBridge, engine_for
from hvdkit.keras.ops import KerasOps
from hvdkit.keras.optimizer import is_distributed
from hvdkit.tensorflow.variables import broadcast_variables, to_tf_variables


class ElasticState(ObjectState):
    """Model and optimizer variables, hvdkit's progress and the sampler, committed together."""

    def __init__(self, model: keras.Model, sampler: ElasticIndexSampler, progress: ElasticProgress) -> None:
        ops = KerasOps(model)
        ops.ensure_built()
        self._vars = to_tf_variables(list(model.variables) + list(ops.optimizer.variables))
        self._sampler, self._progress = sampler, progress
        self._save_variables()
        super().__init__(bcast_object=hvd.broadcast_object, get_rank=hvd.rank,
                         hvdkit=progress.snapshot(), sampler=sampler.state_dict())

    def _save_variables(self) -> None:
        self._values = [v.numpy() for v in self._vars]

    def _apply(self) -> None:
        self._sampler.load_state_dict(self.sampler)
        self._progress.apply(self.hvdkit)

    def save(self) -> None:
        self._save_variables()
        self.hvdkit = self._progress.snapshot()
        self.sampler = self._sampler.state_dict()
        super().save()

    def restore(self) -> None:  # a collective failed: back to the last commit
        self._progress.failure_noticed()
        for var, value in zip(self._vars, self._values):
            var.assign(value)
        super().restore()
        self._apply()

    def sync(self) -> None:  # rank 0's committed state to every worker (new ones included)
        broadcast_variables(self._vars, root_rank=0)
        self._save_variables()
        super().sync()
        self._apply()


def run(func: Any) -> Any:
    """Horovod's elastic retry loop, for functions that call ``model.fit``.

    A worker's death surfaces as a TensorFlow op error from a Horovod op (the allreduce inside
    the train step, the broadcast in a commit); Horovod's own ``horovod.tensorflow.elastic.run``
    only recognises some op names, so any Horovod op error here counts as a failure.
    """
    from horovod.tensorflow.elastic import _reset

    def wrapper(state: ElasticState, *args: Any, **kwargs: Any) -> Any:
        try:
            return func(state, *args, **kwargs)
        except tf.errors.OpError as e:
            if "Horovod" in (e.message or ""):
                raise HorovodInternalError(e) from e
            raise

    return run_fn(wrapper, _reset)


class _ElasticDriver(EngineBridge):
    """Drives the engine from one ``fit`` per epoch (segment) and commits every N steps.

    Counters come from the engine's state, so a segment that starts mid-epoch after a reset
    continues the epoch's batch index and the global step where the commit left them.
    """

    def __init__(self, progress: ElasticProgress, sampler: ElasticIndexSampler, batch_size: int) -> None:
        super().__init__(None)
        self.progress, self.sampler, self.batch_size = progress, sampler, batch_size
        self.elastic_state: ElasticState | None = None
        self._offset = 0

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        pass  # fit_elastic calls the engine's train_begin once for the whole run

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        s = self.engine.state
        self._offset, self._epoch_base, self._batches = s.batch, s.global_step, 0
        if s.batch == 0:
            self.engine.epoch_begin(epoch)
            self._offset = 0

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        s = self.engine.state
        if batch > 0:  # counters = the steps completed so far; commit them when due
            s.batch, s.global_step = self._offset + batch, self._epoch_base + batch
            if self.progress.should_commit():
                self.sampler.record(batch, self.batch_size)
                assert self.elastic_state is not None
                self.elastic_state.commit()  # may raise HostsUpdatedInterrupt: fit stops, the driver resets
        self._batches = batch + 1
        self.engine.batch_begin(self._offset + batch, global_step=self._epoch_base + batch)

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        super().on_train_batch_end(batch, logs)
        self.progress.step_done()

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        pass  # one fit per epoch: the run ends in fit_elastic


def _take(data: Any, idx: np.ndarray) -> Any:
    if isinstance(data, dict):
        return {k: _take(v, idx) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return type(data)(_take(v, idx) for v in data)
    return np.asarray(data)[idx]


def _num_samples(data: Any) -> int:
    if isinstance(data, dict):
        data = next(iter(data.values()))
    elif isinstance(data, list | tuple):
        data = data[0]
    if not hasattr(data, "__len__"):
        raise TypeError(f"x and y must be arrays (or lists/dicts of arrays) with a length, got {type(data).__name__}")
    return len(data)


def fit_elastic(model: keras.Model, x: Any, y: Any, *, epochs: int, batch_size: int,
                callbacks: Iterable[keras.callbacks.Callback] = (), commit_every: int = 10, shuffle: bool = True,
                seed: int = 0, verbose: int | str = "auto") -> keras.callbacks.History:
    """Train ``model`` on in-memory arrays ``x``, ``y``, surviving workers that leave or join.

    Returns a Keras ``History`` whose ``history`` holds every epoch of this run (one entry per
    epoch, averaged over workers when ``MetricAverage`` is among the callbacks). The progress
    object (resets, recovery times) is ``model._hvdkit_engine.elastic``.
    """
    check_int("epochs", epochs, minimum=1)
    check_int("batch_size", batch_size, minimum=1)
    if not is_distributed(getattr(model, "optimizer", None)):
        raise ValueError("model must be compiled with hvdkit.keras.DistributedOptimizer(...) for fit_elastic, got "
                         f"optimizer {type(getattr(model, 'optimizer', None)).__name__}")
    if not model.built:
        raise ValueError("model must be built before fit_elastic: call model.build(input_shape) (every worker "
                         "needs the same variables before the first sync)")
    n = _num_samples(x)
    if _num_samples(y) != n:
        raise ValueError(f"x and y must hold the same number of samples, got {n} and {_num_samples(y)}")
    callbacks = list(callbacks)
    engine, s = engine_for(model), engine_for(model).state
    progress = ElasticProgress(engine, commit_every)
    sampler = ElasticIndexSampler(n, shuffle=shuffle, seed=seed)
    driver = _ElasticDriver(progress, sampler, batch_size)
    for cb in [*callbacks, driver]:
        if isinstance(cb, EngineBridge):
            cb.set_model(model)  # registers hvdkit's core callbacks on the engine before train_begin
    engine.driver = driver  # type: ignore[attr-defined]  # the other bridges only register

    def steps_per_epoch() -> int:
        return math.ceil(n / (batch_size * hvd.size()))

    s.extra["elastic"] = True
    engine.elastic = progress  # type: ignore[attr-defined]
    engine.train_begin(epochs, steps_per_epoch=steps_per_epoch())  # rank 0 may resume a checkpoint here
    sampler.set_epoch(s.epoch)
    state = ElasticState(model, sampler, progress)
    state.register_reset_callbacks([progress.on_reset])
    driver.elastic_state = state
    start = s.epoch

    @run
    def train(state: ElasticState) -> None:
        while s.epoch < epochs:
            s.steps_per_epoch = steps_per_epoch()
            idx = sampler.layout(hvd.rank(), hvd.size())
            if len(idx):
                model.fit(_take(x, idx), _take(y, idx), batch_size=batch_size, epochs=s.epoch + 1,
                          initial_epoch=s.epoch, shuffle=False, callbacks=[*callbacks, driver], verbose=verbose)
            else:  # a commit after the epoch's last step: only its end is left
                engine.epoch_end({})
            sampler.set_epoch(s.epoch)
            state.commit()
            if s.stop_training:
                break

    try:
        train(state)
        engine.train_end()
    finally:
        engine.driver = None  # type: ignore[attr-defined]
        engine.dispatcher.callbacks.clear()
    history = keras.callbacks.History()
    history.set_model(model)
    history.epoch = list(range(start, s.epoch))
    history.history = {k: list(v) for k, v in s.history.items()}
    return history
