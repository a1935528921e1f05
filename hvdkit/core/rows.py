"""Rows of nested inputs: a tuple, list or dict of arrays (nested too), cut alike. The one helper behind every
adapter's ``shard`` and Keras's ``fit_elastic``.

Plain recursion over the three containers PyTorch and Keras take as inputs: the core imports no framework, so
``keras.tree`` and ``tf.nest`` are not available to it, and the adapters' leaves differ only in how a row
index is applied.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def leaves(data: Any) -> list[Any]:
    """The arrays of ``data`` in order (``data`` itself when it is no tuple, list or dict)."""
    if isinstance(data, Mapping):
        return [leaf for v in data.values() for leaf in leaves(v)]
    if isinstance(data, (tuple, list)):
        return [leaf for v in data for leaf in leaves(v)]
    return [data]


def map_leaves(data: Any, fn: Callable[[Any], Any]) -> Any:
    """``data`` with ``fn`` applied to each array, the containers rebuilt as they were."""
    if isinstance(data, Mapping):
        return {k: map_leaves(v, fn) for k, v in data.items()}
    if isinstance(data, (tuple, list)):
        return type(data)(map_leaves(v, fn) for v in data)
    return fn(data)


def num_rows(data: Any, what: str = "data") -> int:
    """The number of rows every array of ``data`` holds; an error names ``what`` when they differ, when a
    container is empty or when a part has no length."""
    parts = leaves(data)
    if not parts:
        raise ValueError(f"{what} must hold at least one array, got an empty {type(data).__name__}")
    lengths = []
    for part in parts:
        if not hasattr(part, "__len__"):
            raise TypeError(f"{what} must hold arrays with a length, got {type(part).__name__}")
        lengths.append(len(part))
    if len(set(lengths)) > 1:
        raise ValueError(f"{what}'s parts must hold the same number of rows, got {' and '.join(map(str, lengths))}")
    return lengths[0]
