"""Up-front argument checks whose messages name the argument, the value and what is allowed."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any


def _fail(name: str, value: Any, allowed: str) -> ValueError:
    return ValueError(f"{name} must be {allowed}, got {value!r}")


def check_int(name: str, value: Any, *, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        bound = f" >= {minimum}" if minimum is not None else ""
        raise _fail(name, value, f"an integer{bound}")
    if minimum is not None and value < minimum:
        raise _fail(name, value, f"an integer >= {minimum}")
    return value


def check_number(name: str, value: Any, *, minimum: float | None = None, maximum: float | None = None,
                 strict_min: bool = False) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    low = "" if minimum is None else (f" > {minimum}" if strict_min else f" >= {minimum}")
    high = "" if maximum is None else f" <= {maximum}"
    allowed = f"a finite number{low}{' and' if low and high else ''}{high}"
    if not ok:
        raise _fail(name, value, allowed)
    if minimum is not None and (value <= minimum if strict_min else value < minimum):
        raise _fail(name, value, allowed)
    if maximum is not None and value > maximum:
        raise _fail(name, value, allowed)
    return float(value)


def check_choice(name: str, value: Any, choices: Iterable[Any]) -> Any:
    choices = list(choices)
    if value not in choices:
        raise _fail(name, value, "one of " + ", ".join(repr(c) for c in choices))
    return value


def check_callable(name: str, value: Any) -> Any:
    if not callable(value):
        raise _fail(name, value, "callable")
    return value
