"""Horovod's names in an hvdkit adapter package (``hvdkit.torch``, ``.tensorflow``, ``.keras``, ``.keras.callbacks``).

Every Horovod-compatible name lives in this package, one module per Horovod module: ``torch``, ``tensorflow``,
``keras``, ``keras_callbacks`` and the ``*_elastic`` ones (``callbacks`` holds the framework-free callbacks
behind Horovod's Keras ones). Each adapter's compat module lists Horovod 0.28.1's public API in ``__horovod_all__``
(and the internals upstream's tests reach in ``__horovod_internal__``). Nothing else falls through to
Horovod: a typo is an AttributeError naming both packages; a Horovod name the adapter cannot offer here (listed
with its reason in the compat module's ``__horovod_unavailable__``) is an AttributeError giving that reason.
The compat module imports Horovod; this does not.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

#: The Horovod release whose API the compat modules reproduce.
HOROVOD_VERSION = "0.28.1"


def missing(package: str, name: str, upstream: str) -> AttributeError:
    """The AttributeError for ``name``, which neither hvdkit's ``package`` nor Horovod's ``upstream`` API has."""
    return AttributeError(f"module {package!r} has no attribute {name!r} (not in {package} nor in Horovod "
                          f"{HOROVOD_VERSION}'s {upstream} API)")


def export(namespace: dict[str, Any], api: ModuleType, upstream: str) -> Callable[[str], object]:
    """Copy ``api.__horovod_all__`` (and ``api.__horovod_internal__``, if any) into ``namespace``, set its
    ``__horovod_all__``, and return the package's ``__getattr__``, which raises :func:`missing`, or, for a name
    in ``api.__horovod_unavailable__``, an AttributeError with its message."""
    names = list(api.__horovod_all__)
    unavailable: dict[str, str] = dict(getattr(api, "__horovod_unavailable__", {}))
    internal = list(getattr(api, "__horovod_internal__", []))
    namespace.update({n: getattr(api, n) for n in [*names, *internal]})
    namespace["__horovod_all__"] = names
    package = namespace["__name__"]
    for n in names:  # ``import hvdkit.torch.elastic`` as ``import horovod.torch.elastic``: this room's module
        value = namespace[n]
        if isinstance(value, ModuleType) and value.__name__.startswith(__name__ + "."):
            sys.modules[f"{package}.{n}"] = value

    def __getattr__(name: str) -> object:
        if name in unavailable:
            raise AttributeError(unavailable[name])
        raise missing(package, name, upstream)

    return __getattr__


def serve(namespace: dict[str, Any], api: ModuleType, upstream: str) -> Callable[[str], object]:
    """Like :func:`export`, but leave ``namespace`` to hvdkit's own names: the returned ``__getattr__``
    answers ``api.__horovod_all__`` from ``api`` when asked for one, and raises :func:`missing` otherwise."""
    names = frozenset(api.__horovod_all__)
    namespace["__horovod_all__"] = sorted(names)
    package = namespace["__name__"]

    def __getattr__(name: str) -> object:
        if name in names:
            return getattr(api, name)
        raise missing(package, name, upstream)

    return __getattr__
