"""Offline data for the examples: the 8x8 digits in ``data/digits.npz`` (see data/README.md), or a local MNIST
``.npz``."""

from __future__ import annotations

from pathlib import Path

import numpy as np

DIGITS = Path(__file__).resolve().parent / "data" / "digits.npz"


def load(npz: str | None = None, seed: int = 42) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(x_train, y_train, x_val, y_val)`` as float32 in [0, 1] (flattened) and int64 labels."""
    if npz:
        with np.load(npz) as d:
            x_tr, y_tr, x_te, y_te = d["x_train"], d["y_train"], d["x_test"], d["y_test"]
        x_tr = x_tr.reshape(len(x_tr), -1).astype(np.float32) / 255.0
        x_te = x_te.reshape(len(x_te), -1).astype(np.float32) / 255.0
        return x_tr, y_tr.astype(np.int64), x_te, y_te.astype(np.int64)
    with np.load(DIGITS) as d:
        x, y = d["x"], d["y"]
    x = (x / 16.0).astype(np.float32)
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = x[order], y[order].astype(np.int64)
    split = int(0.8 * len(x))
    return x[:split], y[:split], x[split:], y[split:]
