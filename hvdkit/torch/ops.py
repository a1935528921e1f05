"""The core's FrameworkOps for PyTorch: LR/momentum access, checkpoint snapshots, and Horovod's state
broadcasts with a structure check first (or within a process set)."""

from __future__ import annotations

import hashlib
from typing import Any

import horovod.torch as hvd
import torch

from hvdkit.core.checkpoint_tree import UnsupportedValueError, join, split, tensor_bytes
from hvdkit.core.rng import capture_host_rng, restore_host_rng
from hvdkit.core.types import Snapshot
from hvdkit.torch.layout import broadcast_, describe_format, match_formats
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


def _describe(entry: Any) -> str:
    return "nothing" if entry is None else f"{entry[0]!r} ({entry[1]})"


def agree_on_layout(what: str, layout: list[tuple[Any, str]]) -> None:
    """Raise on every rank, naming the first difference, unless every rank's ``layout`` (a list of
    ``(name, description)``) is the same: a broadcast of differently named or shaped tensors waits forever.
    The matching case costs one allgather of a digest; only a mismatch gathers the layouts."""
    digest = hashlib.sha256(repr(layout).encode()).hexdigest()
    if len(set(hvd.allgather_object(digest, name=f"hvdkit.check.{what}"))) == 1:
        return
    layouts = hvd.allgather_object(layout, name=f"hvdkit.check.{what}.layout")
    for other, theirs in enumerate(layouts):
        for i in range(max(len(layouts[0]), len(theirs))):
            mine = layouts[0][i] if i < len(layouts[0]) else None
            their = theirs[i] if i < len(theirs) else None
            if mine != their:
                raise ValueError(
                    f"{what}: the ranks hold different structures, so the broadcast would wait forever: at position "
                    f"{i} rank 0 has {_describe(mine)} and rank {other} has {_describe(their)} (rank 0 has "
                    f"{len(layouts[0])} entries, rank {other} {len(theirs)}); build the same model and optimizer "
                    "on every rank")
    raise ValueError(f"{what}: the ranks hold different structures")  # digests differ only if layouts do


def _tensor_text(t: Any) -> str:
    if not isinstance(t, torch.Tensor):
        return type(t).__name__
    fmt = describe_format(t)  # the broadcast moves memory as it lies: every rank must lay it out alike
    return f"shape {list(t.shape)}, {t.dtype}" + ("" if fmt == "row-major" else f", {fmt}")


def broadcast_parameters(params: Any, root_rank: int) -> None:
    """Horovod's ``broadcast_parameters`` after checking every rank passes the same names, shapes, dtypes and
    memory formats; tensors in any memory format (channels_last too) are broadcast in place."""
    if isinstance(params, dict):
        items = sorted(params.items())
    elif isinstance(params, list):
        items = [p if isinstance(p, tuple) else (None, p) for p in params]
    else:
        raise ValueError(f"params must be a dict (a state_dict()) or a list of tensors or (name, tensor) pairs "
                         f"(list(model.named_parameters())), got {type(params).__name__}")
    agree_on_layout("broadcast_parameters", [(name, _tensor_text(t)) for name, t in items])
    broadcast_(items, root_rank)


def _state_layout(optimizer: torch.optim.Optimizer) -> list[tuple[str, Any]]:
    """Each parameter's optimizer state: its names and tensor shapes, dtypes and memory formats."""
    return [(f"param_groups[{i}].params[{j}]", sorted((str(k), _tensor_text(v)) for k, v in state.items()))
            for i, group in enumerate(optimizer.param_groups) for j, p in enumerate(group["params"])
            if (state := optimizer.state.get(p))]


def broadcast_optimizer_state(optimizer: torch.optim.Optimizer, root_rank: int, model: Any = None) -> None:
    """``root_rank``'s optimizer state and settings on every rank, after checking every rank has the same
    optimizer class, parameter groups (option names) and parameters (shapes, dtypes, memory formats).

    Where every rank's state has the same structure, its tensors are broadcast in place. Where it differs
    (only ``root_rank`` loaded a checkpoint), ``root_rank``'s whole ``state_dict()`` is sent and loaded.
    Unlike Horovod's, no optimizer step creates a state first: a fresh optimizer stays fresh (Adam's step
    count at 0, AdamW's weights not decayed), as its first step then builds the same state on every rank.
    ``model`` is accepted for Horovod's signature (sparse parameters need nothing special here)."""
    layout: list[tuple[Any, str]] = [("optimizer", type(optimizer).__name__)]
    for i, group in enumerate(optimizer.param_groups):
        options = sorted(k for k in group if k != "params")
        layout.append((f"param_groups[{i}]", f"options {options}"))
        layout += [(f"param_groups[{i}].params[{j}]", _tensor_text(p)) for j, p in enumerate(group["params"])]
    agree_on_layout("broadcast_optimizer_state", layout)
    digest = hashlib.sha256(repr(_state_layout(optimizer)).encode()).hexdigest()
    if len(set(hvd.allgather_object(digest, name="hvdkit.check.optimizer_state"))) > 1:
        state = hvd.broadcast_object(optimizer.state_dict() if hvd.rank() == root_rank else None, root_rank,
                                     name="hvdkit.state.optimizer_state_dict")
        if hvd.rank() != root_rank:
            load_optimizer_state(optimizer, state)
            match_formats(optimizer)
        return
    tensors: list[tuple[str, torch.Tensor]] = []
    values: dict[str, Any] = {}
    for i, group in enumerate(optimizer.param_groups):
        values[f"param_groups.{i}"] = {k: v for k, v in group.items() if k != "params"}
        for j, p in enumerate(group["params"]):
            for k, v in optimizer.state.get(p, {}).items():
                key = f"hvdkit.state.{i}.{j}.{k}"
                if isinstance(v, torch.Tensor):
                    tensors.append((key, v))
                else:
                    values[key] = v
    broadcast_(tensors, root_rank)
    values = hvd.broadcast_object(values, root_rank, name="hvdkit.state.optimizer_values")
    for i, group in enumerate(optimizer.param_groups):
        group.update(values.pop(f"param_groups.{i}"))
        for j, p in enumerate(group["params"]):
            for k in list(optimizer.state.get(p, {})):
                if f"hvdkit.state.{i}.{j}.{k}" in values:
                    optimizer.state[p][k] = values[f"hvdkit.state.{i}.{j}.{k}"]


def load_optimizer_state(optimizer: torch.optim.Optimizer, state_dict: dict[str, Any]) -> None:
    """torch's ``load_state_dict`` into the optimizer's own parameter-group dicts and state mapping.

    torch replaces both with new objects, but they are shared: Horovod's DistributedOptimizer is a new
    optimizer over the user's group dicts, and an LR scheduler holds the user's optimizer. Replaced, the
    user's optimizer and its scheduler would go on moving copies that no longer train."""
    groups, state = optimizer.param_groups, optimizer.state
    kept = list(groups)
    optimizer.load_state_dict(state_dict)
    for mine, loaded in zip(kept, optimizer.param_groups):
        mine.update(loaded)  # ``params`` is the same list; keys only the current group has stay
    groups[:] = kept
    state.clear()
    state.update(optimizer.state)
    optimizer.param_groups, optimizer.state = groups, state


def broadcast_within(model: torch.nn.Module, optimizer: torch.optim.Optimizer, root_rank: int,
                      process_set: Any) -> None:
    """``root_rank``'s parameters, buffers and optimizer state on every member of ``process_set``
    (Horovod's ``broadcast_parameters``/``broadcast_optimizer_state`` have no process-set argument).
    Every rank of the job calls it at the same point, each for its own set."""
    # Optimizer state through one world-wide allgather, as hvdkit.core.process_set does for objects; it also
    # lines every rank up before the first collective on a process set.
    states = hvd.allgather_object(optimizer.state_dict() if hvd.rank() == root_rank else None,
                                  name="hvdkit.state.optimizer")
    broadcast_([(f"hvdkit.state.{name}", t) for name, t in sorted(model.state_dict().items())], root_rank,
               process_set)
    if hvd.rank() != root_rank:
        load_optimizer_state(optimizer, states[root_rank])
        match_formats(optimizer)


def _optimizer_class(optimizer: torch.optim.Optimizer) -> str:
    """The optimizer's class (Horovod's DistributedOptimizer subclasses it under the same name)."""
    return type(optimizer).__name__


def check_optimizer_class(optimizer: torch.optim.Optimizer, saved: str | None, saved_groups: list[Any]) -> None:
    """Raise a ValueError naming both classes when a checkpoint's optimizer state is of another optimizer
    (by its recorded class, or for older checkpoints by its settings' names): torch would load it and
    fail at the first step with a KeyError from inside the optimizer."""
    mine = _optimizer_class(optimizer)
    keys = sorted(k for k in (saved_groups[0] if saved_groups else {}) if k not in ("params", "initial_lr"))
    own = sorted(k for k in optimizer.param_groups[0] if k not in ("params", "initial_lr"))
    if saved is not None and saved != mine:
        raise ValueError(f"it holds the state of optimizer class {saved}, but this run's optimizer is class {mine}: "
                         f"resume with {saved}, or start a fresh run for {mine} (another directory, or resume=False)")
    if saved is None and keys and keys != own:
        raise ValueError(f"it holds the state of an optimizer with settings {keys}, but this run's optimizer is class "
                         f"{mine}, with settings {own}: resume with the optimizer class it was written with")


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
                           "optimizer": {**self.optimizer.state_dict(), "class": _optimizer_class(self.optimizer)}}
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
