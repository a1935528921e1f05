"""Up-front argument checks whose messages name the argument, the value and what is allowed."""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from typing import Any


def _fail(name: str, value: object, allowed: str) -> ValueError:
    return ValueError(f"{name} must be {allowed}, got {value!r}")


def check_int(name: str, value: object, *, minimum: int | None = None) -> int:
    """``value`` as an ``int`` if it is an integer (not a bool; NumPy's integers too, as configs and array
    arithmetic give them) >= ``minimum``, else a ValueError naming it."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):  # NumPy's bool is no Integral
        bound = f" >= {minimum}" if minimum is not None else ""
        raise _fail(name, value, f"an integer{bound}")
    if minimum is not None and value < minimum:
        raise _fail(name, value, f"an integer >= {minimum}")
    return int(value)


def check_bool(name: str, value: object) -> bool:
    """``value`` if it is True or False (not a string like ``"no"``), else a ValueError naming it."""
    if not isinstance(value, bool):
        raise _fail(name, value, "True or False")
    return value


def check_number(name: str, value: object, *, minimum: float | None = None, maximum: float | None = None,
                 strict_min: bool = False) -> float:
    """``value`` as a float if it is a finite number within the bounds, else a ValueError naming it."""
    low = "" if minimum is None else (f" > {minimum}" if strict_min else f" >= {minimum}")
    high = "" if maximum is None else f" <= {maximum}"
    allowed = f"a finite number{low}{' and' if low and high else ''}{high}"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _fail(name, value, allowed)
    if minimum is not None and (value <= minimum if strict_min else value < minimum):
        raise _fail(name, value, allowed)
    if maximum is not None and value > maximum:
        raise _fail(name, value, allowed)
    return float(value)


def check_choice(name: str, value: Any, choices: Iterable[Any]) -> Any:
    """``value`` if it is one of ``choices``, else a ValueError listing them."""
    choices = list(choices)
    if value not in choices:
        raise _fail(name, value, "one of " + ", ".join(repr(c) for c in choices))
    return value


def check_callable(name: str, value: object) -> Any:
    """``value`` if it is callable, else a ValueError naming it."""
    if not callable(value):
        raise _fail(name, value, "callable")
    return value
