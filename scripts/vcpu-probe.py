"""Does load on one vCPU slow a single-thread compute loop on the other?

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python scripts/vcpu-probe.py [rounds, default 8]

A float32 matmul loop (256x1024 @ 1024x1024, numpy) pinned to CPU 0 is timed for 2 s under three
conditions: CPU 1 idle, a Python spin loop pinned to CPU 1 (the bench's CPU burner), and the same matmul
loop on CPU 1. Each round runs the three in order, reversed every other round (A B C / C B A). Prints the
GFLOP/s per condition and, per round, each loaded condition over idle. Needs CPUs 0 and 1, numpy and
taskset; docs/benchmarks.md (scaling) has what it measured on the project's machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np

from hvdkit.bench.stats import median, quartiles

# Each load prints one line once it is on CPU 1 and about to loop; the probe waits for that line.
SPIN = ["taskset", "-c", "1", sys.executable, "-c", "print('ready', flush=True)\nwhile True: pass"]
MATMUL = [sys.executable, "-c",
          "import os, numpy as np\n"
          "os.sched_setaffinity(0, {1})\n"
          "a = np.random.rand(256, 1024).astype(np.float32)\n"
          "b = np.random.rand(1024, 1024).astype(np.float32)\n"
          "a @ b\n"
          "print('ready', flush=True)\n"
          "while True:\n"
          "    a @ b\n"]


def gflops(a: np.ndarray, b: np.ndarray, seconds: float = 2.0) -> float:
    """GFLOP/s of ``a @ b`` repeated for ``seconds``."""
    start = time.perf_counter()
    n = 0
    while time.perf_counter() - start < seconds:
        a @ b
        n += 1
    return n * 2 * a.shape[0] * a.shape[1] * b.shape[1] / (time.perf_counter() - start) / 1e9


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    os.sched_setaffinity(0, {0})
    a = np.random.rand(256, 1024).astype(np.float32)
    b = np.random.rand(1024, 1024).astype(np.float32)
    for _ in range(50):  # warm-up
        a @ b
    res: dict[str, list[float]] = {"idle": [], "spin": [], "matmul": []}
    for r in range(rounds):
        names = list(res) if r % 2 == 0 else list(reversed(res))
        for name in names:
            load = {"spin": SPIN, "matmul": MATMUL}.get(name)
            proc = subprocess.Popen(load, stdout=subprocess.PIPE, text=True) if load else None
            if proc and proc.stdout and proc.stdout.readline() != "ready\n":
                sys.exit(f"the {name} load did not start (exit status {proc.wait()})")
            res[name].append(gflops(a, b))
            if proc:
                proc.kill()
                proc.wait()
    for name, values in res.items():
        print(f"{name}: median {median(values):.1f} GFLOP/s; per round {' '.join(f'{v:.0f}' for v in values)}")
    for name in ("spin", "matmul"):
        per = sorted(x / y for x, y in zip(res[name], res["idle"]))
        q1, q3 = quartiles(per)
        print(f"{name} / idle per round: median {median(per):.3f} (IQR {q1:.3f}-{q3:.3f}); "
              f"sorted {' '.join(f'{v:.2f}' for v in per)}")


if __name__ == "__main__":
    main()
