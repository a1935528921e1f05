"""Loading format 4: tensors are views of the one verified read of the file, so they must be exactly what
safetensors itself reads, writable, and untouched by anything that later happens to the file."""

import json
import warnings

import numpy as np
import pytest
import torch
from safetensors.numpy import load as safetensors_numpy_load
from safetensors.numpy import save as safetensors_numpy_save
from safetensors.torch import load as safetensors_load
from safetensors.torch import save as safetensors_save

from hvdkit.core import CheckpointStore
from hvdkit.core.checkpoint_tree import DTYPES, load_numpy, tensor_bytes
from hvdkit.torch.ops import dump_tensors, load_tensors


def every_dtype():
    g = torch.Generator().manual_seed(0)
    tensors = {}
    for i, name in enumerate(DTYPES.values()):
        dtype = getattr(torch, name)
        columns = 3 if dtype.itemsize == 1 else 2 * dtype.itemsize  # odd byte counts too
        tensors[name] = torch.randint(0, 256, (3 + i % 4, columns), dtype=torch.uint8, generator=g).view(dtype)
    tensors["bool"] = tensors["bool"] % 2 == 1  # only 0 and 1 are bools
    tensors["zero_d"], tensors["empty"] = torch.tensor(7, dtype=torch.int64), torch.zeros(0, 3, dtype=torch.float16)
    return tensors


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.reshape(-1).view(torch.uint8),
                                                                      b.reshape(-1).view(torch.uint8))


def test_every_dtype_loads_exactly_as_safetensors_reads_it():
    data = safetensors_save(every_dtype())
    tree = {k: {"__tensor__": k} for k in every_dtype()}
    theirs, ours = safetensors_load(data), load_tensors(tree, np.frombuffer(bytearray(data), np.uint8))
    assert sorted(ours) == sorted(theirs) and all(same(ours[k], theirs[k]) for k in theirs)
    data = safetensors_numpy_save({k: t.numpy() for k, t in theirs.items() if not k.startswith(("bf", "float8"))})
    theirs_np, ours_np = safetensors_numpy_load(data), load_numpy(data)
    assert sorted(ours_np) == sorted(theirs_np) and len(ours_np) == len(DTYPES) - 1
    assert all(ours_np[k].dtype == theirs_np[k].dtype and np.array_equal(ours_np[k], theirs_np[k]) for k in ours_np)
    assert all(a.flags.writeable for a in [*ours_np.values(), *load_numpy(bytes(data)).values()])


def test_loaded_tensors_are_writable_and_independent_of_the_file(tmp_path):
    store = CheckpointStore(tmp_path, keep=1)
    snapshot = {"w": torch.arange(12.0).reshape(3, 4), "h": torch.ones(5, dtype=torch.bfloat16), "step": 3}
    tree, payload = dump_tensors(snapshot)
    manifest = store.save(payload, state=tree, epoch=1, global_step=1, world_size=1, framework="torch")
    found = store.latest()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch warns when it wraps memory it may not write
        loaded = load_tensors(found.state, found.data)
        from_bytes = load_tensors(found.state, (tmp_path / manifest.payload).read_bytes())
    # torch warns once per process: the arrays' own flags tell, whichever test ran first
    assert all(raw.flags.writeable for *_, raw in tensor_bytes((tmp_path / manifest.payload).read_bytes()).values())
    path = tmp_path / manifest.payload
    with open(path, "r+b") as f:  # the file changes in place after the load (a copy over it, a bad disk)
        f.write(b"\xff" * path.stat().st_size)
    path.unlink()
    for got in (loaded, from_bytes):
        assert torch.equal(got["w"], snapshot["w"]) and torch.equal(got["h"], snapshot["h"]) and got["step"] == 3
        got["w"].add_(1)
        got["h"].mul_(2)
        assert got["w"][0, 0] == 1 and got["h"][0] == 2


@pytest.mark.parametrize("header, problem", [
    (None, "JSONDecodeError"),
    (b"not json", "JSONDecodeError"),
    ({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 800]}}, "tensor 'w' lies at bytes 0-800 of 8"),
    ({"w": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}}, "tensor 'w' lies at bytes -4-0 of 8"),
    ({"w": {"dtype": "F8_E4M3FNUZ", "shape": [8], "data_offsets": [0, 8]}}, "KeyError"),
    ([1, 2], "TypeError"),
])
def test_a_malformed_file_is_a_clear_error(header, problem):
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    data = (len(text) + (10**6 if header is None else 0)).to_bytes(8, "little") + text + bytes(8)
    with pytest.raises(ValueError, match="not a safetensors file hvdkit reads") as info:
        tensor_bytes(data)
    assert problem in str(info.value)
