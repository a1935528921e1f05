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


def test_fp16_loss_scale_is_saved_in_checkpoints_and_restored(tmp_path):
    from hvdkit.torch.ops import TorchOps
    from hvdkit.torch.precision import Precision

    model = torch.nn.Linear(2, 2)
    prec = Precision("fp16", torch.device("cpu"))
    prec.scaler.scale(torch.ones(1))  # the scaler starts lazily
    prec.scaler.update(new_scale=1024.0)
    ops = TorchOps(model, torch.optim.SGD(model.parameters(), lr=0.1), prec)
    tree, write = ops.dump(ops.capture())  # refuses anything that is neither a tensor nor plain data
    write(tmp_path / "t.safetensors")
    fresh = Precision("fp16", torch.device("cpu"))
    assert fresh.loss_scale == 65536.0
    restored = ops.loads(tree, (tmp_path / "t.safetensors").read_bytes())
    TorchOps(model, torch.optim.SGD(model.parameters(), lr=0.1), fresh).restore(restored)
    assert fresh.loss_scale == 1024.0
    assert "grad_scaler" not in TorchOps(model, torch.optim.SGD(model.parameters(), lr=0.1),
                                         Precision("bf16", torch.device("cpu"))).capture()
