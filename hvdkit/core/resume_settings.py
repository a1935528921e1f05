"""Which optimizer settings a resumed checkpoint changes from the ones the code gives: on resume the
checkpoint's win (the run goes on as it was), and each one that differs is named to the user."""

from __future__ import annotations

import math
from collections.abc import Mapping


def changed_settings(code: Mapping[str, object], saved: Mapping[str, object]) -> list[str]:
    """One phrase per setting both hold with different values (``saved`` None means not recorded)."""
    return [f"{k} {_show(code[k])} in the code, {_show(saved[k])} in the checkpoint" for k in code
            if k in saved and saved[k] is not None and not _same(code[k], saved[k])]


def _same(a: object, b: object) -> bool:
    """Equal, numbers up to rounding (an LR rescaled and back)."""
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and math.isclose(a, b, rel_tol=1e-9)
    return a == b


def _show(value: object) -> str:
    """A setting for people: floats to 7 digits (Keras keeps the LR in float32)."""
    return f"{value:.7g}" if isinstance(value, float) else repr(value)
