"""Per-step cost of the Trainer's non-finite check (nonfinite=, on by default): the same MLP trained by two
Trainers, one with the check and one whose step is the plain ``optimizer.step()``, epochs interleaved in
rounds (A B, B A, ...). Prints one JSON line: each round's ratio (checked / unchecked time) and their median
and quartiles.

    horovodrun -np 2 -H localhost:2 python -m benchmarks.workers.nonfinite_check --rounds 16
"""

import argparse
import json
import time

import torch
from torch import nn
from torch.utils.data import TensorDataset

import hvdkit.torch as hk
from benchmarks.stats import median, quartiles

p = argparse.ArgumentParser()
p.add_argument("--rounds", type=int, default=16)
p.add_argument("--width", type=int, default=512)
p.add_argument("--rows", type=int, default=2048, help="in all; 32 per rank and step")
args = p.parse_args()
hk.init(threads=1)
torch.manual_seed(0)
data = TensorDataset(torch.randn(args.rows, 64), torch.randint(0, 10, (args.rows,)))


def trainer(checked: bool) -> hk.Trainer:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, args.width), nn.ReLU(), nn.Linear(args.width, args.width), nn.ReLU(),
                          nn.Linear(args.width, 10))
    t = hk.Trainer(model, torch.optim.SGD(model.parameters(), lr=0.01), nn.CrossEntropyLoss())
    if not checked:  # what the step was before the check: average and update in one call
        t._step = lambda loss: t.optimizer.step()
    return t


runs = {"checked": trainer(True), "unchecked": trainer(False)}
seconds: dict[str, list[float]] = {k: [] for k in runs}
epoch = 0
for r in range(args.rounds + 1):  # round 0 warms up, untimed
    for name in (["checked", "unchecked"] if r % 2 else ["unchecked", "checked"]):
        t0 = time.perf_counter()
        runs[name].fit(data, epochs=epoch + 1, batch_size=32, seed=epoch)
        if r:
            seconds[name].append(time.perf_counter() - t0)
    epoch += 1
ratios = [c / u for c, u in zip(seconds["checked"], seconds["unchecked"])]
steps = args.rows // 32 // hk.size()
if hk.rank() == 0:
    print(json.dumps({"size": hk.size(), "steps_per_epoch": steps, "ratio_median": median(ratios),
                      "ratio_iqr": quartiles(ratios), "step_ms_checked": 1000 * median(seconds["checked"]) / steps,
                      "step_ms_unchecked": 1000 * median(seconds["unchecked"]) / steps, "ratios": ratios}))
