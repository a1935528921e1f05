"""A checkpoint payload format that cannot carry code: plain data and NumPy arrays, nothing else.

``pickle`` (and ``torch.load(weights_only=False)``) run whatever a payload names while reading it, so
a file dropped into a shared checkpoint folder runs code in every job that resumes from it. This
format holds a JSON tree (dicts, lists, tuples, strings, numbers, booleans, None, bytes) whose
arrays are stored as raw bytes after it, with their dtype and shape. Reading builds only those
types; an array's dtype must be a plain numeric or boolean one.

Layout: ``MAGIC``, an 8-byte little-endian header length, the JSON header
``{"tree": ..., "arrays": [{"dtype", "shape", "nbytes"}, ...]}``, then each array's bytes in order.
Writing streams the arrays without copying them into one buffer.
"""

from __future__ import annotations

import base64
import json
import math
import struct
from collections.abc import Callable
from typing import Any, BinaryIO

MAGIC = b"HVDKIT-SAFE-1\n"
_SAFE_KINDS = set("biufc")  # bool, signed/unsigned int, float, complex


class UnsafePayloadError(ValueError):
    """A value that this format cannot hold (the message names where it is)."""


def _encode(obj: Any, arrays: list[Any], path: str) -> Any:
    import numpy as np

    if isinstance(obj, (np.ndarray, np.generic)):  # first: np.float64 is also a float
        arr = np.asarray(obj)
        if arr.dtype.kind not in _SAFE_KINDS:
            raise UnsafePayloadError(f"{path}: a NumPy array of dtype {arr.dtype} (only numeric and bool arrays)")
        arrays.append(arr if arr.flags.c_contiguous else arr.copy(order="C"))  # keeps 0-d arrays 0-d
        return {"__array__": len(arrays) - 1, "scalar": isinstance(obj, np.generic)}
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else {"__float__": repr(obj)}
    if isinstance(obj, (bytes, bytearray)):
        return {"__bytes__": base64.b64encode(bytes(obj)).decode()}
    if isinstance(obj, list):
        return [_encode(v, arrays, f"{path}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, tuple):
        return {"__tuple__": [_encode(v, arrays, f"{path}[{i}]") for i, v in enumerate(obj)]}
    if isinstance(obj, dict):
        return {"__dict__": [[_encode(k, arrays, f"{path} key"), _encode(v, arrays, f"{path}[{k!r}]")]
                             for k, v in obj.items()]}
    raise UnsafePayloadError(f"{path}: a {type(obj).__module__}.{type(obj).__qualname__} (only plain data and "
                             "NumPy arrays are checkpointed without pickle)")


def dump(obj: Any, f: BinaryIO) -> None:
    """Write ``obj`` to the binary file ``f``; raises :class:`UnsafePayloadError` naming any part it cannot hold."""
    arrays: list[Any] = []
    tree = _encode(obj, arrays, "checkpoint")
    meta = [{"dtype": a.dtype.str, "shape": list(a.shape), "nbytes": a.nbytes} for a in arrays]
    header = json.dumps({"tree": tree, "arrays": meta}, allow_nan=False).encode()
    f.write(MAGIC)
    f.write(struct.pack("<Q", len(header)))
    f.write(header)
    for a in arrays:
        if a.nbytes:
            f.write(memoryview(a.reshape(-1).view("u1")))


def _decode(node: Any, arrays: list[Any]) -> Any:
    if isinstance(node, list):
        return [_decode(v, arrays) for v in node]
    if not isinstance(node, dict):
        return node
    if "__array__" in node:
        arr = arrays[node["__array__"]]
        return arr[()] if node.get("scalar") else arr
    if "__float__" in node:
        return float(node["__float__"])
    if "__bytes__" in node:
        return base64.b64decode(node["__bytes__"])
    if "__tuple__" in node:
        return tuple(_decode(v, arrays) for v in node["__tuple__"])
    if "__dict__" in node:
        return {_freeze(_decode(k, arrays)): _decode(v, arrays) for k, v in node["__dict__"]}
    raise ValueError(f"not an hvdkit safe payload node: {sorted(node)}")


def _freeze(key: Any) -> Any:
    return tuple(_freeze(k) for k in key) if isinstance(key, list) else key


def loads(data: bytes) -> Any:
    """Read what :func:`dump` wrote; builds only plain data and numeric arrays (never runs code)."""
    import numpy as np

    if not data.startswith(MAGIC):
        raise ValueError("not an hvdkit safe-format payload (no header): written by an older hvdkit with pickle? "
                         "Resume it only if you trust the folder, with Checkpoint(..., trust_pickle=True)")
    pos = len(MAGIC)
    (n,) = struct.unpack_from("<Q", data, pos)
    pos += 8
    header = json.loads(data[pos:pos + n])
    pos += n
    arrays = []
    for meta in header["arrays"]:
        dtype = np.dtype(meta["dtype"])
        if dtype.kind not in _SAFE_KINDS:
            raise ValueError(f"refusing an array of dtype {dtype} in a checkpoint")
        nbytes = int(meta["nbytes"])
        arr = np.frombuffer(data, dtype=dtype, count=nbytes // dtype.itemsize if dtype.itemsize else 0, offset=pos)
        arrays.append(arr.reshape(meta["shape"]).copy())
        pos += nbytes
    return _decode(header["tree"], arrays)


def check_plain(obj: Any, leaf_types: tuple[type, ...], path: str) -> None:
    """Raise :class:`UnsafePayloadError` naming the first part of ``obj`` that is neither plain data nor one
    of ``leaf_types`` (what ``torch.load(weights_only=True)`` accepts, with tensors as leaves)."""
    from collections import OrderedDict

    if obj is None or isinstance(obj, (bool, int, float, str, bytes)) or isinstance(obj, leaf_types):
        return
    if type(obj) in (list, tuple):
        for i, v in enumerate(obj):
            check_plain(v, leaf_types, f"{path}[{i}]")
        return
    if type(obj) in (dict, OrderedDict):
        for k, v in obj.items():
            check_plain(k, leaf_types, f"{path} key")
            check_plain(v, leaf_types, f"{path}[{k!r}]")
        return
    raise UnsafePayloadError(f"{path}: a {type(obj).__module__}.{type(obj).__qualname__} (checkpoints hold "
                             "tensors and plain data, so that loading them never runs code)")


def writer(obj: Any) -> Callable[[BinaryIO], None]:
    """A payload function for :meth:`CheckpointStore.save` that writes ``obj`` in this format."""
    return lambda f: dump(obj, f)
