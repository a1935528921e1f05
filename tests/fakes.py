"""A pure-Python FrameworkOps for unit tests of the framework-free core (not a Horovod stand-in)."""

from __future__ import annotations

from typing import Any

from hvdkit.core.checkpoint_tree import join, load_numpy, numpy_leaf, numpy_payload, split


class DictOps:
    """'Model' = a dict of floats; 'optimizer' = lr and momentum."""

    name = "fake"

    def __init__(self, lr: float = 0.1, momentum: float | None = 0.9, lr_in_momentum: bool = False) -> None:
        self.lr = lr
        self.momentum = momentum
        self.lr_in_momentum = lr_in_momentum
        self.weights: dict[str, float] = {"w": 1.0}
        self.momentum_history: list[float | None] = []

    def get_lr(self) -> float:
        return self.lr

    def set_lr(self, lr: float) -> None:
        self.lr = lr

    def scale_momentum(self, factor: float) -> None:
        self.momentum_history.append(factor)

    def capture(self) -> dict[str, Any]:
        return {"weights": dict(self.weights), "lr": self.lr, "momentum": self.momentum}

    def capture_staged(self) -> dict[str, Any]:
        return self.capture()

    def restore(self, snapshot: dict[str, Any]) -> None:
        self.weights = dict(snapshot["weights"])
        self.lr = snapshot["lr"]
        self.momentum = snapshot["momentum"]

    def broadcast_state(self, root_rank: int, process_set: Any = None) -> None:
        pass

    def dump(self, obj: Any) -> tuple[Any, Any]:
        tree, arrays = split(obj, numpy_leaf)
        return tree, numpy_payload(arrays)

    def loads(self, tree: Any, data: bytes) -> Any:
        return join(tree, load_numpy(data))


def run_epochs(engine, epochs: int, steps: int, on_step=None) -> None:
    """Drive an Engine like a trainer would."""
    engine.train_begin(epochs, steps_per_epoch=steps)
    for epoch in range(engine.state.epoch, epochs):
        engine.epoch_begin(epoch)
        for i in range(steps):
            engine.batch_begin(i)
            if on_step:
                on_step(engine)
            engine.batch_end({"loss": 1.0 / (1 + engine.state.global_step)})
        engine.epoch_end({"loss": float(epoch)})
    engine.train_end()
