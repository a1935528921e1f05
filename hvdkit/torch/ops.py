"""The core's FrameworkOps for PyTorch: LR/momentum access, checkpoint snapshots and their tensors as
safetensors, and the state broadcast the core asks for."""

from __future__ import annotations

from typing import Any

import torch

from hvdkit.core.checkpoint_tree import UnsupportedValueError, join, split, tensor_bytes
from hvdkit.core.rng import capture_host_rng, restore_host_rng
from hvdkit.core.types import Snapshot
from hvdkit.torch.broadcast import broadcast_optimizer_state, broadcast_parameters, broadcast_within
from hvdkit.torch.layout import match_formats
from hvdkit.torch.optimizer_state import check_optimizer_class, load_optimizer_state, optimizer_class
from hvdkit.torch.precision import Precision
from hvdkit.torch.staging import HostStaging


def _tensor_leaf(o: Any) -> tuple[torch.Tensor, bool] | None:
    if not isinstance(o, torch.Tensor):
        return None
    t = o.detach()
    if t.layout != torch.strided:
        raise UnsupportedValueError(f"a {t.layout} tensor (safetensors holds dense tensors; store it .to_dense())")
    if t.device.type != "cpu":
        t = t.cpu()
    return t.contiguous(), False


def dump_tensors(obj: Any) -> tuple[Any, Any]:
    """``obj`` as a checkpoint's JSON tree and a payload that writes its tensors as safetensors."""
    from safetensors.torch import save_file

    tree, tensors = split(obj, _tensor_leaf)
    return tree, lambda path: save_file(tensors, str(path))


def load_tensors(tree: Any, data: Any) -> Any:
    """What :func:`dump_tensors` wrote: only tensors and plain data are built, never code from the file.
    The tensors are writable views of ``data`` (:func:`~hvdkit.core.checkpoint_tree.tensor_bytes`)."""
    return join(tree, {k: torch.from_numpy(raw).view(getattr(torch, name)).reshape(shape)
                       for k, (name, shape, raw) in tensor_bytes(data).items()})


class TorchOps:
    """Reads and sets optimizer LR/momentum and captures/restores model, optimizer and RNG state."""

    name = "torch"
    lr_in_momentum = False  # torch SGD: v = m*v + g; p -= lr*v (the LR stays outside the buffer)

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                 precision: Precision | None = None) -> None:
        self.model = model
        self.optimizer = optimizer
        self.precision = precision
        self.staging = HostStaging()
        # the optimizer step is what changes parameters and optimizer state: it waits for a staged copy
        optimizer.register_step_pre_hook(lambda *_: self.staging.wait())

    def get_lr(self) -> float:
        """The first parameter group's LR (hvdkit sets every group alike)."""
        return float(self.optimizer.param_groups[0]["lr"])

    def set_lr(self, lr: float) -> None:
        """Set every parameter group's LR."""
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def scale_momentum(self, factor: float) -> None:
        """Not needed for torch optimizers (the LR is outside the buffer); kept for the interface."""

    def comm_wait_seconds(self) -> float | None:
        """Seconds the optimizer has blocked waiting for the gradients' allreduce, summed since it was built
        (None for an optimizer that does not measure it: Adasum's)."""
        return getattr(self.optimizer, "_hvdkit_comm_wait", None)

    def weights_finite(self) -> bool:
        """True when every parameter and floating-point buffer is finite (one fused max-abs)."""
        tensors = [t.detach() for t in [*self.model.parameters(), *self.model.buffers()] if t.is_floating_point()]
        return not tensors or bool(torch.isfinite(torch.nn.utils.get_total_norm(tensors, float("inf"))))

    def hyperparameters(self) -> dict[str, Any]:
        """The optimizer's settings other than the LR (the first parameter group's: hvdkit sets every group
        alike), as plain values."""
        group = self.optimizer.param_groups[0]
        plain = (bool, int, float, str, tuple, type(None))
        return {k: list(v) if isinstance(v, tuple) else v for k, v in group.items()
                if k not in ("params", "lr", "initial_lr") and isinstance(v, plain)}

    def _state(self) -> Snapshot:
        """Model and optimizer state (with the optimizer's class, so a resume with another optimizer fails
        naming both, not inside torch) and, under fp16, the loss scaler's."""
        state: Snapshot = {"model": self.model.state_dict(),
                           "optimizer": {**self.optimizer.state_dict(), "class": optimizer_class(self.optimizer)}}
        scaler = self.precision.state_dict() if self.precision is not None else {}
        if scaler:  # fp16: the loss scale and its growth tracker resume too
            state["grad_scaler"] = scaler
        return state

    def capture(self) -> Snapshot:
        """Model, optimizer and RNG state, every tensor copied to host memory (training may go on)."""
        snapshot: Snapshot = HostStaging().stage(self._state(), ())
        snapshot["rng"] = {"torch": torch.get_rng_state(), **capture_host_rng()}
        return snapshot

    def capture_staged(self) -> Snapshot:
        """:meth:`capture` for a snapshot written once and dropped before the next (an asynchronous
        checkpoint), copied through :mod:`hvdkit.torch.staging`; the next optimizer step,
        :meth:`restore`, :meth:`broadcast_state` and :meth:`dump` wait for the copy."""
        deferred: list[torch.Tensor] = list(self.model.parameters())
        deferred += [t for s in self.optimizer.state.values() for t in s.values() if isinstance(t, torch.Tensor)]
        snapshot: Snapshot = self.staging.stage(self._state(), deferred)
        snapshot["rng"] = {"torch": torch.get_rng_state(), **capture_host_rng()}
        return snapshot

    def restore(self, snapshot: Snapshot) -> None:
        """Put a :meth:`capture` snapshot back."""
        self.staging.wait()
        optimizer = dict(snapshot["optimizer"])
        check_optimizer_class(self.optimizer, optimizer.pop("class", None), optimizer.get("param_groups") or [])
        self.model.load_state_dict(snapshot["model"])
        load_optimizer_state(self.optimizer, optimizer)
        match_formats(self.optimizer)  # checkpoints hold row-major tensors; the state follows its parameter
        if self.precision is not None and snapshot.get("grad_scaler"):
            self.precision.load_state_dict(snapshot["grad_scaler"])
        rng = snapshot.get("rng")
        if rng:
            torch.set_rng_state(rng["torch"])
            restore_host_rng(rng)

    def broadcast_state(self, root_rank: int, process_set: Any = None) -> None:
        """Every rank (or every member of ``process_set``) gets ``root_rank``'s parameters, buffers and
        optimizer state."""
        self.staging.wait()
        if process_set is not None:
            broadcast_within(self.model, self.optimizer, root_rank, process_set)
            return
        broadcast_parameters(self.model.state_dict(), root_rank=root_rank)
        broadcast_optimizer_state(self.optimizer, root_rank=root_rank)

    def dump(self, obj: Any) -> tuple[Any, Any]:
        """``obj`` as a JSON tree plus a payload that writes its tensors as safetensors (format 4:
        docs/checkpoint-format.md); raises ``UnsupportedValueError`` naming any part that is neither."""
        self.staging.wait()  # a capture_staged snapshot is complete
        return dump_tensors(obj)

    def loads(self, tree: Any, data: Any) -> Any:
        """Rebuild what :meth:`dump` gave from the JSON tree and the safetensors file's bytes."""
        return load_tensors(tree, data)
