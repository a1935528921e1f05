"""Gradient accumulation in the Trainer (#14 item 4): accumulate_steps=k communicates once every k
micro-batches and gives the update of one k-times-larger batch; warm-up counts optimizer steps."""

import json
import re

import pytest
from helpers import requires_horovod

pytestmark = [requires_horovod, pytest.mark.horovod]


@pytest.mark.timeout(480)  # the shared job (conftest.py) may start in this test
def test_accumulating_4_batches_of_4_equals_one_batch_of_16(torch_job):
    stdout = torch_job("accumulate").stdout
    rows = [json.loads(m.group(0)) for m in re.finditer(r'\{"rank".*?\]\]\}', stdout)]
    assert len(rows) == 2, stdout[-3000:]
    params = 4  # two Linear layers: weight and bias each
    steps = 2 * 256 // 2 // 16  # epochs x rows per rank / rows per optimizer step = 16
    for r in rows:
        print(f"rank {r['rank']}: max |w_accumulated - w_big_batch| = {r['max_abs_diff']:.2e} "
              f"(max |w| {r['max_abs_weight']:.2f})")
        assert r["max_abs_diff"] < 1e-5
        assert r["allreduces"] == [steps * params, steps * params]  # once per optimizer step, not per batch
        assert r["lrs"][0] == r["lrs"][1] and len(r["lrs"][0]) == steps  # warm-up over optimizer steps
        assert r["lrs"][0][0] == pytest.approx(0.1) and r["lrs"][0][-1] == pytest.approx(0.2)  # T/n -> T
