"""hvdkit on a Ray cluster (Ray Train V2): Horovod's Gloo controller over Ray's workers.

    from ray.train import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
    from hvdkit.ray import HorovodTrainer, RayCheckpoint

    def train(config):
        import hvdkit.torch as hk
        from hvdkit.callbacks import Checkpoint
        hk.init()                                   # Horovod, wired by the trainer's backend
        ckpt = Checkpoint(config["checkpoint_dir"])
        hk.Trainer(model, optimizer, loss_fn, callbacks=[ckpt, RayCheckpoint(ckpt)]).fit(data, epochs=5, ...)

    HorovodTrainer(train, train_loop_config={...}, scaling_config=ScalingConfig(num_workers=4),
                   run_config=RunConfig(storage_path="/shared/ray", failure_config=FailureConfig(max_failures=2))
                   ).fit()

:class:`HorovodTrainer` replaces Ray's removed ``HorovodTrainer``; :class:`RayExecutor` is
``horovod.ray.RayExecutor``'s API on the same backend. Needs ``pip install 'hvdkit[ray]'``.
"""

from __future__ import annotations

try:
    import ray.train  # noqa: F401
except ImportError as exc:
    raise ImportError(f"hvdkit.ray needs Ray Train ({exc}); install it with: pip install 'hvdkit[ray]'") from exc

from hvdkit.ray.backend import HorovodConfig, HorovodTrainer
from hvdkit.ray.executor import RayExecutor
from hvdkit.ray.report import RayCheckpoint

__all__ = ["HorovodConfig", "HorovodTrainer", "RayCheckpoint", "RayExecutor"]
