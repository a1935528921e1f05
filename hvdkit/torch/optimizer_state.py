"""Loading optimizer state into the optimizer a user holds, and refusing state written by another
optimizer class."""

from __future__ import annotations

from typing import Any

import torch


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


def optimizer_class(optimizer: torch.optim.Optimizer) -> str:
    """The optimizer's class (Horovod's DistributedOptimizer subclasses it under the same name)."""
    return type(optimizer).__name__


def check_optimizer_class(optimizer: torch.optim.Optimizer, saved: str | None, saved_groups: list[Any]) -> None:
    """Raise a ValueError naming both classes when a checkpoint's optimizer state is of another optimizer
    (by its recorded class, or for older checkpoints by its settings' names): torch would load it and
    fail at the first step with a KeyError from inside the optimizer."""
    mine = optimizer_class(optimizer)
    keys = sorted(k for k in (saved_groups[0] if saved_groups else {}) if k not in ("params", "initial_lr"))
    own = sorted(k for k in optimizer.param_groups[0] if k not in ("params", "initial_lr"))
    if saved is not None and saved != mine:
        raise ValueError(f"it holds the state of optimizer class {saved}, but this run's optimizer is class {mine}: "
                         f"resume with {saved}, or start a fresh run for {mine} (another directory, or resume=False)")
    if saved is None and keys and keys != own:
        raise ValueError(f"it holds the state of an optimizer with settings {keys}, but this run's optimizer is class "
                         f"{mine}, with settings {own}: resume with the optimizer class it was written with")


