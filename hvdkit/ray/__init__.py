"""Deprecated name of :mod:`hvdkit.integrations.ray` (goes away in hvdkit 0.3)."""

from hvdkit.core.deprecation import warn_renamed
from hvdkit.integrations.ray import *  # noqa: F403
from hvdkit.integrations.ray import HorovodConfig, HorovodTrainer, RayCheckpoint, RayExecutor

__all__ = ["HorovodConfig", "HorovodTrainer", "RayCheckpoint", "RayExecutor"]
warn_renamed("hvdkit.ray", "hvdkit.integrations.ray", stacklevel=2)
