"""The README's Keras snippet is a real program: two ranks train it under horovodrun and checkpoint it, on
Keras's TensorFlow and torch backends."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _keras_snippet() -> str:
    readme = (REPO / "README.md").read_text()
    section = re.search(r"^## Three ways in\n(.*?)(?=^## )", readme, re.S | re.M)
    assert section, "README has no 'Three ways in' section"
    blocks = re.findall(r"^```python\n(.*?)^```", section.group(1), re.S | re.M)
    assert blocks, "no python snippet among the three ways in"
    return blocks[0]


@pytest.mark.horovod
@pytest.mark.timeout(300)
@pytest.mark.parametrize("backend", ["tensorflow", "torch"])
def test_the_keras_snippet_trains_on_two_ranks_and_checkpoints(tmp_path, backend):
    (tmp_path / "fit.py").write_text(_keras_snippet())
    horovodrun = str(Path(sys.executable).with_name("horovodrun"))
    env = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2", "KERAS_BACKEND": backend}
    proc = subprocess.run([horovodrun, "-np", "2", "-H", "localhost:2", sys.executable, "fit.py"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    manifests = sorted((tmp_path / "ckpt").glob("*.json"))
    assert len(manifests) == 3, manifests  # keep=3 of 4 epochs
    assert json.loads(manifests[-1].read_text())["epoch"] == 4
    assert sorted((tmp_path / "ckpt").glob("*.safetensors"))
