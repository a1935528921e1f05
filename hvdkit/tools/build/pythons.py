"""The Python versions hvdkit supports, in one place: ``scripts/find-python.sh``, ``pyproject.toml``'s
``requires-python`` and ``hvdkit doctor`` follow it (a unit test keeps them equal).
"""

from __future__ import annotations

import sys

SUPPORTED: tuple[tuple[int, int], ...] = ((3, 11), (3, 12), (3, 13))


def supported_names() -> str:
    """``"3.11, 3.12, 3.13"``."""
    return ", ".join(f"{a}.{b}" for a, b in SUPPORTED)


def is_supported(version: tuple[int, ...] | None = None) -> bool:
    """Whether ``version`` (default: this interpreter's) is one hvdkit supports."""
    major_minor = tuple((version or sys.version_info)[:2])
    return major_minor in SUPPORTED
