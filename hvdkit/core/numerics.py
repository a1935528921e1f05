"""What a training step does when its averaged gradients, or a rank's loss, hold a NaN or an inf:
``nonfinite=`` policies.

Adapters check the gradients after the allreduce, where every rank holds the same averaged values, so
every rank reaches the same decision. A loss can be NaN while its gradients are finite (a NaN term that
does not depend on the weights): the PyTorch Trainer sums a flag per rank beside the gradients' allreduce
for it. Only on a step that fails do the ranks exchange one flag each (was this rank's own loss finite?),
so that the message names the rank(s) the NaN came from.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from hvdkit.core.comm import Comm
from hvdkit.core.validation import check_choice

log = logging.getLogger("hvdkit")

#: The values ``nonfinite=`` accepts: raise on every rank, skip the update on every rank, or apply it with a warning.
NONFINITE_POLICIES = ("stop", "skip", "warn")


class NonFiniteError(FloatingPointError):
    """Training stopped at a step whose averaged gradients, or a rank's loss, were NaN or inf
    (``nonfinite="stop"``)."""


def check_nonfinite(value: object) -> str:
    """``value`` if it is one of :data:`NONFINITE_POLICIES`, else a ValueError naming it."""
    return check_choice("nonfinite", value, NONFINITE_POLICIES)


#: The words every adapter uses, so that a non-finite step reads the same everywhere (TensorFlow's in-graph
#: version joins them as tensors: it cannot call :func:`apply_policy`).
STOPPED = ("Training stopped on every rank before the update (nonfinite={stop}), so the weights and the last "
           "checkpoint are finite; nonfinite={skip} skips such steps, nonfinite={warn} applies them")
SKIPPED = "update skipped on every rank (nonfinite={skip})"
APPLIED = "update applied (nonfinite={warn})"
NOT_FINITE_ANY_MORE = ": the weights are no longer finite and will not be checkpointed"
QUOTED = {"stop": "'stop'", "skip": "'skip'", "warn": "'warn'"}


def apply_policy(policy: str, message: str, warn: Callable[[str], None] | None,
                 gradients_finite: bool = False) -> bool:
    """What ``policy`` does with a non-finite step described by ``message`` (the same on every rank): raise
    :class:`NonFiniteError` (``"stop"``), or call ``warn`` (None: this rank stays silent) and return whether to
    apply the update (False for ``"skip"``, True for ``"warn"``)."""
    if policy == "stop":
        raise NonFiniteError(f"{message}. {STOPPED.format(**QUOTED)}")
    if warn is not None:
        outcome = SKIPPED if policy == "skip" else APPLIED + ("" if gradients_finite else NOT_FINITE_ANY_MORE)
        warn(f"{message}: {outcome.format(**QUOTED)}")
    return policy == "warn"


def describe(step: int, epoch: int, bad_ranks: list[int], gradients_finite: bool = False) -> str:
    """The message for a non-finite step: where it happened, what was not finite and which ranks' losses."""
    if bad_ranks:
        who = (f"rank {bad_ranks[0]}'s loss was" if len(bad_ranks) == 1
               else f"ranks {', '.join(map(str, bad_ranks))}' losses were") + " NaN or inf"
    else:
        who = "every rank's loss was finite (the gradients overflowed in the backward pass or the allreduce)"
    if gradients_finite:
        return f"a non-finite loss (NaN or inf) at step {step} (epoch {epoch}), its gradients finite; {who}"
    return f"non-finite gradients (NaN or inf) after the allreduce at step {step} (epoch {epoch}); {who}"


class NonFiniteGuard:
    """Applies one ``nonfinite`` policy; ``skipped_steps`` counts the steps it skipped (the same on every rank)."""

    def __init__(self, policy: str = "stop") -> None:
        self.policy = check_nonfinite(policy)
        self.skipped_steps = 0

    def on_nonfinite(self, comm: Comm, step: int, epoch: int, local_loss_finite: bool,
                     gradients_finite: bool = False) -> bool:
        """Every rank calls this (a collective) for a step whose averaged gradients are not finite, or
        (``gradients_finite``) whose loss was not finite on some rank.

        Raises :class:`NonFiniteError` (``"stop"``), or returns whether to apply the update: False for
        ``"skip"``, True with a warning for ``"warn"``."""
        flags = comm.allgather_object(bool(local_loss_finite)) if comm.size > 1 else [local_loss_finite]
        message = describe(step, epoch, [r for r, ok in enumerate(flags) if not ok], gradients_finite)
        apply = apply_policy(self.policy, message, log.warning if comm.rank == 0 else None, gradients_finite)
        if not apply:
            self.skipped_steps += 1
        return apply

