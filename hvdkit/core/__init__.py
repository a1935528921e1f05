"""Framework-free core: events, callbacks, dispatcher, engine, LR maths, checkpoint store, the elastic
loop. Adapters pass in a :class:`Comm` (collectives) and a :class:`FrameworkOps` (framework state)."""

from typing import Any

from hvdkit.core.callback import Callback
from hvdkit.core.checkpoint_store import CheckpointStore, Manifest
from hvdkit.core.comm import Comm, LocalComm
from hvdkit.core.dispatcher import Dispatcher
from hvdkit.core.engine import Engine
from hvdkit.core.events import Event
from hvdkit.core.history import History
from hvdkit.core.state import FrameworkOps, TrainState

__all__ = ["Callback", "CheckpointStore", "Comm", "Dispatcher", "ElasticLoop", "Engine", "Event", "FrameworkOps",
           "History", "LocalComm", "Manifest", "TrainState"]


def __getattr__(name: str) -> Any:  # numpy only when asked for: `hvdkit doctor` imports the core in bare environments
    if name == "ElasticIndexSampler":  # the elastic loop's own; deprecated here for one release
        from hvdkit.core.deprecation import warn_renamed
        from hvdkit.core.elastic.sampler import ElasticIndexSampler

        warn_renamed("hvdkit.core.ElasticIndexSampler", "hvdkit.torch.fit_elastic / hvdkit.keras.fit_elastic (which "
                     "deal out the data themselves), or hvdkit.core.elastic.sampler.ElasticIndexSampler")

        return ElasticIndexSampler
    if name == "ElasticLoop":
        from hvdkit.core.elastic.loop import ElasticLoop

        return ElasticLoop
    raise AttributeError(f"module 'hvdkit.core' has no attribute {name!r}")
