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



def resolve_reduction(hvd: Any, compression: Any, op: Any) -> tuple[Any, Any]:
    """Horovod's compressor and reduce op, from hvdkit's names (``"fp16"``, ``"average"``) or from Horovod's
    own objects (``hvd.Compression.fp16``, ``hvd.Average``): the Horovod-compatible APIs take both."""
    if isinstance(compression, str):
        check_choice("compression", compression, list(COMPRESSIONS))
        compression = getattr(hvd.Compression, COMPRESSIONS[compression])
    elif not (hasattr(compression, "compress") and hasattr(compression, "decompress")):
        raise ValueError(f"compression must be one of {list(COMPRESSIONS)} or a Horovod compressor "
                         f"(hvd.Compression.none, hvd.Compression.fp16), got {compression!r}")
    if isinstance(op, str):
        check_choice("op", op, list(REDUCE_OPS))
        op = getattr(hvd, REDUCE_OPS[op])
    else:
        ops = [getattr(hvd, n) for n in ("Average", "Sum", "Adasum", "Min", "Max", "Product") if hasattr(hvd, n)]
        if isinstance(op, bool) or op not in ops:
            raise ValueError(f"op must be one of {list(REDUCE_OPS)} or a Horovod reduce op "
                             f"(hvd.Average, hvd.Sum, hvd.Adasum, ...), got {op!r}")
    return compression, op
