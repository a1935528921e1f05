"""hvdkit on a Ray cluster (Ray Train V2): Horovod's Gloo controller over Ray's workers.

:class:`HorovodTrainer` (``train_loop_per_worker`` calls ``hk.init()`` as under ``horovodrun``) replaces Ray's
removed ``HorovodTrainer``; :class:`RayCheckpoint` reports hvdkit's checkpoints to Ray and resumes from them
after a restart; :class:`RayExecutor` is ``horovod.ray.RayExecutor``'s API on the same backend. Guide:
docs/ray.md; example: examples/ray/pytorch_ray.py. Needs ``pip install 'hvdkit[ray]'``.
"""

from __future__ import annotations

try:
    import ray.train  # noqa: F401
except ImportError as exc:
    raise ImportError(f"hvdkit.integrations.ray needs Ray Train ({exc}); install it with: "
                      "pip install 'hvdkit[ray]'") from exc

from hvdkit.integrations.ray.backend import HorovodConfig, HorovodTrainer
from hvdkit.integrations.ray.executor import RayExecutor
from hvdkit.integrations.ray.report import RayCheckpoint

__all__ = ["HorovodConfig", "HorovodTrainer", "RayCheckpoint", "RayExecutor"]
