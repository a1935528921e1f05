"""Names for the loosely typed values that cross the core's boundaries (their shape belongs to the
adapter that made them)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Metrics of a step or an epoch: numbers, or 0-d tensors that only the callbacks reading them convert.
Logs = Mapping[str, Any]
#: Plain data an adapter or callback captures and gets back unchanged (checkpoints, elastic commits).
Snapshot = dict[str, Any]
