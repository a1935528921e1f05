"""The agreed ``model.stop_training`` inside Keras's real fit loop, one process, with a scripted peer rank."""

import numpy as np
import pytest

from hvdkit.core.comm import LocalComm

keras = pytest.importorskip("keras")


class PeerComm(LocalComm):
    """Two ranks: this one and a peer that stops at ``peer_stops_at`` (the n-th agreement)."""

    def __init__(self, peer_stops_at):
        super().__init__(2)
        self.peer_stops_at, self.sent = peer_stops_at, []

    def allreduce_mean(self, values):
        self.sent.append(values["stop_training"])
        peer = 1.0 if len(self.sent) >= self.peer_stops_at else 0.0
        return {"stop_training": (values["stop_training"] + peer) / 2}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("who", ["peer", "this rank"])
def test_a_stop_on_either_rank_ends_fit_after_that_batch(who):
    from hvdkit.keras import stop_training

    class Arm(keras.callbacks.Callback):  # what hvdkit's driving callback does at batch and epoch end
        def on_train_batch_end(self, batch, logs=None):
            stop_training.arm(self.model)

        def on_epoch_end(self, epoch, logs=None):
            stop_training.arm(self.model)

    class StopHere(keras.callbacks.Callback):  # after Arm in the list, as TerminateOnNaN would be
        def on_train_batch_end(self, batch, logs=None):
            if who == "this rank" and batch == 1:
                self.model.stop_training = True

    batches = []
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    comm = PeerComm(peer_stops_at=2 if who == "peer" else 99)
    stop_training.agree(model, comm)
    model.fit(np.ones((8, 4), "float32"), np.zeros((8, 1), "float32"), batch_size=2, epochs=3, verbose=0,
              callbacks=[Arm(), StopHere(), keras.callbacks.LambdaCallback(
                  on_train_batch_begin=lambda b, logs: batches.append(b))])
    assert batches == [0, 1]  # both ranks' decisions are seen at batch 1's end
    assert comm.sent[:2] == [0.0, 1.0 if who == "this rank" else 0.0]
    stop_training.release(model)
    assert type(model) is keras.Sequential and model.stop_training is True


@pytest.mark.timeout(120)
def test_a_model_saved_during_fit_reloads_as_its_registered_class(tmp_path):
    # ModelCheckpoint saves while hvdkit's agreed-stop class stands in for the model's: the file must name the
    # user's registered class ("package>Name"), or load_model cannot find it.
    from hvdkit.keras import stop_training

    @keras.saving.register_keras_serializable(package="hvdkit_tests")
    class Net(keras.Model):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.dense = keras.layers.Dense(1)

        def call(self, x):
            return self.dense(x)

    model = Net()
    model.build((None, 4))
    model.compile(optimizer="sgd", loss="mse")
    stop_training.agree(model, PeerComm(peer_stops_at=99))
    assert type(model) is not Net and type(model).__name__ == "Net"  # the stand-in
    model.fit(np.ones((8, 4), "float32"), np.zeros((8, 1), "float32"), batch_size=4, epochs=1, verbose=0,
              callbacks=[keras.callbacks.ModelCheckpoint(str(tmp_path / "net-{epoch}.keras"))])
    loaded = keras.models.load_model(tmp_path / "net-1.keras")
    assert type(loaded) is Net
