import itertools
import math

import pytest

from hvdkit.core import lr


@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_warmup_formula_every_step(n):
    target, w_steps = 0.8, 37
    for k in range(w_steps + 5):
        expected = target * (1 / n + (1 - 1 / n) * k / w_steps) if k < w_steps else target
        assert lr.warmup_lr(target, k, w_steps, n) == pytest.approx(expected, rel=1e-15)


def test_warmup_starts_at_single_worker_lr_and_is_monotone():
    vals = [lr.warmup_lr(1.0, k, 10, 4) for k in range(12)]
    assert vals[0] == 0.25
    assert all(a < b for a, b in itertools.pairwise(vals[:11]))
    assert vals[10] == vals[11] == 1.0


def test_zero_warmup_is_identity():
    assert lr.warmup_factor(0, 0, 8) == 1.0


def test_scaling_rule():
    assert lr.scaled_lr(0.1, 4) == pytest.approx(0.4)
    assert lr.rescale_for_world_size(0.4, 4, 2) == pytest.approx(0.2)


def test_momentum_correction():
    assert lr.momentum_correction_factor(0.1, 0.2) == pytest.approx(2.0)
    assert lr.momentum_correction_factor(0.0, 0.2) == 1.0


def test_step_decay():
    f = [lr.step_decay_factor(e, [3, 6], 0.1) for e in range(8)]
    assert f[:3] == [1, 1, 1] and f[3:6] == pytest.approx([0.1] * 3) and f[6:] == pytest.approx([0.01] * 2)


def test_cosine():
    assert lr.cosine_factor(0, 0, 10) == 1.0
    assert lr.cosine_factor(5, 0, 10) == pytest.approx(0.5)
    assert lr.cosine_factor(10, 0, 10, 0.1) == pytest.approx(0.1)
    assert lr.cosine_factor(2.5, 0, 10) == pytest.approx(0.5 * (1 + math.cos(math.pi / 4)))


def test_fractional_epoch():
    assert lr.fractional_epoch(2, 5, 10) == 2.5
    assert lr.fractional_epoch(2, 5, None) == 2.0
