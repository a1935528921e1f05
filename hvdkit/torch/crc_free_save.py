"""``torch.save`` without the zip format's CRC-32 of every record: hvdkit's checkpoint files have their own checksum.

``torch.save`` computes a CRC-32 of every record it writes, every tensor's bytes included. Here that took
0.111 s of CPU per 256 MB (``torch.save`` into a writer that discards the bytes: 0.111 s with it, 0.001 s
without), about half of what an asynchronous checkpoint write costs on its thread (0.21-0.24 s per 256 MB,
docs/benchmarks.md). hvdkit's checkpoint store checksums the whole file with XXH3 (0.034 s per 256 MB) and
verifies it before a single byte is deserialised (:mod:`hvdkit.core.atomic_file`), so the CRC-32 guards
nothing the store does not.

``torch.serialization.set_crc32_options(False)`` turns it off for the whole process: a ``torch.save`` that
the training thread (or the user) runs while a checkpoint is written on a background thread would lose its
CRC-32 too. :func:`save_without_crc32` therefore does for its own file what ``torch.save`` does for a file
object, with the CRC-32 off for that file only: it builds torch's zip writer
(``torch._C.PyTorchFileWriter(f, compute_crc32=False, alignment)``) and pickles into it with
``torch.serialization._save``. Both are private, so the first call checks them: it saves a small state
dict that way, reads it back with ``torch.load(weights_only=True)`` and compares. If anything in that fails
(another torch's signatures), every call uses plain ``torch.save``, and :func:`crc32_off` says so.

The file stays an ordinary ``torch.save`` zip: ``torch.load`` reads it, ``weights_only`` too. Tools that
check zip CRCs (``unzip -t``) report every record's as wrong; hvdkit's manifest is the checksum to check.
"""

from __future__ import annotations

import contextlib
import functools
import io
import pickle
import warnings
import zipfile
from typing import Any

import torch
import torch.serialization as _ser

#: The parameters ``torch.serialization._save`` has in the torch versions this fast path was checked with.
_SAVE_PARAMETERS = ["obj", "zip_file", "pickle_module", "pickle_protocol", "_disable_byteorder_record"]


class _Sink:
    """Hands the zip writer's bytes to ``f``. Once a save has failed it drops whatever comes after: torch's
    writer, if not finalised, finalises itself in its C++ destructor, and a Python exception there (a write
    to the file the failed save has closed meanwhile) would end the process instead of being reported."""

    def __init__(self, f: Any) -> None:
        self.f = f
        self.failed = False

    def write(self, data: Any) -> int:
        if self.failed:
            return memoryview(data).nbytes
        try:
            return self.f.write(data)
        except BaseException:
            self.failed = True
            raise


def _save_fast(obj: Any, f: Any) -> None:
    sink = _Sink(f)
    # compute_crc32=False; torch's stubs type the buffer as IO[bytes], the binding needs only .write
    writer = torch._C.PyTorchFileWriter(sink, False, _ser._get_storage_alignment())  # type: ignore[call-overload]
    try:
        _ser._save(obj, writer, pickle, _ser.DEFAULT_PROTOCOL, False)
        writer.write_end_of_file()
    except BaseException:
        sink.failed = True  # the file is discarded: finalise the writer into nothing, never into a closed file
        with contextlib.suppress(Exception):
            writer.write_end_of_file()
        raise
    f.flush()


@functools.cache
def _fast_path_error() -> str | None:
    """None if :func:`_save_fast` works on this torch, else why not (checked once per process)."""
    import inspect

    try:
        params = list(inspect.signature(_ser._save).parameters)
        if params != _SAVE_PARAMETERS:
            return f"torch.serialization._save takes {params}, not {_SAVE_PARAMETERS}"
        weights = torch.arange(6, dtype=torch.float32).reshape(2, 3)
        buf = io.BytesIO()
        _save_fast({"w": weights, "step": 3, "names": ["a", "b"]}, buf)
        back = torch.load(io.BytesIO(buf.getvalue()), map_location="cpu", weights_only=True)
        if back.keys() != {"w", "step", "names"} or not torch.equal(back["w"], weights) or back["step"] != 3 \
                or back["names"] != ["a", "b"]:
            return "a state dict saved without CRC-32 did not load back equal"
        with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as z:
            if any(i.CRC for i in z.infolist() if "/data/" in i.filename):
                return "torch's zip writer wrote a CRC-32 though asked not to"
    except Exception as exc:  # another torch: private names missing or changed
        return f"{type(exc).__name__}: {exc}"
    return None


@functools.cache
def _checked() -> bool:
    """:func:`_fast_path_error` once, warning (once) when saves fall back to ``torch.save``."""
    error = _fast_path_error()
    if error is not None:
        warnings.warn(f"hvdkit: checkpoints are written by plain torch.save, with its CRC-32 ({error})",
                      RuntimeWarning, stacklevel=3)
    return error is None


def crc32_off() -> bool:
    """True if :func:`save_without_crc32` skips the CRC-32 on this torch, False if it falls back to
    ``torch.save`` (:func:`fast_path_error` says why)."""
    return _fast_path_error() is None


def fast_path_error() -> str | None:
    """Why :func:`save_without_crc32` falls back to plain ``torch.save`` on this torch, or None."""
    return _fast_path_error()


def save_without_crc32(obj: Any, f: Any) -> None:
    """``torch.save(obj, f)`` into the binary file object ``f``, without the per-record CRC-32 (when this
    torch allows it, else plain ``torch.save``). The process-wide CRC-32 setting is neither read nor
    changed."""
    if _checked():
        _save_fast(obj, f)
    else:
        torch.save(obj, f)
