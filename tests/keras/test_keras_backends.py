"""Which Keras backends ``import hvdkit.keras`` accepts, and what it offers on each: one process per backend
(Keras fixes its backend at its first import)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import requires_horovod

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.timeout(300)]


def python(code, backend):
    env = {**os.environ, "PYTHONPATH": str(REPO), "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=240)


def test_jax_is_refused_naming_keras_distribution():
    proc = python("import hvdkit.keras", "jax")
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: ") and "keras.distribution" in last and "KERAS_BACKEND=torch" in last, last


@requires_horovod
def test_on_torch_the_public_and_horovods_names_are_there_without_tensorflow():
    code = """if True:
        import json, sys
        import hvdkit.keras as hk
        import keras
        names = ["init", "rank", "size", "local_rank", "local_size", "shard", "DistributedOptimizer", "verbose",
                 "History", "is_distributed", "HorovodComm", "fit_elastic", "SyncBatchNormalization"]
        out = {"backend": keras.backend.backend(), "missing": [n for n in names if not hasattr(hk, n)],
               "tensorflow": "tensorflow" in sys.modules}
        # Horovod's horovod.tensorflow.keras names: from horovod.torch here; the TensorFlow-bound ones say why
        import horovod.torch
        out["horovod"] = {n: hasattr(hk, n) for n in ("allreduce", "allgather", "broadcast", "reducescatter",
                          "Average", "Sum", "Compression", "add_process_set", "global_process_set", "gloo_enabled",
                          "mpi_enabled", "start_timeline", "callbacks", "load_model", "init")}
        out["same"] = hk.Compression is horovod.torch.Compression and hk.rank is horovod.torch.rank
        out["horovod_all"] = hk.__horovod_all__
        out["tf_only"] = {}
        for name in ("broadcast_global_variables", "elastic"):
            try:
                getattr(hk, name)
            except AttributeError as e:
                out["tf_only"][name] = str(e)
        out["callback"] = type(hk.callbacks.BroadcastGlobalVariablesCallback(0)).__name__
        hk.init(threads=1)
        opt = hk.DistributedOptimizer(keras.optimizers.Adam(0.01), compression="fp16", accumulate_steps=2)
        out["distributed"] = hk.is_distributed(opt) and isinstance(opt, keras.optimizers.Adam)
        print(json.dumps(out))
    """
    proc = python(code, "torch")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["backend"] == "torch" and out["missing"] == [] and out["distributed"]
    assert not out["tensorflow"]  # a torch-only machine (no TensorFlow) runs it
    assert all(out["horovod"].values()), out["horovod"]
    assert out["same"] and out["callback"] == "BroadcastGlobalVariablesCallback"
    assert set(out["tf_only"]) == {"broadcast_global_variables", "elastic"}
    assert not {"broadcast_global_variables", "elastic"} & set(out["horovod_all"])
    assert "TensorFlow 1 graph" in out["tf_only"]["broadcast_global_variables"]
    assert "BroadcastGlobalVariablesCallback(0)" in out["tf_only"]["broadcast_global_variables"]
    assert "KERAS_BACKEND=tensorflow" in out["tf_only"]["elastic"]
