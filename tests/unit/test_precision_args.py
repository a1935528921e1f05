"""Trainer(precision=...) refuses unknown values before training, naming the argument and the choices."""

import pytest

torch = pytest.importorskip("torch")
hk = pytest.importorskip("hvdkit.torch")


@pytest.mark.parametrize("value", ["16", "fp32", 16, "BF16", None])
def test_bad_precision_is_refused_with_the_allowed_values(value):
    model = torch.nn.Linear(2, 2)
    with pytest.raises(ValueError) as err:
        hk.Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), torch.nn.MSELoss(), precision=value)
    assert str(err.value) == f"precision must be one of '32', 'bf16', 'fp16', got {value!r}"
