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
        if self.policy == "stop":
            raise NonFiniteError(f"{message}. Training stopped on every rank before the update (nonfinite='stop'), "
                                 "so the weights and the last checkpoint are finite; nonfinite='skip' skips such "
                                 "steps, nonfinite='warn' applies them")
        if comm.rank == 0:
            log.warning("%s: %s", message, "update skipped on every rank (nonfinite='skip')" if self.policy == "skip"
                        else "update applied (nonfinite='warn')" if gradients_finite
                        else "update applied (nonfinite='warn'): the weights are no longer finite and will not be "
                             "checkpointed")
        if self.policy == "skip":
            self.skipped_steps += 1
            return False
        return True

