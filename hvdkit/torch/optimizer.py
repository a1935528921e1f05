"""Horovod's DistributedOptimizer made to behave like the torch optimizer it wraps.

Horovod 0.28.1's optimizer predates PyTorch 2: ``zero_grad`` takes no ``set_to_none``, a parameter group
added later (``add_param_group``) or a parameter unfrozen later gets no gradient hook and is never averaged,
a parameter frozen later is still averaged as zeros (so momentum and weight decay move it), new parameter
groups take the optimizer class's default settings rather than the user's, the wrapped optimizer's state
(a loaded checkpoint's, the one just broadcast) is dropped, and a gradient in another
memory format than row-major (channels_last) is refused. :func:`torch_compatible` fixes these on the
optimizer Horovod built, keeping everything else of Horovod's.
"""

from __future__ import annotations

import os
import sys
import time
import weakref
from typing import Any

import horovod.torch as hvd
import torch

from hvdkit.core.hang_report import optimizer_step
from hvdkit.torch.layout import RowMajor, row_major_alias, same_format

_ZERO_GRAD_RACE = ("optimizer.zero_grad() was called after loss.backward() but before optimizer.step() or "
                   "optimizer.synchronize(); call it before the backward pass or after the step")


def _zero_grad(self: Any, set_to_none: bool = True) -> None:
    """torch's ``zero_grad(set_to_none=True)``; refused while gradients are being averaged."""
    if self._handles:
        raise AssertionError(_ZERO_GRAD_RACE)
    super(self.__class__, self).zero_grad(set_to_none=set_to_none)


def _hooks_on(self: Any) -> bool:
    """Whether Horovod averages through gradient hooks here (it does not with one worker, outside elastic)."""
    return bool(self.process_set.included() and (hvd.size() > 1 or os.environ.get("HOROVOD_ELASTIC") == "1"))


def _track(self: Any) -> None:
    """Average every parameter that requires a gradient now, and none that does not: hooks for parameters
    added or unfrozen since, and frozen ones left out (torch's optimizers skip a parameter without a grad)."""
    hooked = self.__dict__.setdefault("_hvdkit_hooked", set(self._requires_update))
    for i, group in enumerate(self.param_groups):
        for j, p in enumerate(group["params"]):
            if not p.requires_grad:
                if p not in self._handles:
                    self._requires_update.discard(p)
                continue
            if p not in hooked:
                # a name every rank gives alike: the model's when it has one, else the parameter's position
                self._parameter_names.setdefault(p, f"hvdkit.param_groups.{i}.params.{j}")
                self._allreduce_delay.setdefault(p, self.backward_passes_per_step)
                grad_acc = p.expand_as(p).grad_fn.next_functions[0][0]
                grad_acc.register_hook(self._make_hook(p))
                self._grad_accs.append(grad_acc)
                hooked.add(p)
            self._requires_update.add(p)


def _add_param_group(self: Any, param_group: dict[str, Any]) -> None:
    """torch's ``add_param_group``; the new parameters are averaged like the others."""
    super(self.__class__, self).add_param_group(param_group)
    if _hooks_on(self):
        _track(self)


def _synchronize(self: Any) -> None:
    """Horovod's ``synchronize`` over the parameters that require a gradient now; the time it blocks (the
    wait for the other ranks' gradients) adds to ``_hvdkit_comm_wait``, which ``StepTiming`` reads."""
    if _hooks_on(self):
        _track(self)
    start = time.perf_counter()
    self._hvdkit_horovod.synchronize(self)
    self._hvdkit_comm_wait += time.perf_counter() - start
    optimizer_step()


def _allreduce_grad_async(self: Any, p: torch.Tensor) -> Any:
    """Horovod's, with the gradient in the parameter's memory format on every rank: a rank that did not use
    ``p`` this step averages zeros laid out as the others' gradients (Horovod's zeros are row-major)."""
    grad = p.grad
    if grad is None:
        p.grad = torch.zeros_like(p, memory_format=torch.preserve_format)
    elif grad.layout == torch.strided and not same_format(grad, p) and row_major_alias(p) is not None:
        p.grad = torch.empty_like(p, memory_format=torch.preserve_format).copy_(grad)
    return self._hvdkit_horovod._allreduce_grad_async(self, p)


def _retire_earlier(optimizer: Any) -> None:
    """A parameter averaged by an earlier distributed optimizer (the model distributed again, with a new
    optimizer) keeps that optimizer's gradient hook, which would allreduce it a second time under the same
    name: the earlier optimizer leaves it (its hook counts down from ``sys.maxsize`` and never reduces)."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            earlier = getattr(p, "_hvdkit_averaged_by", lambda: None)()
            if earlier is not None and earlier is not optimizer and p in earlier._allreduce_delay:
                earlier._allreduce_delay[p] = sys.maxsize
                earlier._requires_update.discard(p)
                earlier._handles.pop(p, None)
            p._hvdkit_averaged_by = weakref.ref(optimizer)


_AVERAGING = {"zero_grad": _zero_grad, "add_param_group": _add_param_group, "synchronize": _synchronize,
              "_allreduce_grad_async": _allreduce_grad_async}
_ADASUM = {"zero_grad": _zero_grad}


def torch_compatible(optimizer: Any, wrapped: torch.optim.Optimizer | None = None) -> Any:
    """``optimizer`` (what ``hvd.DistributedOptimizer(wrapped, ...)`` returned) with the methods above, its
    compression handed row-major aliases (:class:`~hvdkit.torch.layout.RowMajor`), and ``wrapped``'s state and
    its defaults for groups added later. Horovod's class is flat (its methods call ``super(self.__class__,
    self)``), so the new class copies its namespace rather than subclassing it. Applied once."""
    if "_hvdkit_horovod" in type(optimizer).__dict__:
        return optimizer
    if not isinstance(optimizer._compression, RowMajor):
        optimizer._compression = RowMajor(optimizer._compression)
    horovod_cls = type(optimizer)
    overrides = _ADASUM if hasattr(optimizer, "_starting_models") else _AVERAGING
    namespace = {k: v for k, v in horovod_cls.__dict__.items() if k not in ("__dict__", "__weakref__")}
    namespace.update(overrides)
    namespace["_hvdkit_horovod"] = horovod_cls
    if overrides is _AVERAGING:
        namespace["_hvdkit_comm_wait"] = 0.0  # seconds blocked in synchronize, summed (an instance's own once set)
    optimizer.__class__ = type(horovod_cls.__name__, horovod_cls.__bases__, namespace)
    if overrides is _AVERAGING:
        _retire_earlier(optimizer)
    if wrapped is not None:
        optimizer.defaults = dict(wrapped.defaults)
        optimizer.state = wrapped.state  # Horovod's constructor starts an empty state: keep a loaded or broadcast one
        # An LR scheduler built on ``wrapped`` (the Trainer's users do) checks that ``wrapped`` stepped before it,
        # by the flag its step wrapper sets; these steps are wrapped's, so set it too, or torch warns falsely.
        optimizer.register_step_post_hook(lambda *_: setattr(wrapped, "_opt_called", True))
    return optimizer
