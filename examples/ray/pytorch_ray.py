"""Train with hvdkit on a Ray cluster: ``hvdkit.integrations.ray.HorovodTrainer`` runs one Horovod rank per Ray worker.

    pip install 'hvdkit[ray]'
    ray start --head --num-cpus 2                               # or an existing cluster
    python examples/ray/pytorch_ray.py --address auto --num-workers 2 --storage /shared/ray
    python examples/ray/pytorch_ray.py --num-workers 2          # no --address: a local Ray in this process

Each worker runs :func:`train`: hvdkit's ``Trainer`` with a ``Checkpoint`` (rank 0 writes it under
``--storage``) and ``RayCheckpoint``, which reports every epoch to Ray with that checkpoint attached.
``--max-failures N`` lets Ray restart the workers after a failure; they resume from hvdkit's newest valid
checkpoint, the LR rescaled if the number of workers changed. Prints Ray's last reported metrics as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any


def train(config: dict[str, Any]) -> None:
    """One rank's training, in a Ray worker. ``config``: ``checkpoint_dir``, ``epochs``, ``batch_size``,
    ``lr`` (per worker: the optimizer gets ``lr * size``), ``seed``, ``callbacks`` (more hvdkit callbacks)."""
    import torch
    from torch import nn
    from torch.utils.data import TensorDataset

    import hvdkit.torch as hk
    from hvdkit.callbacks import Checkpoint, MetricAverage
    from hvdkit.integrations.ray import RayCheckpoint

    hk.init()
    seed = config.get("seed", 0)
    torch.manual_seed(seed)
    # A fixed synthetic task (4 classes from a random linear teacher): the same data on every rank and run.
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(512, 16, generator=g)
    y = (x @ torch.randn(16, 4, generator=g)).argmax(dim=1)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=config.get("lr", 0.05) * hk.size(), momentum=0.9)
    checkpoint = Checkpoint(config["checkpoint_dir"], keep=2)
    trainer = hk.Trainer(model, optimizer, nn.CrossEntropyLoss(),
                         callbacks=[MetricAverage(), checkpoint, RayCheckpoint(checkpoint),
                                    *config.get("callbacks", ())])
    trainer.fit(TensorDataset(x, y), epochs=config.get("epochs", 3), batch_size=config.get("batch_size", 32),
                seed=seed)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--address", default=None, help="Ray cluster address ('auto' for the one on this node)")
    p.add_argument("--num-workers", type=int, default=2)
    p.add_argument("--use-gpu", action="store_true")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--storage", default=os.path.abspath("ray_results"), help="shared path: Ray's run storage and "
                   "hvdkit's checkpoints (every node must reach it)")
    p.add_argument("--name", default="hvdkit-ray-example", help="run name; a rerun of a name resumes it")
    p.add_argument("--max-failures", type=int, default=2)
    args = p.parse_args()

    import ray
    from ray.train import FailureConfig, RunConfig, ScalingConfig

    from hvdkit.integrations.ray import HorovodTrainer

    ray.init(address=args.address)
    config = {"checkpoint_dir": os.path.join(args.storage, args.name, "hvdkit-checkpoints"), "epochs": args.epochs}
    result = HorovodTrainer(
        train, train_loop_config=config,
        scaling_config=ScalingConfig(num_workers=args.num_workers, use_gpu=args.use_gpu),
        run_config=RunConfig(name=args.name, storage_path=args.storage,
                             failure_config=FailureConfig(max_failures=args.max_failures)),
    ).fit()
    print(json.dumps({"metrics": result.metrics, "checkpoint": result.checkpoint.path if result.checkpoint else None}),
          flush=True)


if __name__ == "__main__":
    main()
