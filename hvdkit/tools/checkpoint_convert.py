"""``hvdkit checkpoint convert SRC [DST]``: rewrite checkpoints of older hvdkit formats (2, 3) as format 4.

Format 3 held one ``.bin`` payload: ``torch.save``'s zip for PyTorch, the ``HVDKIT-SAFE-1`` layout (JSON
tree, then raw arrays) for Keras, pickles before that. A converted checkpoint keeps its name, counters,
run identity and sequence, so the folder resumes where it stopped. Pickles are read only with
``--trust-pickle``; a payload failing its checksum is reported and left as it is.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import struct
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from hvdkit.core.atomic_file import atomic_write, checksum, fsync_dir
from hvdkit.core.checkpoint_manifest import manifest_text, open_regular, payload_path, read_regular
from hvdkit.core.checkpoint_store import FORMAT_VERSION, TENSORS_SUFFIX, CheckpointStore, Manifest, read_manifest
from hvdkit.core.checkpoint_tree import NUMERIC_KINDS, join, numpy_leaf, numpy_payload, split

OLD_KERAS_MAGIC = b"HVDKIT-SAFE-1\n"


def read_old_keras(data: bytes) -> Any:
    """A format-3 Keras payload: magic, 8-byte little-endian header length, JSON header, raw arrays."""
    import numpy as np

    pos = len(OLD_KERAS_MAGIC)
    (n,) = struct.unpack_from("<Q", data, pos)
    header = json.loads(data[pos + 8:pos + 8 + n])
    pos += 8 + n
    arrays = []
    for meta in header["arrays"]:
        dtype = np.dtype(meta["dtype"])
        if dtype.kind not in NUMERIC_KINDS:
            raise ValueError(f"refusing an array of dtype {dtype}")
        nbytes = int(meta["nbytes"])
        count = nbytes // dtype.itemsize if dtype.itemsize else 0
        arrays.append(np.frombuffer(data, dtype=dtype, count=count, offset=pos).reshape(meta["shape"]).copy())
        pos += nbytes
    return join(header["tree"], dict(enumerate(arrays)), tag="__array__")


def _decode(framework: str, data: bytes, trust_pickle: bool) -> tuple[Any, Any]:
    """The snapshot in an old payload, split into format 4's JSON tree and tensor payload."""
    if framework == "torch":
        import torch

        from hvdkit.torch.ops import dump_tensors

        return dump_tensors(torch.load(io.BytesIO(data), map_location="cpu", weights_only=not trust_pickle))
    if data.startswith(OLD_KERAS_MAGIC):
        snapshot = read_old_keras(data)
    elif trust_pickle:
        import pickle

        snapshot = pickle.loads(data)  # the user vouched for the folder (--trust-pickle)
    else:
        raise ValueError("a pickled payload (hvdkit before its safe format); convert it only if you trust the "
                         "folder, with --trust-pickle")
    tree, arrays = split(snapshot, numpy_leaf)
    return tree, numpy_payload(arrays)


def _verify(manifest: Manifest, data: bytes) -> None:
    if len(data) != manifest.size:
        raise ValueError(f"truncated: {len(data)} of {manifest.size} bytes")
    algorithm, _, _ = manifest.checksum.partition(":")
    actual = checksum(data) if algorithm == "xxh3_128" else f"{algorithm}:{hashlib.new(algorithm, data).hexdigest()}"
    if actual != manifest.checksum:
        raise ValueError(f"fails its checksum ({algorithm})")


def convert_one(src: Path, manifest_path: Path, dst: Path, trust_pickle: bool = False) -> Manifest:
    """Convert one old checkpoint of folder ``src`` into folder ``dst`` (may be ``src``); return its manifest."""
    old = read_manifest(manifest_path)
    payload = payload_path(src, old)
    data = read_regular(payload)
    _verify(old, data)
    tree, write = _decode(old.framework, data, trust_pickle)
    stem = manifest_path.stem
    size, digest = atomic_write(dst / f"{stem}{TENSORS_SUFFIX}", write)
    new = replace(old, format=FORMAT_VERSION, size=size, checksum=digest, payload=f"{stem}{TENSORS_SUFFIX}")
    atomic_write(dst / manifest_path.name, manifest_text(new, tree))  # in place: format 4 from here on
    fsync_dir(dst)
    if dst.resolve() == src.resolve() and payload.name != new.payload:
        payload.unlink(missing_ok=True)
    return new


def _copy(source: Path) -> Any:
    """A payload writer copying the regular file ``source`` (never through a symbolic link)."""
    def write(target: Path) -> None:
        with open(open_regular(source), "rb") as f, open(target, "wb") as out:
            shutil.copyfileobj(f, out, 1 << 24)
    return write


def convert(src: Path, dst: Path | None = None, *, trust_pickle: bool = False, out: Any = sys.stdout) -> int:
    """Convert every old checkpoint of ``src`` (into ``dst``, or in place); format-4 ones are copied to ``dst``
    or left alone. Returns 0 when every checkpoint is format 4 in the end, 1 if some could not be converted."""
    if not src.is_dir():
        print(f"hvdkit checkpoint convert: SRC must be a checkpoint folder, got {str(src)!r}", file=sys.stderr)
        return 2
    dst = src if dst is None else dst
    if dst.exists() and not dst.is_dir():
        print(f"hvdkit checkpoint convert: DST must be a folder, got {str(dst)!r}, an existing file",
              file=sys.stderr)
        return 2
    dst.mkdir(parents=True, exist_ok=True)
    failed = 0
    for path in reversed(CheckpointStore(src).manifests()):
        try:
            manifest = read_manifest(path)
            if manifest.format >= FORMAT_VERSION:
                if dst.resolve() != src.resolve():  # atomic: a link planted in DST is replaced, not written through
                    atomic_write(dst / manifest.payload, _copy(payload_path(src, manifest)))
                    atomic_write(dst / path.name, read_regular(path))
                print(f"{path.name}: format {manifest.format} already", file=out)
                continue
            convert_one(src, path, dst, trust_pickle)
            print(f"{path.name}: format {manifest.format} -> {FORMAT_VERSION}", file=out)
        except Exception as exc:  # one damaged checkpoint must not stop the others
            failed += 1
            print(f"{path}: not converted: {type(exc).__name__}: {exc}", file=sys.stderr)
    return 1 if failed else 0
