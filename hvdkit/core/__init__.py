"""Framework-free core: events, callbacks, dispatcher, LR maths, checkpoint store, engine."""

from hvdkit.core.callback import Callback
from hvdkit.core.checkpoint_store import CheckpointStore, Manifest
from hvdkit.core.comm import Comm, LocalComm
from hvdkit.core.dispatcher import Dispatcher
from hvdkit.core.engine import Engine
from hvdkit.core.events import Event
from hvdkit.core.state import FrameworkOps, TrainState

__all__ = ["Callback", "CheckpointStore", "Comm", "Dispatcher", "ElasticIndexSampler", "Engine", "Event",
           "FrameworkOps", "LocalComm", "Manifest", "TrainState"]


def __getattr__(name: str):  # numpy only when asked for: `hvdkit doctor` imports the core in bare environments
    if name == "ElasticIndexSampler":
        from hvdkit.core.elastic_sampler import ElasticIndexSampler

        return ElasticIndexSampler
    raise AttributeError(f"module 'hvdkit.core' has no attribute {name!r}")
