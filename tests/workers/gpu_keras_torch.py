"""On a GPU, 1 process: hvdkit's Keras 3 path on the PyTorch backend (no TensorFlow needed).

    KERAS_BACKEND=torch horovodrun -np 1 -H localhost:1 --gloo python tests/workers/gpu_keras_torch.py OUT_DIR

Checks (exit 1 when one fails), into OUT_DIR/gpu_keras_torch.json:
- ``model.fit`` with ``hvdkit.keras.DistributedOptimizer``, warm-up, metric average and a checkpoint on the
  GPU, then a fresh model resumed from it, which must equal the trained one;
- ``mixed_bfloat16`` trains with a finite loss.

Figures (OUT_DIR/gpu_keras_torch_bench.jsonl): ResNet-50, ``mixed_bfloat16``, steps/s of a timed epoch after
an untimed one, plain ``fit`` against ``fit`` with hvdkit's DistributedOptimizer and callbacks, the two
alternating in each round (ratio = plain / hvdkit; goal <= 1.05).
``GPU_CHECK_DEVICE=cpu`` runs everything on the CPU with a tiny model, to try the script; those numbers mean
nothing. (scripts/gpu-check.sh)
"""

import json
import os
import sys
import tempfile
import time

os.environ["KERAS_BACKEND"] = "torch"
cpu = os.environ.get("GPU_CHECK_DEVICE") == "cpu"
if cpu:
    os.environ["CUDA_VISIBLE_DEVICES"] = ""

import numpy as np  # noqa: E402

import hvdkit.keras as hk  # noqa: E402

out_dir = sys.argv[1]
hk.init()
import keras  # noqa: E402
import torch  # noqa: E402

from hvdkit.keras.callbacks import BroadcastInitialState, Checkpoint, LearningRateWarmup, MetricAverage  # noqa: E402

if not cpu:
    torch.cuda.set_device(hk.local_rank())
DEVICE = "cpu (tiny; numbers mean nothing)" if cpu else torch.cuda.get_device_name()
results: dict = {"device": DEVICE, "keras": keras.__version__, "torch": torch.__version__,
                 "backend": keras.backend.backend()}
failed = []


def check(name: str, ok: bool, detail: object = None) -> None:
    results[name] = {"ok": bool(ok), "detail": detail}
    if not ok:
        failed.append(name)


g = np.random.default_rng(7)
X = g.normal(size=(1024, 32)).astype(np.float32)
Y = (X[:, :8].sum(1) > 0).astype(np.int64) + (X[:, 8] > 0.5).astype(np.int64)


def mlp() -> keras.Model:
    keras.utils.set_random_seed(3)
    return keras.Sequential([keras.Input((32,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(3)])


def compile_(model: keras.Model) -> None:
    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.05, momentum=0.9)),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))


with tempfile.TemporaryDirectory() as ckpt:
    model = mlp()
    compile_(model)
    hist = model.fit(X, Y, batch_size=64, epochs=2, verbose=0,
                     callbacks=[BroadcastInitialState(), LearningRateWarmup(warmup_epochs=1), MetricAverage(),
                                Checkpoint(ckpt)])
    on_gpu = all("cuda" in str(v.value.device) for v in model.trainable_variables) if not cpu else True
    check("fit_on_device", on_gpu and np.isfinite(hist.history["loss"][-1]), hist.history["loss"])
    again = mlp()
    compile_(again)
    checkpoint = Checkpoint(ckpt)
    start = checkpoint.resume_epoch(again)
    same = all(np.array_equal(keras.ops.convert_to_numpy(a), keras.ops.convert_to_numpy(b))
               for a, b in zip(model.weights, again.weights))
    check("checkpoint_resume", start == 2 and same, {"resume_epoch": start})

keras.mixed_precision.set_global_policy("mixed_bfloat16")
try:
    model = mlp()
    compile_(model)
    hist = model.fit(X, Y, batch_size=64, epochs=1, verbose=0, callbacks=[BroadcastInitialState()])
    check("mixed_bfloat16", bool(np.isfinite(hist.history["loss"][-1])), hist.history["loss"])
finally:
    keras.mixed_precision.set_global_policy("float32")

SIDE, BATCH, STEPS, ROUNDS = (32, 4, 3, 1) if cpu else (224, 128, 40, 3)
IMAGES = g.normal(size=(BATCH * STEPS, SIDE, SIDE, 3)).astype(np.float32)
LABELS = g.integers(0, 1000, size=(BATCH * STEPS,))


class EpochTimer(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self.t0 = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        if not cpu:
            torch.cuda.synchronize()
        self.last = time.perf_counter() - self.t0


def steps_per_s(hvdkit: bool) -> float:
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        keras.utils.set_random_seed(1)
        base = keras.applications.ResNet50(weights=None, input_shape=(SIDE, SIDE, 3), classes=1000)
        model = keras.Model(base.input, keras.layers.Activation("linear", dtype="float32")(base.output))
        opt = keras.optimizers.SGD(0.01, momentum=0.9)
        cbs = []
        if hvdkit:
            opt = hk.DistributedOptimizer(opt)
            cbs = [BroadcastInitialState(), MetricAverage()]
        model.compile(optimizer=opt, loss="sparse_categorical_crossentropy")
        timer = EpochTimer()
        model.fit(IMAGES, LABELS, batch_size=BATCH, epochs=2, verbose=0, callbacks=[*cbs, timer])
        return STEPS / timer.last
    finally:
        keras.mixed_precision.set_global_policy("float32")


got: dict[str, list[float]] = {"plain": [], "hvdkit": []}
for _ in range(ROUNDS):
    for name in got:
        got[name].append(steps_per_s(name == "hvdkit"))
medians = {name: float(np.median(v)) for name, v in got.items()}
bench = {"figure": "keras_torch_hvdkit_vs_plain", **medians, "rounds_steps_per_s": got,
         "ratio": medians["plain"] / medians["hvdkit"], "goal": 1.05, "images_per_s_plain": medians["plain"] * BATCH,
         "device": DEVICE, "keras": keras.__version__, "torch": torch.__version__, "side": SIDE, "batch": BATCH,
         "steps": STEPS, "rounds": ROUNDS, "policy": "mixed_bfloat16",
         "date": time.strftime("%Y-%m-%d", time.gmtime())}
if hk.rank() == 0:
    with open(os.path.join(out_dir, "gpu_keras_torch_bench.jsonl"), "w") as f:
        f.write(json.dumps(bench) + "\n")
    print(json.dumps(bench), flush=True)
    results["failed"] = failed
    with open(os.path.join(out_dir, "gpu_keras_torch.json"), "w") as f:
        json.dump(results, f, indent=2)
    print(json.dumps(results), flush=True)
sys.exit(1 if failed else 0)
