"""Python's and NumPy's global generator states as JSON-able data, so a resumed run draws what the
uninterrupted one would have."""

from __future__ import annotations

import random
from typing import Any


def capture_host_rng() -> dict[str, Any]:
    """Python's and NumPy's global generator states, as lists and numbers."""
    import numpy as np

    kind, keys, pos, has_gauss, cached = np.random.get_state()
    version, internal, gauss_next = random.getstate()
    return {"numpy": [str(kind), [int(k) for k in keys], int(pos), int(has_gauss), float(cached)],
            "python": [int(version), [int(k) for k in internal], gauss_next]}


def restore_host_rng(state: dict[str, Any]) -> None:
    """Put :func:`capture_host_rng`'s states back."""
    import numpy as np

    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    version, internal, gauss_next = state["python"]
    random.setstate((version, tuple(internal), gauss_next))
