"""Staged checkpoint snapshots (#14 item 3, hvdkit/torch/staging.py): parameters and optimizer state are
copied on a background thread while the next forward and backward run; the snapshot must still hold the
state at the moment of the save, the optimizer step must wait for the copy, and host buffers are reused
from one save to the next."""

import threading

import pytest
from helpers import requires_horovod

pytestmark = [requires_horovod, pytest.mark.timeout(120)]


def make():
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.BatchNorm1d(64), torch.nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = torch.randn(32, 64), torch.randn(32, 1)

    def forward_backward():
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()

    return model, opt, forward_backward


def cloned(obj):
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.detach().clone()
    if isinstance(obj, dict):
        return {k: cloned(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(cloned(v) for v in obj)
    return obj


def assert_same(a, b, where="snapshot"):
    import torch

    if isinstance(a, torch.Tensor):
        assert torch.equal(a, b), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            assert_same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), where
        for i, (u, v) in enumerate(zip(a, b)):
            assert_same(u, v, f"{where}[{i}]")
    else:
        assert a == b, where


def test_a_staged_snapshot_holds_the_state_of_the_save_while_training_goes_on():
    import torch

    from hvdkit.torch.ops import TorchOps

    model, opt, forward_backward = make()
    ops = TorchOps(model, opt)
    forward_backward()
    opt.step()  # momentum buffers exist now
    expected = {"model": cloned(model.state_dict()), "optimizer": cloned(opt.state_dict())}
    snap = ops.capture_staged()
    forward_backward()  # changes BatchNorm's running statistics (copied before capture_staged returned)
    opt.step()  # changes parameters and momentum (waits for the background copy)
    assert not ops.staging.in_flight
    assert_same(expected["model"], snap["model"], "model")
    assert snap["optimizer"]["class"] == "SGD"  # recorded so a resume with another optimizer is refused
    assert_same(expected["optimizer"], {k: v for k, v in snap["optimizer"].items() if k != "class"}, "optimizer")
    assert not torch.equal(model.state_dict()["0.weight"], snap["model"]["0.weight"])  # training went on

    # The next save reuses the same host buffers and holds the new state.
    pointers = {k: v.data_ptr() for k, v in snap["model"].items()}
    expected = cloned(model.state_dict())
    snap2 = ops.capture_staged()
    ops.staging.wait()
    assert {k: v.data_ptr() for k, v in snap2["model"].items()} == pointers
    assert_same(expected, snap2["model"], "model, second save")


def test_the_optimizer_step_waits_for_the_background_copy(monkeypatch):
    from hvdkit.torch import staging
    from hvdkit.torch.ops import TorchOps

    model, opt, forward_backward = make()
    release = threading.Event()
    copy = staging.HostStaging._copy

    def gated_copy(self, jobs):
        release.wait(timeout=60)
        copy(self, jobs)

    monkeypatch.setattr(staging.HostStaging, "_copy", gated_copy)
    seen = {}

    def before(*_):  # registered before TorchOps' hook: runs first
        seen["in_flight_before"] = ops.staging.in_flight
        release.set()

    def after(*_):  # registered after TorchOps' hook
        seen["in_flight_after"] = ops.staging.in_flight

    opt.register_step_pre_hook(before)
    ops = TorchOps(model, opt)
    opt.register_step_pre_hook(after)
    forward_backward()
    expected = cloned(model.state_dict())
    snap = ops.capture_staged()
    forward_backward()
    opt.step()
    assert seen == {"in_flight_before": True, "in_flight_after": False}
    assert_same(expected, snap["model"], "model")
