"""Horovod's names in an hvdkit adapter package: one helper for ``hvdkit.torch``, ``hvdkit.tensorflow``
and ``hvdkit.keras``.

:func:`export` puts the adapter's ``horovod_api.__horovod_all__`` names into the package and returns a
module ``__getattr__`` through which anything else of Horovod's module (its internals, e.g. ``hvd.util``,
that scripts and upstream's tests reach) falls through, so a Horovod name never fails with AttributeError
there. hvdkit's own submodules come first: they are imported, never shadowed. Framework-free: Horovod's
module is imported by name, only when a name falls through.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from types import ModuleType
from typing import Any


def export(namespace: dict[str, Any], api: ModuleType, upstream: str) -> Callable[[str], object]:
    """Copy ``api.__horovod_all__`` into ``namespace`` (set its ``__horovod_all__``) and return the
    package's ``__getattr__`` falling through to the module named ``upstream``."""
    names = list(api.__horovod_all__)
    namespace.update({n: getattr(api, n) for n in names})
    namespace["__horovod_all__"] = names
    package = namespace["__name__"]

    def __getattr__(name: str) -> object:
        if importlib.util.find_spec(f"{package}.{name}") is not None:  # an hvdkit submodule not imported yet
            return importlib.import_module(f"{package}.{name}")
        try:
            return getattr(importlib.import_module(upstream), name)
        except AttributeError:
            raise AttributeError(f"module {package!r} has no attribute {name!r} (nor has {upstream})") from None

    return __getattr__
