"""Framework-free core: events, callbacks, dispatcher, LR maths, checkpoint store, engine."""

from hvdkit.core.callback import Callback
from hvdkit.core.checkpoint_store import CheckpointStore, Manifest
from hvdkit.core.comm import Comm, LocalComm
from hvdkit.core.dispatcher import Dispatcher
from hvdkit.core.elastic_sampler import ElasticIndexSampler
from hvdkit.core.engine import Engine
from hvdkit.core.events import Event
from hvdkit.core.state import FrameworkOps, TrainState

__all__ = ["Callback", "CheckpointStore", "Comm", "Dispatcher", "ElasticIndexSampler", "Engine", "Event",
           "FrameworkOps", "LocalComm", "Manifest", "TrainState"]
