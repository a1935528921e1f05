"""On a GPU, 1 process: hvdkit's Keras 3 and TensorFlow paths on the GPU.

    horovodrun -np 1 -H localhost:1 --gloo python tests/workers/gpu_keras.py OUT_DIR

- ``model.fit`` with ``hvdkit.keras.DistributedOptimizer``, warm-up, metric average and a checkpoint,
  then a fresh model resumed from it, which must equal the trained one;
- ``mixed_float16`` with hvdkit's ``LossScaleOptimizer``: one step's loss made infinite must be skipped
  and the scale halved;
- the TensorFlow custom loop with ``DistributedGradientTape``;
- a NCCL allreduce of a tensor on the GPU (``nccl_built()`` too).

Writes OUT_DIR/gpu_keras.json and prints it; exits 1 when a check failed. (scripts/gpu-check.sh)
``GPU_CHECK_DEVICE=cpu`` runs the same checks on the CPU (no GPU visible), to try the script anywhere.
"""

import json
import os
import sys
import tempfile

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np

import hvdkit.keras as hk

out_dir = sys.argv[1]
hk.init()
import keras  # noqa: E402
import tensorflow as tf  # noqa: E402
from horovod import tensorflow as hvd  # noqa: E402

import hvdkit.tensorflow as htf  # noqa: E402
from hvdkit.keras.callbacks import BroadcastInitialState, Checkpoint, LearningRateWarmup, MetricAverage  # noqa: E402
from hvdkit.keras.mixed_precision import LossScaleOptimizer  # noqa: E402

cpu = os.environ.get("GPU_CHECK_DEVICE") == "cpu"
gpus = tf.config.list_physical_devices("GPU")
if cpu:
    tf.config.set_visible_devices([], "GPU")
    device = "/CPU:0"
else:
    gpu = gpus[hk.local_rank()]
    tf.config.experimental.set_memory_growth(gpu, True)
    tf.config.set_visible_devices(gpu, "GPU")
    device = "/GPU:0"

g = np.random.default_rng(7)
X = g.normal(size=(2048, 32)).astype(np.float32)
Y = (X[:, :8].sum(1) > 0).astype(np.int64) + (X[:, 8] > 0.5).astype(np.int64)
LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def build():
    keras.utils.set_random_seed(1)
    return keras.Sequential([keras.Input((32,)), keras.layers.Dense(256, activation="relu"), keras.layers.Dense(3),
                             keras.layers.Activation("linear", dtype="float32")])


def same(a, b):
    return all(np.array_equal(x, y) for x, y in zip(a.get_weights(), b.get_weights()))


def fit_checkpoint_resume():
    folder = tempfile.mkdtemp(prefix="gpu-keras-")
    model = build()
    # jit_compile=False: Horovod's ops have no XLA kernels here (patch 0002), and "auto" picks XLA on GPUs.
    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.05 * hk.size(), momentum=0.9)),
                  loss=LOSS, metrics=["accuracy"], jit_compile=False)
    cbs = [BroadcastInitialState(), MetricAverage(), LearningRateWarmup(warmup_epochs=1),
           Checkpoint(folder, async_save=True)]
    hist = model.fit(X, Y, batch_size=128, epochs=3, shuffle=False, verbose=0, callbacks=cbs)
    fresh = build()
    fresh.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.05, momentum=0.9)), loss=LOSS,
                  jit_compile=False)
    epoch = Checkpoint(folder).resume_epoch(fresh)
    loss = [float(v) for v in hist.history["loss"]]
    on_device = device.split(":")[0].strip("/") in model.trainable_variables[0].value.device.upper()
    return {"loss": loss, "accuracy": [float(v) for v in hist.history["accuracy"]], "restored_epoch": epoch,
            "resumed_equals_trained": same(model, fresh), "variables_on": model.trainable_variables[0].value.device,
            "ok": loss[-1] < loss[0] and epoch == 3 and same(model, fresh) and on_device}


def fp16_loss_scale():
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        model = build()
        poison = keras.Variable(1.0, trainable=False, dtype="float32")

        def loss(y, logits):
            return LOSS(y, logits) * poison

        opt = hk.DistributedOptimizer(keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.05)))
        model.compile(optimizer=opt, loss=loss, jit_compile=False)
        seen = []

        class Poison(keras.callbacks.Callback):
            def on_train_batch_begin(self, batch, logs=None):
                poison.assign(float("inf") if batch == 3 else 1.0)
                if opt.built:
                    seen.append((int(keras.ops.convert_to_numpy(opt.iterations)),
                                 float(keras.ops.convert_to_numpy(opt.dynamic_scale))))

        model.fit(X, Y, batch_size=128, epochs=1, shuffle=False, verbose=0,
                  callbacks=[BroadcastInitialState(), Poison()])
        seen.append((int(keras.ops.convert_to_numpy(opt.iterations)),
                     float(keras.ops.convert_to_numpy(opt.dynamic_scale))))
        skipped = [i for i in range(len(seen) - 1) if seen[i + 1][0] == seen[i][0]]
        halved = [i for i in range(len(seen) - 1) if seen[i + 1][1] == seen[i][1] / 2]
        finite = all(np.isfinite(w).all() for w in model.get_weights())
        return {"agreed_optimizer": isinstance(opt, LossScaleOptimizer), "skipped_steps": skipped,
                "halved_at": halved, "compute_dtype": model.layers[0].compute_dtype, "finite": bool(finite),
                "ok": isinstance(opt, LossScaleOptimizer) and skipped == [2] and halved == [2] and finite}
    finally:
        keras.mixed_precision.set_global_policy("float32")


def tape_loop():
    model = build()
    opt = keras.optimizers.SGD(0.05)
    opt.build(model.trainable_variables)
    htf.broadcast_variables(model.variables + opt.variables, root_rank=0)
    ds = tf.data.Dataset.from_tensor_slices(hk.shard((X, Y))).batch(128)

    @tf.function
    def step(xb, yb):
        with tf.GradientTape() as tape:
            loss = LOSS(yb, model(xb, training=True))
        grads = htf.DistributedGradientTape(tape).gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    losses = []
    for _ in range(3):
        losses.append(float(np.mean([step(xb, yb).numpy() for xb, yb in ds])))
    return {"loss": losses, "ok": losses[-1] < losses[0]}


def allreduce_on_device():
    with tf.device(device):
        t = tf.fill([1 << 20], float(hk.rank() + 1))  # 4 MiB
        s = hvd.allreduce(t, op=hvd.Sum, name="gpu_keras.allreduce")
    want = sum(range(1, hk.size() + 1))
    return {"nccl_built": bool(hvd.nccl_built()), "tensor_on": t.device, "result_on": s.device,
            "equal": bool(np.all(s.numpy() == want)),
            "ok": bool(np.all(s.numpy() == want)) and (cpu or (bool(hvd.nccl_built()) and "GPU" in s.device))}


report = {"device": device, "gpus": [d.name for d in gpus], "tensorflow": tf.__version__, "keras": keras.__version__}
for name, check in [("fit_checkpoint_resume", fit_checkpoint_resume), ("fp16_loss_scale", fp16_loss_scale),
                    ("tape_loop", tape_loop), ("allreduce", allreduce_on_device)]:
    try:
        report[name] = check()
    except Exception as exc:  # one failed check must not hide the others
        report[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
report["ok"] = all(report[n]["ok"] for n in ("fit_checkpoint_resume", "fp16_loss_scale", "tape_loop", "allreduce"))
if hk.rank() == 0:
    with open(os.path.join(out_dir, "gpu_keras.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps(report), flush=True)
sys.exit(0 if report["ok"] else 1)
