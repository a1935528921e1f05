"""The Keras side of tests/workers/resume_user_objects_torch.py (2 ranks): for each LR schedule, 2 epochs with
checkpoints, a new model and optimizer resuming them to epoch 4, and an uninterrupted 4-epoch run. Prints
``RESULT {json}`` per schedule and rank: the LR of each step of epochs 3-4 in both runs, and whether the
compiled optimizer is still the one the user built."""

import argparse
import gc
import json

import keras
import numpy as np

import hvdkit.keras as hk
from hvdkit.keras.callbacks import BroadcastInitialState, Checkpoint, LearningRateSchedule, LearningRateWarmup

p = argparse.ArgumentParser()
p.add_argument("--dir", required=True)
args = p.parse_args()
hk.init()
rng = np.random.default_rng(0)
x, y = rng.normal(size=(64, 4)).astype("float32"), rng.normal(size=(64, 1)).astype("float32")
x_shard, y_shard = hk.shard((x, y))

SCHEDULES = {
    # what docs/keras.md names: Keras's LearningRateScheduler (by epoch, and chained on the current LR) ...
    "LearningRateScheduler": lambda: ([keras.callbacks.LearningRateScheduler(lambda epoch: 0.1 * 0.5 ** epoch)], 0.1),
    "LearningRateScheduler(lr)": lambda: ([keras.callbacks.LearningRateScheduler(lambda epoch, lr: lr * 0.7)], 0.1),
    # ... and hvdkit's warm-up and cosine
    "LearningRateWarmup+cosine": lambda: ([LearningRateWarmup(warmup_epochs=1),
                                           LearningRateSchedule.cosine(end_epoch=4, start_epoch=1)], 0.1),
}


class TrainedLR(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.lrs, self.epoch = [], 0

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self.epoch >= 2:
            self.lrs.append(float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate)))


def train(folder, name, epochs):
    gc.collect()  # the last run's Checkpoint lets go of the folder's writer lock
    keras.utils.set_random_seed(0)
    callbacks, lr = SCHEDULES[name]()
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    opt = hk.DistributedOptimizer(keras.optimizers.SGD(lr, momentum=0.9))
    model.compile(optimizer=opt, loss="mse")
    ckpt, trained = Checkpoint(folder), TrainedLR()
    model.fit(x_shard, y_shard, batch_size=8, epochs=epochs, initial_epoch=ckpt.resume_epoch(model), verbose=0,
              callbacks=[BroadcastInitialState(), *callbacks, ckpt, trained])
    return trained.lrs, model.optimizer is opt


for k, name in enumerate(SCHEDULES):
    train(f"{args.dir}/{k}/a", name, 2)
    resumed, same = train(f"{args.dir}/{k}/a", name, 4)
    whole, _ = train(f"{args.dir}/{k}/b", name, 4)
    print("RESULT " + json.dumps({"schedule": name, "rank": hk.rank(), "resumed": resumed, "whole": whole,
                                  "same_optimizer": same}), flush=True)
