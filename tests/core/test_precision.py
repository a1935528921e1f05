"""Mixed precision with real Horovod processes: fp16 overflows injected on ONE rank are
skipped by every rank (same steps, same loss scale, identical weights); bf16 and fp16 train."""

import pytest
from helpers import horovodrun, requires_horovod, tagged_json

pytestmark = [requires_horovod, pytest.mark.horovod, pytest.mark.shares("keras_torch_workers")]


def _rows(stdout: str, tag: str) -> list[dict]:
    rows = tagged_json(stdout, tag)
    assert len(rows) == 2, stdout[-3000:]
    return sorted(rows, key=lambda r: r["rank"])


@pytest.mark.timeout(300)
def test_torch_fp16_overflow_on_one_rank_is_skipped_on_every_rank(torch_workers):
    r0, r1 = _rows(torch_workers("precision").stdout, "PRECISION")  # in the shared launch (tests/core/conftest.py)
    for run, steps in (("fp16_k1", 16), ("fp16_k2", 8)):  # accumulate_steps 1 and 2
        a, b = r0[run], r1[run]
        print(f"torch {run}: skipped {a['skipped']} / {b['skipped']}, final scale {a['scales'][-1]}, "
              f"weights {a['sha256'][:12]} / {b['sha256'][:12]}")
        # step 3: inf loss on rank 1; step 6: an inf in rank 1's gradient after the allreduce, which only
        # the agreed overflow flag makes rank 0 see. Both skipped everywhere, the scale halved twice.
        assert a["skipped"] == b["skipped"] == [3, 6]
        assert a["scales"] == b["scales"] and a["scales"][-1] == 65536.0 / 4 and len(a["scales"]) == steps
        assert a["sha256"] == b["sha256"] and a["finite"] and b["finite"]
    for precision in ("bf16", "fp16", "32"):
        a, b = r0[precision], r1[precision]
        print(f"torch {precision}: loss per epoch rank 0 {[round(v, 4) for v in a['loss']]}")
        assert a["sha256"] == b["sha256"] and a["skipped"] == 0
        for r in (a, b):
            assert r["loss"][-1] < 0.6 * r["loss"][0], r["loss"]
    # bf16 and fp16 follow the fp32 run closely on this small problem
    for precision in ("bf16", "fp16"):
        assert abs(r0[precision]["loss"][-1] - r0["32"]["loss"][-1]) < 0.05


# Keras on torch in CI, in the shared launch of tests/conftest.py; on TensorFlow (its own launch) a slow_check.
@pytest.mark.timeout(300)
@pytest.mark.parametrize("backend", [pytest.param("tensorflow", marks=pytest.mark.slow_check), "torch"])
def test_keras_fp16_overflow_on_one_rank_is_skipped_on_every_rank(request, backend):
    # Without the agreed flag this run hangs: rank 1 skips the allreduce rank 0 waits in (checked by hand).
    if backend == "torch":
        proc = request.getfixturevalue("keras_torch_workers")("precision")
    else:
        proc = horovodrun("precision_keras.py", timeout=240, env={"KERAS_BACKEND": backend})
    r0, r1 = _rows(proc.stdout, "KERAS_PRECISION")
    assert r0["backend"] == r1["backend"] == backend
    for run in ("fp16_lso", "fp16_policy"):  # LossScaleOptimizer given, or added for the mixed_float16 policy
        a, b = r0[run], r1[run]
        print(f"keras {run}: skipped {a['skipped']} / {b['skipped']}, scale {a['scales'][0]} -> {a['scales'][-1]}, "
              f"weights {a['sha256'][:12]} / {b['sha256'][:12]}")
        assert a["skipped"] == b["skipped"] == [3] and a["steps"] == 16
        assert a["scales"] == b["scales"] and a["scales"][-1] == a["scales"][0] / 2
        assert a["sha256"] == b["sha256"] and a["finite"] and b["finite"]
    a, b = r0["bf16"], r1["bf16"]
    print(f"keras bf16: loss per epoch rank 0 {[round(v, 4) for v in a['loss']]}")
    assert a["dtype"] == "bfloat16" and a["sha256"] == b["sha256"]
    for r in (a, b):
        assert r["loss"][-1] < 0.6 * r["loss"][0], r["loss"]
    for r in (r0, r1):  # Keras's own LossScaleOptimizer around an hvdkit one is refused before the first step
        assert r["refused"] and "LossScaleOptimizer around an hvdkit DistributedOptimizer" in r["refused"]
