"""The framework versions hvdkit is tested with, in one place: ``hvdkit doctor`` shows the range and the
adapters' ``init()`` warns outside it. Outside the range hvdkit usually works, but Horovod 0.28.1's
extensions and hvdkit's patches were built and checked only inside it, so the user should know."""

from __future__ import annotations

import re
import warnings

# (oldest, newest) major.minor that CI, the slow checks or a GPU run have trained with (docs/install.md).
TESTED: dict[str, tuple[str, str]] = {
    "torch": ("2.11", "2.14"),
    "tensorflow": ("2.21", "2.21"),
    "keras": ("3.15", "3.15"),
}


def tested_range(name: str) -> str:
    """``"2.11 to 2.14"`` (or ``"2.21"``) for ``name`` in :data:`TESTED`."""
    low, high = TESTED[name]
    return low if low == high else f"{low} to {high}"


def untested(name: str, version: str | None) -> str | None:
    """A message when ``version`` of ``name`` lies outside the tested range, else ``None``."""
    if version is None or name not in TESTED:
        return None
    release = _major_minor(version)
    if release is None:
        return f"{name} {version} is not a version hvdkit can read; hvdkit is tested with {name} {tested_range(name)}"
    low, high = (_major_minor(v) or (0, 0) for v in TESTED[name])
    if low <= release <= high:
        return None
    return (f"{name} {version} is outside the versions hvdkit is tested with ({tested_range(name)}); "
            f"it may work, but Horovod's extensions were not checked against it")


def _major_minor(version: str) -> tuple[int, int] | None:
    # A regex, not packaging: doctor must run in an environment that has nothing installed.
    m = re.match(r"(\d+)\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2))) if m else None


def warn_if_untested(name: str, version: str | None) -> None:
    """Warn once per process (Python's warning filter) when ``version`` is outside the tested range."""
    message = untested(name, version)
    if message:
        warnings.warn(message, UserWarning, stacklevel=3)
