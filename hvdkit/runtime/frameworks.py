"""The framework versions hvdkit is tested with, in one place: ``hvdkit doctor`` shows the range and the
adapters' ``init()`` warns outside it. Outside the range hvdkit usually works, but Horovod 0.28.1's
extensions and hvdkit's patches were built and checked only inside it, so the user should know."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import warnings
from collections.abc import Callable, Mapping

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


def _installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def keras_backend(environ: Mapping[str, str] | None = None, home: str | None = None,
                  installed: Callable[[str], bool] = _installed) -> tuple[str, str]:
    """``(backend, where it comes from)``: the Keras backend hvdkit.keras runs on, read as Keras reads it
    and without importing Keras (which would start that framework): ``KERAS_BACKEND``, else ``keras.json`` in
    ``$KERAS_HOME`` or ``~/.keras``. With neither, TensorFlow as in Keras, unless only torch is installed (a
    torch-only environment such as hvdkit's CUDA image): then torch."""
    env = os.environ if environ is None else environ
    if env.get("KERAS_BACKEND"):
        return env["KERAS_BACKEND"], "KERAS_BACKEND"
    path = os.path.join(env.get("KERAS_HOME") or os.path.join(home or os.path.expanduser("~"), ".keras"),
                        "keras.json")
    try:
        with open(path) as f:
            backend = json.load(f).get("backend")
    except (OSError, ValueError, AttributeError):
        backend = None
    if isinstance(backend, str) and backend:
        return backend, path
    if not installed("tensorflow") and installed("torch"):
        return "torch", "the only framework installed"
    return "tensorflow", "Keras's default"
