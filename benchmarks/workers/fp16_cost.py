"""What fp16 gradient compression costs on this CPU, per parameter, in one process (no network):

- Horovod's compressor as its DistributedOptimizer uses it: a new half tensor down, a new float32 tensor back;
- the same casts into buffers allocated once;
- writing a newly allocated float32 tensor (the first touch of its pages), against rewriting one;
- Horovod's float16 sum (the MPI op Open MPI calls in every ring step; F16C when the CPU has it) and a float32
  sum, over the same number of values.

    python -m benchmarks.workers.fp16_cost --params 25000000 --results cost.json

Writes ``{"ns_per_param": {what: median}, "f16c": bool}``; one thread, as each rank on the simulated cluster.
"""

from __future__ import annotations

import argparse
import ctypes
import time

from benchmarks.workers.common import positive, write_result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", required=True)
    p.add_argument("--params", type=positive, default=25_000_000)
    p.add_argument("--rounds", type=positive, default=7)
    args = p.parse_args()

    import horovod.torch as hvd
    import numpy as np
    import torch

    torch.set_num_threads(1)
    n = args.params
    x, y = torch.ones(n), torch.empty(n)
    h, h2 = torch.ones(n, dtype=torch.float16), torch.ones(n, dtype=torch.float16)
    lib = ctypes.CDLL(hvd.mpi_lib_v2.__file__)  # already loaded by the import: its exported C++ symbols
    f16_sum = lib._ZN7horovod6common11float16_sumEPvS1_PiPP15ompi_datatype_t
    f16c = bool(ctypes.CFUNCTYPE(ctypes.c_bool)(("_ZN7horovod6common15is_avx_and_f16cEv", lib))())
    count = ctypes.c_int(n)
    a32, b32 = np.ones(n, np.float32), np.ones(n, np.float32)
    fp16 = hvd.Compression.fp16
    cases = {
        "cast down, new tensor (Horovod's compressor)": lambda: fp16.compress(x),
        "cast back, new tensor (Horovod's compressor)": lambda: fp16.decompress(h, torch.float32),
        "cast down into a reused buffer": lambda: h2.copy_(x),
        "cast back into a reused buffer": lambda: y.copy_(h),
        "write a new float32 tensor": lambda: torch.empty(n).fill_(1.0),
        "rewrite a float32 tensor": lambda: y.fill_(1.0),
        "Horovod float16 sum (MPI op)": lambda: f16_sum(ctypes.c_void_p(h.data_ptr()), ctypes.c_void_p(h2.data_ptr()),
                                                        ctypes.byref(count), None),
        "float32 sum": lambda: np.add(a32, b32, out=b32),
    }
    out = {}
    for name, fn in cases.items():
        times = []
        for _ in range(args.rounds + 1):
            h2.fill_(0.0)
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        out[name] = float(np.median(times[1:])) / n * 1e9
    write_result(args.results, {"ns_per_param": out, "f16c": f16c, "params": n, "rounds": args.rounds})


if __name__ == "__main__":
    main()
