"""Renamed keyword arguments and functions: the old name keeps working for one release, with a warning.

One helper for every adapter, so each rename reads the same to users: the ``DeprecationWarning`` names
the old spelling, the new one, and when the old one goes away.
"""

from __future__ import annotations

import warnings
from collections.abc import MutableMapping
from typing import Any

#: When the deprecated spellings are removed.
REMOVAL = "hvdkit 0.3"


def warn_renamed(old: str, new: str, *, stacklevel: int = 3) -> None:
    """A ``DeprecationWarning``: ``old`` is now ``new`` (``stacklevel`` 3 points at the caller's caller)."""
    warnings.warn(f"{old} is deprecated: use {new} (the old name goes away in {REMOVAL})", DeprecationWarning,
                  stacklevel=stacklevel)


def renamed_kwarg(where: str, kwargs: MutableMapping[str, Any], old: str, new: str, value: Any,
                  default: Any) -> Any:
    """The value of keyword ``new`` given the call's leftover ``kwargs``, where ``old`` may still be used.

    ``value`` is what the call passed as ``new`` (``default`` when not passed). ``old`` is popped from
    ``kwargs`` with a warning naming ``where``; passing both names is a TypeError, as Python does for a
    keyword given twice.
    """
    if old not in kwargs:
        return value
    old_value = kwargs.pop(old)
    if value is not default:
        raise TypeError(f"{where}() got both {old}= and {new}=: {old} is the deprecated name of {new}; "
                        f"pass only {new}={old_value!r}")
    warn_renamed(f"{where}({old}=...)", f"{new}=", stacklevel=4)
    return old_value


def reject_unknown(where: str, kwargs: MutableMapping[str, Any]) -> None:
    """A TypeError for any keyword left in ``kwargs`` once the renamed ones were popped."""
    if kwargs:
        name = next(iter(kwargs))
        raise TypeError(f"{where}() got an unexpected keyword argument {name!r}")
