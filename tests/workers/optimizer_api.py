"""The distributed optimizer used as PyTorch defines an optimizer, 2 workers; prints ``OPTAPI {json}`` per rank.

Each case trains a small model through ``hk.distribute`` (or ``hk.Trainer``) with different data per rank and
reports a hash of the final weights (the test compares the ranks) plus what the case checks.
"""

import copy
import hashlib
import json
import warnings

import torch
from torch import nn
from torch.utils.data import TensorDataset

import hvdkit.torch as hk

hk.init(threads=1)
RANK = hk.rank()
gen = torch.Generator().manual_seed(0)
X = torch.randn(64, 3, 6, 6, generator=gen)
Y = torch.randint(0, 3, (64,), generator=gen)
XS, YS = X[RANK::2], Y[RANK::2]


def build(seed: int = 0, fmt=torch.contiguous_format) -> nn.Sequential:
    torch.manual_seed(seed + RANK)  # different per rank: distribute must broadcast rank 0's
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(64, 3))
    return net.to(memory_format=fmt)


def digest(model: nn.Module) -> str:
    return hashlib.sha256(b"".join(p.detach().contiguous().numpy().tobytes() for p in model.parameters())).hexdigest()


def loss_at(model: nn.Module, step: int) -> torch.Tensor:
    i = (step * 4) % len(XS)
    return nn.functional.cross_entropy(model(XS[i:i + 4]), YS[i:i + 4])


def set_to_none(flag: bool) -> dict:
    model = build()
    opt = hk.distribute(model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    cleared = []
    for step in range(5):
        opt.zero_grad(set_to_none=flag)
        cleared.append([None if p.grad is None else float(p.grad.abs().sum()) for p in model.parameters()])
        loss_at(model, step).backward()
        opt.step()
    return {"sha256": digest(model), "after_zero_grad": cleared[1:]}


def unused_branch() -> dict:
    """Rank 0 runs the model through ``head_a``, rank 1 through ``head_b`` (channels_last convolutions): each
    head's gradient is its one rank's gradient averaged with zeros from the other."""
    torch.manual_seed(RANK)
    model = nn.ModuleDict({"trunk": nn.Conv2d(4, 4, 1), "a": nn.Conv2d(4, 2, 3), "b": nn.Conv2d(4, 2, 3)})
    model = model.to(memory_format=torch.channels_last)
    opt = hk.distribute(model, torch.optim.SGD(model.parameters(), lr=0.1))
    x = torch.full((2, 4, 5, 5), float(RANK + 1)).contiguous(memory_format=torch.channels_last)
    branch = model["a" if RANK == 0 else "b"]
    names, params = zip(*model.named_parameters())
    # this rank's own gradients first (autograd.grad runs no gradient-accumulator hook: nothing averaged)
    grads = torch.autograd.grad(branch(model["trunk"](x)).sum(), params, allow_unused=True)
    local = dict(zip(names, grads))
    opt.zero_grad(set_to_none=True)
    branch(model["trunk"](x)).sum().backward()
    everyone = hk.allgather_object({k: (None if g is None else g.tolist()) for k, g in local.items()})
    opt.synchronize()
    errors = {}
    for k, p in model.named_parameters():
        parts = [torch.tensor(r[k]) if r[k] is not None else torch.zeros_like(p) for r in everyone]
        errors[k] = float((p.grad - sum(parts) / len(parts)).abs().max())
    with opt.skip_synchronize():
        opt.step()
    return {"sha256": digest(model), "grad_error": errors}


def frozen_later() -> dict:
    """A layer frozen after distribute (fine-tuning) keeps its weights, as with torch alone: its gradient is
    not averaged in as zeros, which momentum and weight decay would turn into an update."""
    model = build()
    opt = hk.distribute(model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=0.1))
    opt.zero_grad()
    loss_at(model, 0).backward()
    opt.step()
    model[0].requires_grad_(False)
    before = model[0].weight.detach().clone()
    for step in range(1, 4):
        opt.zero_grad(set_to_none=True)
        loss_at(model, step).backward()
        opt.step()
    return {"sha256": digest(model), "frozen_moved": float((model[0].weight - before).abs().max())}


def add_param_group() -> dict:
    """The optimizer starts on the head; the trunk joins with add_param_group: it is averaged too, and a
    group without an lr takes the optimizer's (the user's), not torch's default."""
    model = build()
    opt = hk.distribute(model, torch.optim.SGD(model[3].parameters(), lr=0.05, momentum=0.9))
    for step in range(4):
        if step == 1:
            opt.add_param_group({"params": list(model[0].parameters())})
        opt.zero_grad()
        loss_at(model, step).backward()
        opt.step()
    return {"sha256": digest(model), "trunk_sha256": digest(model[0]), "lrs": [g["lr"] for g in opt.param_groups]}


def schedulers() -> dict:
    """OneCycleLR, ReduceLROnPlateau and SequentialLR drive the distributed optimizer as a plain one, built on
    it or on the plain optimizer before ``distribute``."""
    out = {}
    makers = {
        "onecycle": lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=0.5, total_steps=6),
        "plateau": lambda o: torch.optim.lr_scheduler.ReduceLROnPlateau(o, patience=0, factor=0.5),
        "sequential": lambda o: torch.optim.lr_scheduler.SequentialLR(o, [
            torch.optim.lr_scheduler.LinearLR(o, start_factor=0.1, total_iters=2),
            torch.optim.lr_scheduler.ExponentialLR(o, gamma=0.9)], milestones=[2]),
    }
    for name, make in makers.items():
        lrs = {}
        for kind in ("plain", "distributed", "built_before"):  # built_before: on the plain one (the Trainer's way)
            model = build()
            opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            if kind == "distributed":
                opt = hk.distribute(model, opt)
            sched = make(opt)
            if kind == "built_before":
                opt = hk.distribute(model, opt)
            seen = []
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                for step in range(6):
                    opt.zero_grad()
                    loss = loss_at(model, step)
                    loss.backward()
                    opt.step()
                    sched.step(1.0) if name == "plateau" else sched.step()  # a flat metric: the LR halves
                    seen.append(opt.param_groups[0]["lr"])
            lrs[kind] = seen
            if kind != "plain":
                out[f"{name}_{kind}" if kind == "built_before" else name] = {
                    "sha256": digest(model), "warnings": [str(w.message) for w in caught]}
        out[name]["same_lrs"] = lrs["plain"] == lrs["distributed"]
        out[f"{name}_built_before"]["same_lrs"] = lrs["plain"] == lrs["built_before"]
    return out


def state_dict_roundtrip() -> dict:
    """state_dict after 3 steps, loaded into a new distributed optimizer (of a copy of the model: an optimizer's
    hooks stay on its parameters), continues as the original does; so does one loaded on rank 0 only into the
    plain optimizer before distribute (Horovod's recipe)."""
    results = {}
    for kind in ("continued", "reloaded", "rank0_before_distribute"):
        model = build()
        opt = hk.distribute(model, torch.optim.Adam(model.parameters(), lr=0.01))
        for step in range(3):
            opt.zero_grad()
            loss_at(model, step).backward()
            opt.step()
        if kind != "continued":
            saved = opt.state_dict()
            copy = build()
            copy.load_state_dict(model.state_dict())
            model, plain = copy, torch.optim.Adam(copy.parameters(), lr=0.5)
            if kind == "reloaded":
                opt = hk.distribute(model, plain)
                opt.load_state_dict(saved)
            else:
                if RANK == 0:
                    plain.load_state_dict(saved)
                opt = hk.distribute(model, plain)
        for step in range(3, 6):
            opt.zero_grad()
            loss_at(model, step).backward()
            opt.step()
        results[kind] = digest(model)
    return results


def implementations() -> dict:
    """foreach and fused Adam, AdamW and SGD on a channels_last model: ranks identical, and the same
    weights as the default implementation within float tolerance."""
    out = {}
    for cls in (torch.optim.Adam, torch.optim.AdamW, torch.optim.SGD):
        weights = {}
        for impl in ("default", "foreach", "fused"):
            model = build(fmt=torch.channels_last)
            extra = {} if impl == "default" else {impl: True}
            opt = hk.distribute(model, cls(model.parameters(), lr=0.01, **extra))
            for step in range(5):
                opt.zero_grad()
                loss_at(model, step).backward()
                opt.step()
            weights[impl] = torch.cat([p.detach().flatten() for p in model.parameters()])
            out[f"{cls.__name__}/{impl}"] = {"sha256": digest(model)}
        for impl in ("foreach", "fused"):
            out[f"{cls.__name__}/{impl}"]["diff_to_default"] = float((weights[impl] - weights["default"]).abs().max())
    return out


def scaler_and_clip() -> dict:
    """fp16 with a GradScaler and gradient clipping: the documented hand loop (synchronize, unscale_, clip,
    step under skip_synchronize) and the Trainer's clip_grad_norm give the same weights; the clipped norm
    holds."""
    out = {}
    model = build(seed=3)
    opt = hk.distribute(model, torch.optim.SGD(model.parameters(), lr=0.5))
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10)
    norms = []
    for step in range(4):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            loss = loss_at(model, step)
        scaler.scale(loss).backward()
        opt.synchronize()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.05)
        norms.append(float(torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])))
        with opt.skip_synchronize():
            scaler.step(opt)
        scaler.update()
    out["hand"] = {"sha256": digest(model), "norms": norms}
    model = build(seed=3)
    trainer = hk.Trainer(model, torch.optim.SGD(model.parameters(), lr=0.5), nn.CrossEntropyLoss(),
                         precision="fp16", clip_grad_norm=0.05)
    trainer.precision.scaler.load_state_dict({**trainer.precision.scaler.state_dict(), "scale": 2.0 ** 10})
    sampler_free = torch.utils.data.DataLoader(TensorDataset(XS[:16], YS[:16]), batch_size=4)
    trainer.fit(sampler_free, epochs=1)
    out["trainer"] = {"sha256": digest(model)}
    try:
        hk.Trainer(model, torch.optim.SGD(model.parameters(), lr=0.5), nn.CrossEntropyLoss(), clip_grad_norm=-1)
    except ValueError as exc:
        out["bad_clip"] = str(exc)
    return out


def no_step_before_training() -> dict:
    """``distribute`` broadcasts rank 0's optimizer state without taking a step (Horovod's did one on zero
    gradients to create the state: AdamW's weight decay moved the weights, Adam started at step 1)."""
    model = build()
    opt = hk.distribute(model, torch.optim.AdamW(model.parameters(), lr=0.1, weight_decay=0.1))
    torch.manual_seed(0)
    reference = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(64, 3))
    moved = max(float((p - q).abs().max()) for p, q in zip(model.parameters(), reference.parameters()))
    return {"moved": moved, "steps": sorted({int(v["step"]) for v in opt.state.values() if "step" in v})}


def second_distribute() -> dict:
    """A second ``distribute`` of the same model (a new optimizer for a fine-tuning phase) must retire the
    first optimizer's gradient hooks: it trains as a twin distributed once, with that optimizer."""
    model = build()
    opt = hk.distribute(model, torch.optim.SGD(model.parameters(), lr=0.1))
    for step in range(2):
        opt.zero_grad()
        loss_at(model, step).backward()
        opt.step()
    twin = copy.deepcopy(model)  # new parameters: no hooks
    runs = {}
    for name, net in (("again", model), ("twin", twin)):
        try:
            opt = hk.distribute(net, torch.optim.Adam(net.parameters(), lr=0.01))
            for step in range(2, 5):
                opt.zero_grad()
                loss_at(net, step).backward()
                opt.step()
            runs[name] = digest(net)
        except Exception as e:  # reported: the test compares the runs
            runs[name] = f"{type(e).__name__}: {e}"
    return runs


def sparse_embedding() -> dict:
    """``nn.Embedding(sparse=True)``: Horovod averages its sparse gradients by allgather; the weights end as a
    dense twin's (the same rows, averaged by allreduce)."""
    weights = {}
    for sparse in (True, False):
        torch.manual_seed(RANK)
        model = nn.Sequential(nn.Embedding(20, 4, sparse=sparse), nn.Flatten(), nn.Linear(8, 3))
        opt = hk.distribute(model, torch.optim.SGD(model.parameters(), lr=0.1))
        for step in range(3):
            rows = torch.tensor([[step + RANK, 2 * step + 5 * RANK]] * 4)
            opt.zero_grad()
            nn.functional.cross_entropy(model(rows), YS[:4]).backward()
            opt.step()
        weights[sparse] = [p.detach().clone() for p in model.parameters()]
    error = max(float((a - b).abs().max()) for a, b in zip(weights[True], weights[False]))
    torch.manual_seed(RANK)  # and through the Trainer, which checks the gradients for NaN and inf
    model = nn.Sequential(nn.Embedding(20, 4, sparse=True), nn.Flatten(), nn.Linear(8, 3))
    rows = torch.stack([torch.arange(RANK, 16 + RANK), torch.arange(4 * RANK, 16 + 4 * RANK)], 1)
    hk.Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss()).fit(
        TensorDataset(rows, YS[:16]), epochs=1, batch_size=4, shuffle=False)
    return {"error": error, "sha256": hashlib.sha256(b"".join(p.numpy().tobytes() for p in weights[True])).hexdigest(),
            "trainer_sha256": digest(model)}


def rank0_resume_with_scheduler() -> dict:
    """Horovod's resume recipe, after an LR scheduler added its keys (``initial_lr``) to the saved groups: rank 0
    alone loads the state, ``distribute`` hands it to every rank."""
    model = build()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.5, total_steps=10)
    loss_at(model, 0).backward()
    opt.step()
    sched.step()
    saved = copy.deepcopy(opt.state_dict())
    fresh = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    if RANK == 0:
        fresh.load_state_dict(saved)
    try:
        dist = hk.distribute(model, fresh)
    except Exception as e:  # reported: the test expects none
        return {"error": f"{type(e).__name__}: {e}"}
    state = dist.state_dict()
    return {"error": None, "keys": sorted(state["param_groups"][0]),
            "momentum_sha256": hashlib.sha256(b"".join(v["momentum_buffer"].numpy().tobytes()
                                                       for v in state["state"].values())).hexdigest()}


def horovod_optimizer_in_trainer() -> dict:
    """The Trainer given Horovod's own DistributedOptimizer (which broadcasts nothing) over per-rank initial
    weights: every rank starts from rank 0's, as with a plain optimizer."""
    import horovod.torch as hvd

    model = build()  # seeded per rank
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                                   named_parameters=model.named_parameters())
    hk.Trainer(model, opt, nn.CrossEntropyLoss()).fit(TensorDataset(XS, YS), epochs=1, batch_size=8, shuffle=False)
    return {"sha256": digest(model)}


out = {"rank": RANK, "no_step_before_training": no_step_before_training(),
       "second_distribute": second_distribute(),
       "set_to_none": {str(flag): set_to_none(flag) for flag in (True, False)},
       "unused_branch": unused_branch(), "frozen_later": frozen_later(), "add_param_group": add_param_group(),
       "schedulers": schedulers(), "state_dict": state_dict_roundtrip(), "implementations": implementations(),
       "scaler_and_clip": scaler_and_clip(), "sparse_embedding": sparse_embedding(),
       "rank0_resume_with_scheduler": rank0_resume_with_scheduler(),
       "horovod_optimizer_in_trainer": horovod_optimizer_in_trainer()}
print("OPTAPI " + json.dumps(out), flush=True)
