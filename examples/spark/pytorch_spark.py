"""Train with hvdkit on Apache Spark: ``horovod.spark.run`` runs one Horovod rank per Spark task.

    pip install 'hvdkit[spark]'          # pyspark, pyarrow, pandas; Spark also needs Java 17+
    python examples/spark/pytorch_spark.py --checkpoint-dir /shared/ckpt
    python examples/spark/pytorch_spark.py --checkpoint-dir /shared/ckpt --controller mpi --epochs 4

The driver starts a local Spark session (``--master`` for a cluster's), and ``hvdkit.integrations.spark.run`` (which is
``horovod.spark.run`` with its inputs checked first) runs :func:`train` in ``--num-proc`` Spark tasks. Each
rank returns its averaged metrics and a digest of its weights; the driver checks that every rank ended with
the same weights and prints rank 0's metrics as JSON. ``--checkpoint-dir`` must be a path every executor can
reach (a shared file system): rank 0 writes there, and a second run resumes from it, under Spark or under
``horovodrun -np 2 -H localhost:2 python examples/spark/pytorch_spark.py --no-spark --checkpoint-dir ...``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any


def train(checkpoint_dir: str, epochs: int = 3, batch_size: int = 32, lr: float = 0.05, seed: int = 0,
          fail_on_rank: int | None = None) -> dict[str, Any]:
    """One rank's training; runs in the process Horovod starts for each Spark task.

    Everything is imported here: the function is pickled on the driver and called on the executors.
    ``fail_on_rank`` raises on that rank once training started, to show how a failure surfaces.
    """
    import hashlib

    import torch
    from torch import nn
    from torch.utils.data import TensorDataset

    import hvdkit.torch as hk
    from hvdkit.callbacks import Checkpoint, LearningRateWarmup, MetricAverage

    hk.init()
    torch.manual_seed(seed)
    # A fixed synthetic task (4 classes from a random linear teacher): same data on every rank and run.
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(512, 16, generator=g)
    y = (x @ torch.randn(16, 4, generator=g)).argmax(dim=1)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=lr * hk.size(), momentum=0.9)  # linear scaling rule
    checkpoint = Checkpoint(checkpoint_dir, keep=2)
    trainer = hk.Trainer(model, optimizer, nn.CrossEntropyLoss(),
                         callbacks=[LearningRateWarmup(warmup_epochs=1), MetricAverage(), checkpoint])
    if fail_on_rank == hk.rank():
        raise RuntimeError(f"rank {hk.rank()} failed on purpose (fail_on_rank={fail_on_rank})")
    history = trainer.fit(TensorDataset(x, y), epochs=epochs, batch_size=batch_size, seed=seed)
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode() + tensor.detach().cpu().numpy().tobytes())
    return {"rank": hk.rank(), "size": hk.size(), "epochs_run": history.epoch,
            "resumed_from_epoch": checkpoint.restored.epoch if checkpoint.restored is not None else None,
            "metrics": {k: v[-1] for k, v in history.history.items() if v}, "weights_sha256": digest.hexdigest()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkpoint-dir", required=True, help="shared path for rank 0's checkpoints (resumes from it)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--num-proc", type=int, default=2, help="Horovod ranks, one Spark task each")
    p.add_argument("--master", default="local[2]", help="Spark master (local[N] needs N >= --num-proc)")
    p.add_argument("--controller", choices=("gloo", "mpi"), default="gloo")
    p.add_argument("--no-spark", action="store_true", help="train in this process (under horovodrun), no Spark")
    args = p.parse_args()
    if args.no_spark:
        result = train(args.checkpoint_dir, epochs=args.epochs)
        if result["rank"] == 0:
            print(json.dumps(result), flush=True)
        return

    from pyspark.sql import SparkSession

    import hvdkit.integrations.spark

    spark = SparkSession.builder.master(args.master).appName("hvdkit-spark-example").getOrCreate()
    try:
        results = hvdkit.integrations.spark.run(train, args=(args.checkpoint_dir, args.epochs), num_proc=args.num_proc,
                                   use_gloo=args.controller == "gloo", use_mpi=args.controller == "mpi")
    finally:
        spark.stop()
    if len({r["weights_sha256"] for r in results}) != 1:
        raise SystemExit(f"ranks ended with different weights: {results}")
    print(json.dumps(results[0]), flush=True)  # results come in rank order


# Required with MPI: Horovod starts mpirun from a process that imports this script again.
if __name__ == "__main__":
    main()
