"""On a GPU, 1 process: Keras 3 throughput figures for docs/gpu.md, one JSON line each.

    horovodrun -np 1 -H localhost:1 --gloo python tests/workers/gpu_keras_bench.py OUT_DIR

- ``xla``: plain Keras ``fit`` (one GPU, ResNet-50) steps/s with ``jit_compile=True`` against ``False``;
- ``hvdkit_vs_plain``: ``fit`` with hvdkit's DistributedOptimizer and callbacks against plain ``fit``,
  same model, same process, alternating rounds (ratio = plain steps/s / hvdkit steps/s);
- ``precision``: steps/s under the ``mixed_bfloat16`` and ``mixed_float16`` policies against ``float32``.

Each figure is steps/s of a timed epoch after an untimed one (tracing, XLA compile, cuDNN autotune).
``GPU_CHECK_DEVICE=cpu`` runs everything on the CPU with a tiny model and input, to try the script; those
numbers mean nothing. Writes OUT_DIR/gpu_keras_bench.jsonl.
"""

import json
import os
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np

import hvdkit.keras as hk

out_dir = sys.argv[1]
hk.init()
import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from hvdkit.keras.callbacks import BroadcastInitialState, MetricAverage  # noqa: E402

cpu = os.environ.get("GPU_CHECK_DEVICE") == "cpu"
if cpu:
    tf.config.set_visible_devices([], "GPU")
else:
    gpu = tf.config.list_physical_devices("GPU")[hk.local_rank()]
    tf.config.experimental.set_memory_growth(gpu, True)
    tf.config.set_visible_devices(gpu, "GPU")
SIDE, BATCH, STEPS, ROUNDS = (32, 4, 3, 1) if cpu else (224, 64, 50, 3)
DEVICE = ("cpu (tiny; numbers mean nothing)" if cpu
          else tf.config.experimental.get_device_details(gpu).get("device_name"))
g = np.random.default_rng(0)
X = g.normal(size=(BATCH * 4, SIDE, SIDE, 3)).astype(np.float32)
Y = g.integers(0, 1000, size=(BATCH * 4,))
DATA = tf.data.Dataset.from_tensor_slices((X, Y)).batch(BATCH, drop_remainder=True).repeat().prefetch(2)


class EpochTimer(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self.t0 = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.last = time.perf_counter() - self.t0


def steps_per_s(jit: bool, hvdkit: bool, policy: str = "float32") -> float:
    keras.mixed_precision.set_global_policy(policy)
    try:
        keras.utils.set_random_seed(1)
        base = keras.applications.ResNet50(weights=None, input_shape=(SIDE, SIDE, 3), classes=1000)
        # The classifier's softmax in float32, as Keras's mixed-precision guide asks.
        model = keras.Model(base.input, keras.layers.Activation("linear", dtype="float32")(base.output))
        opt = keras.optimizers.SGD(0.01, momentum=0.9)
        if policy == "mixed_float16":
            opt = keras.optimizers.LossScaleOptimizer(opt)
        cbs = []
        if hvdkit:
            opt = hk.DistributedOptimizer(opt)
            cbs = [BroadcastInitialState(), MetricAverage()]
        model.compile(optimizer=opt, loss="sparse_categorical_crossentropy", jit_compile=jit)
        timer = EpochTimer()
        model.fit(DATA, epochs=2, steps_per_epoch=STEPS, verbose=0, callbacks=[*cbs, timer])
        return STEPS / timer.last
    finally:
        keras.mixed_precision.set_global_policy("float32")


def alternate(**runs) -> dict:
    """Median steps/s of each run over ROUNDS rounds, the runs alternating within a round."""
    got = {name: [] for name in runs}
    for _ in range(ROUNDS):
        for name, kwargs in runs.items():
            got[name].append(steps_per_s(**kwargs))
    return {name: float(np.median(v)) for name, v in got.items()}


lines = []
xla = alternate(jit_true=dict(jit=True, hvdkit=False), jit_false=dict(jit=False, hvdkit=False))
lines.append({"figure": "xla", **xla, "gain": xla["jit_true"] / xla["jit_false"] - 1})
hv = alternate(plain=dict(jit=False, hvdkit=False), hvdkit=dict(jit=False, hvdkit=True))
lines.append({"figure": "hvdkit_vs_plain", **hv, "ratio": hv["plain"] / hv["hvdkit"], "goal": 1.05})
pr = alternate(fp32=dict(jit=False, hvdkit=True), bf16=dict(jit=False, hvdkit=True, policy="mixed_bfloat16"),
               fp16=dict(jit=False, hvdkit=True, policy="mixed_float16"))
lines.append({"figure": "precision", "framework": "keras", **pr, "bf16_speedup": pr["bf16"] / pr["fp32"],
              "fp16_speedup": pr["fp16"] / pr["fp32"]})
common = {"device": DEVICE, "tensorflow": tf.__version__, "keras": keras.__version__, "side": SIDE, "batch": BATCH,
          "steps": STEPS, "rounds": ROUNDS, "date": time.strftime("%Y-%m-%d", time.gmtime())}
if hk.rank() == 0:
    with open(os.path.join(out_dir, "gpu_keras_bench.jsonl"), "w") as f:
        for line in lines:
            text = json.dumps({**line, **common})
            print(text, flush=True)
            f.write(text + "\n")
