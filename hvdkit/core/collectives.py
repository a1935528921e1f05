"""The gradient-reduction names every adapter offers (``compression=``, ``op=``), checked and looked up
in the Horovod binding given, so names and error messages are the same everywhere.
"""

from __future__ import annotations

from typing import Any

from hvdkit.core.validation import check_choice

#: ``compression=`` names: ``"fp16"`` halves the bytes on the wire (Horovod's ``Compression.fp16``).
COMPRESSIONS: dict[str, str] = {"none": "none", "fp16": "fp16"}
#: ``op=`` names: how gradients are combined across workers.
REDUCE_OPS: dict[str, str] = {"average": "Average", "sum": "Sum", "adasum": "Adasum"}


def horovod_reduction(hvd: Any, compression: str, op: str) -> tuple[Any, Any]:
    """Horovod's compressor class and reduce op for ``compression``/``op`` in the binding ``hvd``."""
    return resolve_reduction(hvd, check_choice("compression", compression, list(COMPRESSIONS)),
                             check_choice("op", op, list(REDUCE_OPS)))


def resolve_reduction(hvd: Any, compression: Any, op: Any) -> tuple[Any, Any]:
    """:func:`horovod_reduction` that also takes Horovod's own objects (``hvd.Compression.fp16``,
    ``hvd.Average``), as the Horovod-compatible APIs do."""
    if isinstance(compression, str):
        compression = getattr(hvd.Compression, COMPRESSIONS[check_choice("compression", compression, COMPRESSIONS)])
    elif not (hasattr(compression, "compress") and hasattr(compression, "decompress")):
        raise ValueError(f"compression must be one of {list(COMPRESSIONS)} or a Horovod compressor "
                         f"(hvd.Compression.none, hvd.Compression.fp16), got {compression!r}")
    if isinstance(op, str):
        op = getattr(hvd, REDUCE_OPS[check_choice("op", op, REDUCE_OPS)])
    else:
        ops = [getattr(hvd, n) for n in ("Average", "Sum", "Adasum", "Min", "Max", "Product") if hasattr(hvd, n)]
        if isinstance(op, bool) or op not in ops:
            raise ValueError(f"op must be one of {list(REDUCE_OPS)} or a Horovod reduce op "
                             f"(hvd.Average, hvd.Sum, hvd.Adasum, ...), got {op!r}")
    return compression, op
