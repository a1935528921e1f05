"""Horovod's parameter and optimizer-state broadcasts, with a structure check first: ranks that hold
different structures would otherwise wait in the broadcast forever."""

from __future__ import annotations

import hashlib
from typing import Any

import horovod.torch as hvd
import torch

from hvdkit.torch.layout import broadcast_, describe_format, match_formats
from hvdkit.torch.optimizer_state import load_optimizer_state


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
        # the class's settings: keys a scheduler added (initial_lr, max_lr) to a group rank 0 loaded are no mismatch
        options = sorted(k for k in group if k in optimizer.defaults)
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


