"""A checkpoint's state as two halves: a JSON tree and the named tensors it refers to.

:func:`split` takes a snapshot apart, :func:`join` puts it back (the JSON encoding of tuples, non-string
keys, non-finite floats and bytes: docs/checkpoint-format.md). Neither builds anything but plain data
and safetensors' arrays, so loading a checkpoint never runs code from the folder.
"""

from __future__ import annotations

import base64
import json
import math
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

TENSOR, TUPLE, DICT, FLOAT, BYTES = "__tensor__", "__tuple__", "__dict__", "__float__", "__bytes__"

#: Given a value, the tensor to store for it (and whether it was a NumPy scalar), or None if it is no tensor.
Leaf = Callable[[Any], "tuple[Any, bool] | None"]


class UnsupportedValueError(ValueError):
    """A value a checkpoint cannot hold (the message names where it is)."""


def split(obj: Any, leaf: Leaf) -> tuple[Any, dict[str, Any]]:
    """``obj`` as a JSON-serialisable tree plus the tensors it refers to, by key. Keys are the tensors' paths
    in ``obj`` joined by ``/`` (``framework/model/fc.weight``), so the safetensors file reads on its own."""
    tensors: dict[str, Any] = {}

    def encode(o: Any, path: tuple[str, ...], where: str) -> Any:
        try:
            found = leaf(o)
        except UnsupportedValueError as exc:
            raise UnsupportedValueError(f"{where}: {exc}") from None
        if found is not None:
            key = "/".join(path) or "tensor"
            if key in tensors:  # two paths that join alike (a key holding "/")
                key = f"{key}#{len(tensors)}"
            tensors[key] = found[0]
            return {TENSOR: key, "scalar": True} if found[1] else {TENSOR: key}
        if o is None or (isinstance(o, (bool, str, int)) and type(o).__module__ == "builtins"):
            return o
        if type(o) is float:
            return o if math.isfinite(o) else {FLOAT: repr(o)}
        if type(o) is bytes:
            return {BYTES: base64.b64encode(o).decode()}
        if type(o) is list:
            return [encode(v, (*path, str(i)), f"{where}[{i}]") for i, v in enumerate(o)]
        if isinstance(o, tuple) and not hasattr(o, "_fields"):  # torch.Size too; not a namedtuple
            return {TUPLE: [encode(v, (*path, str(i)), f"{where}[{i}]") for i, v in enumerate(o)]}
        if type(o) in (dict, OrderedDict):
            if all(type(k) is str and not k.startswith("__") for k in o):
                return {k: encode(v, (*path, k), f"{where}[{k!r}]") for k, v in o.items()}
            return {DICT: [[encode(k, (*path, "key"), f"{where} key"), encode(v, (*path, str(k)), f"{where}[{k!r}]")]
                           for k, v in o.items()]}
        raise UnsupportedValueError(f"{where}: a {type(o).__module__}.{type(o).__qualname__} (checkpoints hold "
                                    "tensors, arrays and plain data, so that loading them never runs code)")

    return encode(obj, (), "checkpoint"), tensors


def join(tree: Any, tensors: dict[Any, Any], *, tag: str = TENSOR) -> Any:
    """Rebuild what :func:`split` took apart; raises ValueError naming a tensor key the file lacks. ``tag``
    names the tensor references (format 3's Keras layout called them ``__array__``, by index)."""
    if isinstance(tree, list):
        return [join(v, tensors, tag=tag) for v in tree]
    if not isinstance(tree, dict):
        return tree
    if tag in tree:
        key = tree[tag]
        if key not in tensors:
            raise ValueError(f"the checkpoint's JSON refers to tensor {key!r}, which its safetensors file lacks")
        value = tensors[key]
        return value[()] if tree.get("scalar") else value
    if TUPLE in tree:
        return tuple(join(v, tensors, tag=tag) for v in tree[TUPLE])
    if DICT in tree:
        return {hashable_key(join(k, tensors, tag=tag)): join(v, tensors, tag=tag) for k, v in tree[DICT]}
    if FLOAT in tree:
        return float(tree[FLOAT])
    if BYTES in tree:
        return base64.b64decode(tree[BYTES])
    return {k: join(v, tensors, tag=tag) for k, v in tree.items()}


def hashable_key(key: Any) -> Any:
    """A decoded dict key with its JSON lists turned back into (hashable) tuples."""
    return tuple(hashable_key(k) for k in key) if isinstance(key, list) else key


NUMERIC_KINDS = set("biufc")  # bool, signed/unsigned int, float, complex


def numpy_leaf(o: Any) -> tuple[Any, bool] | None:
    """The :data:`Leaf` for NumPy arrays and scalars."""
    import numpy as np

    if not isinstance(o, (np.ndarray, np.generic)):
        return None
    arr = np.asarray(o)
    if arr.dtype.kind not in NUMERIC_KINDS:
        raise UnsupportedValueError(f"a NumPy array of dtype {arr.dtype} (only numeric and bool arrays)")
    return (arr if arr.flags.c_contiguous else arr.copy(order="C")), isinstance(o, np.generic)


def numpy_payload(arrays: dict[str, Any]) -> Callable[[Path], None]:
    """A payload for :meth:`~hvdkit.core.checkpoint_store.CheckpointStore.save` writing ``arrays`` as safetensors."""
    from safetensors.numpy import save_file

    return lambda path: save_file(arrays, str(path))


#: safetensors' dtype codes and the type names NumPy and torch share (torch has all, NumPy not BF16 and F8)
DTYPES = {"BOOL": "bool", "U8": "uint8", "I8": "int8", "U16": "uint16", "I16": "int16", "F16": "float16",
          "BF16": "bfloat16", "U32": "uint32", "I32": "int32", "F32": "float32", "U64": "uint64", "I64": "int64",
          "F64": "float64", "C64": "complex64", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2"}


def tensor_bytes(data: Any) -> dict[str, tuple[str, list[int], Any]]:
    """A safetensors file's tensors as ``(type name, shape, uint8 array)``, each array a writable view of
    ``data`` (a NumPy uint8 array; ``bytes``, read-only, is copied once): no tensor is copied."""
    import numpy as np

    buf = np.frombuffer(data, np.uint8)
    buf = buf if buf.flags.writeable else buf.copy()
    try:  # parsed here: safetensors reads a header only from a path (safe_open) or copying every tensor out
        start = 8 + int.from_bytes(buf[:8].tobytes(), "little")
        header = json.loads(buf[8:start].tobytes())  # a length past the end: cut JSON, or no tensor fits
        header.pop("__metadata__", None)
        tensors = {}
        for name, t in header.items():
            begin, end = t["data_offsets"]
            if not 0 <= begin <= end <= len(buf) - start:
                raise ValueError(f"tensor {name!r} lies at bytes {begin}-{end} of {len(buf) - start}")
            tensors[name] = (DTYPES[t["dtype"]], list(t["shape"]), buf[start + begin:start + end])
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not a safetensors file hvdkit reads: {exc!r}") from None
    return tensors


def load_numpy(data: Any) -> dict[str, Any]:
    """The arrays of a safetensors file's bytes (each a writable view: :func:`tensor_bytes`)."""
    import numpy as np

    return {k: raw.view(np.dtype(name)).reshape(shape) for k, (name, shape, raw) in tensor_bytes(data).items()}
