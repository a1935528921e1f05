"""hvdkit.keras in one process (Horovod initialised with size 1): the wrapped optimizer behaves like
any Keras optimizer, and bad inputs raise clear errors."""

import os

import numpy as np
import pytest
from helpers import horovodrun, requires_horovod, tagged_json

pytestmark = [requires_horovod, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def hk():
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import hvdkit.keras as hk

    hk.init(threads=1)
    return hk


def small_model(keras):
    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])


def test_wrapped_optimizer_behaves_like_the_keras_one(hk, tmp_path):
    import keras

    opt = hk.DistributedOptimizer(keras.optimizers.SGD(0.1, momentum=0.5))
    assert isinstance(opt, keras.optimizers.SGD) and hk.is_distributed(opt)
    assert type(opt).__name__ == "SGD"
    cfg = opt.get_config()
    assert cfg["learning_rate"] == pytest.approx(0.1) and cfg["momentum"] == 0.5
    assert type(keras.optimizers.SGD.from_config(cfg)) is keras.optimizers.SGD
    opt.learning_rate = 0.05
    assert float(opt.learning_rate) == pytest.approx(0.05)

    model = small_model(keras)
    model.compile(optimizer=opt, loss="mse")
    x, y = np.ones((16, 4), np.float32), np.zeros((16, 3), np.float32)
    hist = model.fit(x, y, epochs=3, batch_size=8, verbose=0, callbacks=[
        keras.callbacks.LearningRateScheduler(lambda e, lr: 0.01 * (e + 1)),
        keras.callbacks.ReduceLROnPlateau(monitor="loss", patience=100)])
    assert hist.history["learning_rate"] == pytest.approx([0.01, 0.02, 0.03])
    path = tmp_path / "m.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    assert type(loaded.optimizer) is keras.optimizers.SGD  # reloads as the plain optimizer
    np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0))


def test_a_registered_optimizer_class_reloads_as_itself(hk, tmp_path):
    import keras

    @keras.saving.register_keras_serializable(package="hvdkit_tests")
    class MySGD(keras.optimizers.SGD):
        pass

    model = small_model(keras)
    model.compile(optimizer=hk.DistributedOptimizer(MySGD(0.1)), loss="mse")
    model.fit(np.ones((8, 4), np.float32), np.zeros((8, 3), np.float32), epochs=1, verbose=0)
    model.save(tmp_path / "m.keras")
    assert type(keras.models.load_model(tmp_path / "m.keras").optimizer) is MySGD


@pytest.mark.parametrize("rows", [64, 80])  # 8 steps, then 10 (a last execution of 2)
def test_steps_per_execution_counts_every_step(hk, rows):
    import keras

    from hvdkit.keras.callbacks import MetricAverage
    from hvdkit.keras.engine_bridge import engine_for

    if keras.backend.backend() != "tensorflow":
        pytest.skip("Keras's torch backend refuses steps_per_execution > 1 itself")
    model = small_model(keras)
    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss="mse", steps_per_execution=4)
    model.fit(np.ones((rows, 4), np.float32), np.zeros((rows, 3), np.float32), batch_size=8, epochs=3, verbose=0,
              callbacks=[MetricAverage()])
    assert engine_for(model).state.global_step == 3 * rows // 8 == int(model.optimizer.iterations)


def test_a_custom_learning_rate_schedule_is_kept_by_the_wrapped_optimizer(hk):
    import keras

    class Halving(keras.optimizers.schedules.LearningRateSchedule):  # no get_config, not registered
        def __call__(self, step):
            return 0.1 * 0.5 ** keras.ops.cast(step, "float32")

    schedule = Halving()
    opt = hk.DistributedOptimizer(keras.optimizers.SGD(learning_rate=schedule))
    assert opt._learning_rate is schedule
    var = keras.Variable([1.0])
    for _ in range(2):
        opt.apply_gradients([(keras.ops.convert_to_tensor([1.0]), var)])
    assert keras.ops.convert_to_numpy(var).tolist() == pytest.approx([1.0 - 0.1 - 0.05])


def test_backward_passes_per_step_uses_keras_gradient_accumulation(hk):
    import keras

    opt = hk.DistributedOptimizer(keras.optimizers.SGD(0.1), backward_passes_per_step=4)
    assert opt.gradient_accumulation_steps == 4
    # hvdkit's name for the same setting (this function is also Horovod's, so it takes both)
    assert hk.DistributedOptimizer(keras.optimizers.SGD(0.1), accumulate_steps=4).gradient_accumulation_steps == 4
    with pytest.raises(ValueError, match="accumulate_steps=4 and backward_passes_per_step=2 name one setting"):
        hk.DistributedOptimizer(keras.optimizers.SGD(0.1), backward_passes_per_step=2, accumulate_steps=4)


def test_bad_inputs(hk, tmp_path):
    import keras

    from hvdkit.keras.callbacks import Checkpoint, LearningRateWarmup

    with pytest.raises(TypeError, match=r"optimizer must be a keras\.optimizers\.Optimizer .*got str"):
        hk.DistributedOptimizer("sgd")
    with pytest.raises(ValueError, match="compression must be one of 'none', 'fp16', got 'int8'"):
        hk.DistributedOptimizer(keras.optimizers.SGD(0.1), compression="int8")
    with pytest.raises(ValueError, match="op must be one of 'average', 'sum', 'adasum', got 'max'"):
        hk.DistributedOptimizer(keras.optimizers.SGD(0.1), op="max")
    with pytest.raises(ValueError, match="backward_passes_per_step must be an integer >= 1, got 0"):
        hk.DistributedOptimizer(keras.optimizers.SGD(0.1), backward_passes_per_step=0)
    with pytest.raises(ValueError, match="must not already be wrapped"):
        hk.DistributedOptimizer(hk.DistributedOptimizer(keras.optimizers.SGD(0.1)))
    built = keras.optimizers.SGD(0.1)
    built.build(small_model(keras).trainable_variables)
    with pytest.raises(ValueError, match="wrapped before it is built"):
        hk.DistributedOptimizer(built)
    with pytest.raises(ValueError, match="warmup_epochs must be a finite number >= 0, got -1"):
        LearningRateWarmup(warmup_epochs=-1)
    f = tmp_path / "f"
    f.write_text("x")
    with pytest.raises(ValueError, match="which is an existing file"):
        Checkpoint(f)
    with pytest.raises(TypeError, match="data must be a NumPy array"):
        hk.shard(42)
    import hvdkit.tensorflow as htf

    with pytest.raises(TypeError, match=r"tape must be a tf\.GradientTape, got list"):
        htf.DistributedGradientTape([])
    with pytest.raises(TypeError, match=r"expected a tf\.Variable or a Keras 3 variable"):
        htf.to_tf_variables([np.zeros(3)])


def test_resume_epoch_without_fit_initial_epoch_is_a_clear_error(hk, tmp_path):
    import keras

    from hvdkit.keras.callbacks import Checkpoint

    x, y = np.ones((8, 4), np.float32), np.zeros((8, 3), np.float32)
    m1 = small_model(keras)
    m1.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss="mse")
    m1.fit(x, y, epochs=2, batch_size=4, verbose=0, callbacks=[Checkpoint(tmp_path)])
    m2 = small_model(keras)
    m2.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss="mse")
    ckpt = Checkpoint(tmp_path)
    assert ckpt.resume_epoch(m2) == 2
    with pytest.raises(ValueError, match=r"pass initial_epoch=checkpoint.resume_epoch\(model\)"):
        m2.fit(x, y, epochs=3, batch_size=4, verbose=0, callbacks=[ckpt])


def test_fit_elastic_rejects_bad_input_before_any_collective(hk):
    import keras

    x, y = np.zeros((10, 4), np.float32), np.zeros((10,), np.int64)
    plain = small_model(keras)
    plain.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    with pytest.raises(ValueError, match=r"DistributedOptimizer.*got optimizer SGD"):
        hk.fit_elastic(plain, x, y, epochs=1, batch_size=2)
    model = small_model(keras)
    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss="mse")
    with pytest.raises(ValueError, match="x and y must hold the same number of samples, got 10 and 9"):
        hk.fit_elastic(model, x, y[:9], epochs=1, batch_size=2)
    with pytest.raises(ValueError, match="batch_size"):
        hk.fit_elastic(model, x, y, epochs=1, batch_size=0)
    with pytest.raises(TypeError, match="arrays"):
        hk.fit_elastic(model, 3, y, epochs=1, batch_size=2)
    with pytest.raises(ValueError, match=r"y must be the targets for x .*got None"):
        hk.fit_elastic(model, x, epochs=1, batch_size=2)
    with pytest.raises(ValueError, match=r"validation_data must be \(x_val, y_val\) .*got ndarray"):
        hk.fit_elastic(model, x, y, epochs=1, batch_size=2, validation_data=x)
    unbuilt = keras.Sequential([keras.layers.Dense(3)])
    unbuilt.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss="mse")
    with pytest.raises(ValueError, match="must be built"):
        hk.fit_elastic(unbuilt, x, y, epochs=1, batch_size=2)
    if keras.backend.backend() == "tensorflow":  # Keras's torch backend refuses it itself
        model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss="mse", steps_per_execution=4)
        with pytest.raises(ValueError, match="compiled with steps_per_execution=1, got 4"):
            hk.fit_elastic(model, x, y, epochs=1, batch_size=2)


def test_checkpoint_without_resume_epoch_stops_before_training_and_keeps_the_checkpoint(hk, tmp_path):
    """#13 item 4: without initial_epoch=ckpt.resume_epoch(model), fit restored epoch 3's weights, then
    trained epochs labelled 1..5 from scratch and overwrote the checkpoint."""
    import keras

    from hvdkit.keras.callbacks import Checkpoint

    x, y = np.ones((8, 4), np.float32), np.zeros((8, 3), np.float32)
    m1 = small_model(keras)
    m1.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss="mse")
    m1.fit(x, y, epochs=3, batch_size=4, verbose=0, callbacks=[Checkpoint(tmp_path)])
    def files():  # the writer lock's record changes with its holder
        return {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name != ".hvdkit-writer.lock"}

    before = files()
    m2 = small_model(keras)
    m2.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss="mse")
    steps = []
    probe = keras.callbacks.LambdaCallback(on_train_batch_begin=lambda b, logs: steps.append(b))
    with pytest.raises(ValueError, match=r"started at epoch 0 but training resumed from a checkpoint at epoch 3"):
        m2.fit(x, y, epochs=5, batch_size=4, verbose=0, callbacks=[Checkpoint(tmp_path), probe])
    assert steps == [] and files() == before
    # the engine is free again: the right call trains on from epoch 3
    ckpt = Checkpoint(tmp_path)
    hist = m2.fit(x, y, epochs=5, batch_size=4, verbose=0, initial_epoch=ckpt.resume_epoch(m2), callbacks=[ckpt])
    assert hist.epoch == [3, 4]


def test_a_core_callback_in_keras_fit_names_the_keras_class(hk):
    import keras

    from hvdkit.callbacks import Checkpoint

    model = small_model(keras)
    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss="mse")
    with pytest.raises(TypeError, match=r"for Keras model.fit use hvdkit.keras.callbacks.Checkpoint"):
        model.fit(np.ones((4, 4)), np.zeros((4, 3)), epochs=1, verbose=0, callbacks=[Checkpoint("/tmp/unused")])


def test_shard_rejects_bad_ranks_and_non_data(hk):
    """#13 item 9: shard(rank=5, size=2) and shard(rank=-1) returned wrong shards; shard("abc") was data."""
    x = np.arange(10)
    with pytest.raises(ValueError, match=r"rank must be an integer in \[0, size=2\), got 5"):
        hk.shard(x, rank=5, size=2)
    with pytest.raises(ValueError, match=r"rank must be an integer in \[0, size=2\), got -1"):
        hk.shard(x, rank=-1, size=2)
    with pytest.raises(TypeError, match="data must be a NumPy array"):
        hk.shard("abc")
    assert hk.shard(np.arange(5), rank=1, size=2).tolist() == [1, 3, 0]  # padded: equal rows per rank
    assert hk.shard(np.arange(5), rank=1, size=2, drop_last=True).tolist() == [1, 3]


def test_a_checkpoint_that_names_code_is_refused_in_keras(hk, tmp_path):
    import os
    import pickle

    import keras

    from hvdkit.core import CheckpointStore
    from hvdkit.keras.callbacks import Checkpoint

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {tmp_path}/PWNED",))

    store = CheckpointStore(tmp_path / "ckpt")
    store.save(pickle.dumps({"framework": Evil()}), state={"framework": {"__tensor__": "framework"}}, epoch=1,
               global_step=2, world_size=1, framework="keras")
    store.flush()
    model = small_model(keras)
    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss="mse")
    with pytest.raises(ValueError, match=r"checkpoint ckpt-000001-0000000002.safetensors cannot be loaded"):
        Checkpoint(tmp_path / "ckpt").resume_epoch(model)
    assert not (tmp_path / "PWNED").exists()


def test_a_torch_checkpoint_folder_in_keras_is_a_clear_error(hk, tmp_path):
    import keras

    from hvdkit.core import CheckpointStore
    from hvdkit.keras.callbacks import Checkpoint

    CheckpointStore(tmp_path).save(b"torch bytes", epoch=1, global_step=2, world_size=1, framework="torch")
    model = small_model(keras)
    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss="mse")
    with pytest.raises(ValueError, match=r"was written by 'torch', but this run trains with 'keras'"):
        Checkpoint(tmp_path).resume_epoch(model)


def test_keras_checkpoints_load_without_pickle(hk, tmp_path):
    import json

    import keras
    from safetensors.numpy import load_file

    from hvdkit.keras.callbacks import Checkpoint

    x, y = np.ones((8, 4), np.float32), np.zeros((8, 3), np.float32)
    model = small_model(keras)
    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.1, momentum=0.9)), loss="mse")
    model.fit(x, y, epochs=2, batch_size=4, verbose=0, callbacks=[Checkpoint(tmp_path)])
    arrays = load_file(sorted(tmp_path.glob("*.safetensors"))[-1])  # any safetensors reader
    state = json.loads(sorted(tmp_path.glob("*.json"))[-1].read_text())["state"]
    assert state["framework"]["model"][0] == {"__tensor__": "framework/model/0"}
    np.testing.assert_allclose(arrays["framework/model/0"], model.get_weights()[0])


@pytest.mark.horovod
@pytest.mark.timeout(300)
def test_a_keras_learning_rate_schedule_trains_resumes_and_refuses_lr_callbacks():
    proc = horovodrun("keras_lr_schedule.py", timeout=240)
    rows = {(r["case"], r["rank"]): r for r in tagged_json(proc.stdout, "RESULT")}
    assert len(rows) == 6, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert rows["fit", 0]["weights"] == rows["fit", 1]["weights"]
    assert rows["fit", 0]["lr"] == pytest.approx(0.1 * 0.5 ** (8 / 2))  # the schedule at step 8: still in charge
    for rank in (0, 1):
        assert rows["resume", rank] == {"case": "resume", "rank": rank, "start": 2, "same": True}
        assert rows["warmup", rank]["error"].startswith("cannot set the learning rate to ")
        assert "a keras LearningRateSchedule gives it" in rows["warmup", rank]["error"]
