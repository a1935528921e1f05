"""The framework-free parts of the non-finite check and of resuming under another global batch."""

import logging

import pytest
from fakes import DictOps

from hvdkit.core import Engine, LocalComm
from hvdkit.core.numerics import NonFiniteError, NonFiniteGuard


class Gathered(LocalComm):
    """A pretend 3-rank world whose allgather returns given per-rank values."""

    def __init__(self, values):
        super().__init__(size=len(values))
        self.values = values

    def allgather_object(self, obj):
        return list(self.values)


def test_stop_names_the_step_and_the_rank_whose_loss_was_not_finite():
    with pytest.raises(NonFiniteError, match=r"at step 20 \(epoch 2\); rank 1's loss was NaN or inf"):
        NonFiniteGuard().on_nonfinite(Gathered([True, False, True]), 20, 2, True)


def test_skip_and_warn_decide_alike_and_count(caplog):
    comm = Gathered([True, True, True])
    skip, warn = NonFiniteGuard("skip"), NonFiniteGuard("warn")
    with caplog.at_level(logging.WARNING, logger="hvdkit"):
        assert skip.on_nonfinite(comm, 3, 0, True) is False
        assert warn.on_nonfinite(comm, 3, 0, True) is True
    assert skip.skipped_steps == 1 and warn.skipped_steps == 0
    assert "every rank's loss was finite" in caplog.text and "update skipped" in caplog.text


@pytest.mark.parametrize("bad", ["off", "Stop", None, True])
def test_a_bad_policy_is_refused_naming_the_argument(bad):
    with pytest.raises(ValueError, match=rf"nonfinite must be one of 'stop', 'skip', 'warn', got {bad!r}"):
        NonFiniteGuard(bad)


@pytest.mark.parametrize("saved, now, lr", [
    ({"world_size": 2, "batch_size": 16, "accumulate_steps": 1}, {"world_size": 1, "batch_size": 16,
                                                                  "accumulate_steps": 2}, 0.1),
    ({"world_size": 2, "batch_size": 16, "accumulate_steps": 1}, {"world_size": 1, "batch_size": 16,
                                                                  "accumulate_steps": 1}, 0.05),
])
def test_a_resumed_lr_follows_the_global_batch_not_the_world_size(saved, now, lr, caplog):
    engine = Engine(LocalComm(size=now["world_size"]), DictOps(lr=0.1), [])
    engine.state.global_batch = now
    with caplog.at_level(logging.WARNING, logger="hvdkit"):
        engine.restore_progress({"epoch": 1, "global_step": 2, "target_lr": 0.1, "global_batch": saved}, {},
                                world_size=2, optimizer_lr=0.1)
    assert engine.state.target_lr == pytest.approx(lr) and engine.state.ops.get_lr() == pytest.approx(lr)
    assert ("rescaled" in caplog.text) == (lr != 0.1)


def test_a_nan_loss_with_finite_gradients_is_named_as_such(caplog):
    with pytest.raises(NonFiniteError, match=r"a non-finite loss \(NaN or inf\) at step 5 \(epoch 0\), its gradients "
                                             r"finite; ranks 0, 2' losses were NaN or inf"):
        NonFiniteGuard().on_nonfinite(Gathered([False, True, False]), 5, 0, True, gradients_finite=True)
    with caplog.at_level(logging.WARNING, logger="hvdkit"):
        assert NonFiniteGuard("warn").on_nonfinite(Gathered([True, False, True]), 5, 0, True, gradients_finite=True)
    assert "update applied (nonfinite='warn')" in caplog.text and "no longer finite" not in caplog.text
