"""Deprecated name of :mod:`hvdkit.integrations.spark` (goes away in hvdkit 0.3)."""

from hvdkit.core.deprecation import warn_renamed
from hvdkit.integrations.spark import *  # noqa: F403
from hvdkit.integrations.spark import run as run

warn_renamed("hvdkit.spark", "hvdkit.integrations.spark", stacklevel=2)
