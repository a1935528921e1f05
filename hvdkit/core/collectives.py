"""The gradient-reduction choices every adapter offers, named once.

Each adapter's Horovod binding (``horovod.torch``, ``horovod.tensorflow``) has the same
``Compression`` class and reduce ops; :func:`horovod_reduction` validates the user's names
and looks them up in the binding it is given, so the names, their checks and their error
messages are the same in every adapter.
"""

from __future__ import annotations

from typing import Any

from hvdkit.core.validation import check_choice

#: ``compression=`` names: ``"fp16"`` halves the bytes on the wire (Horovod's ``Compression.fp16``).
COMPRESSIONS: dict[str, str] = {"none": "none", "fp16": "fp16"}
#: ``op=`` names: how gradients are combined across workers.
REDUCE_OPS: dict[str, str] = {"average": "Average", "sum": "Sum", "adasum": "Adasum"}


def check_reduction(compression: str, op: str) -> None:
    """Raise a ValueError naming the argument, the value and the allowed names."""
    check_choice("compression", compression, list(COMPRESSIONS))
    check_choice("op", op, list(REDUCE_OPS))


def horovod_reduction(hvd: Any, compression: str, op: str) -> tuple[Any, Any]:
    """Horovod's compressor class and reduce op for ``compression``/``op`` in the binding ``hvd``."""
    check_reduction(compression, op)
    return getattr(hvd.Compression, COMPRESSIONS[compression]), getattr(hvd, REDUCE_OPS[op])
