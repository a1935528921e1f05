"""The Python versions hvdkit supports, in one place.

``scripts/find-python.sh`` (the bootstrap's interpreter choice), ``pyproject.toml``'s
``requires-python`` and ``hvdkit doctor`` all follow this list; a unit test keeps them equal.
3.11 is the version CI runs the whole suite on; 3.12 and 3.13 need the
``0005-no-stdlib-distutils`` patch for the Horovod build (stdlib ``distutils`` is gone in 3.12).
"""

from __future__ import annotations

import sys

SUPPORTED: tuple[tuple[int, int], ...] = ((3, 11), (3, 12), (3, 13))
CI_FULL_SUITE = (3, 11)


def supported_names() -> str:
    """``"3.11, 3.12, 3.13"``."""
    return ", ".join(f"{a}.{b}" for a, b in SUPPORTED)


def is_supported(version: tuple[int, ...] | None = None) -> bool:
    """Whether ``version`` (default: this interpreter's) is one hvdkit supports."""
    major_minor = tuple((version or sys.version_info)[:2])
    return major_minor in SUPPORTED
