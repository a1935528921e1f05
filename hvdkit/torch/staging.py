"""Host staging for asynchronous checkpoints: the copy of the weights taken off the training thread.

Host buffers are reused from one save to the next (new host memory is slow to fault in). Tensors only the
optimizer step changes are copied on a background thread; the rest before :meth:`HostStaging.stage` returns.
Whatever writes the deferred tensors calls :meth:`HostStaging.wait` first (``TorchOps`` does, in an optimizer
step pre-hook); a failed copy raises there, on the training thread.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

import torch

from hvdkit.torch.layout import row_major_alias, same_format


class HostStaging:
    """Reusable host buffers, filled on a background thread; at most one copy in flight."""

    def __init__(self, name: str = "hvdkit-checkpoint-staging") -> None:
        self.name = name
        self._buffers: dict[tuple[Any, ...], torch.Tensor] = {}
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._lock = threading.Lock()

    @property
    def in_flight(self) -> bool:
        """True while a copy runs."""
        return self._thread is not None and self._thread.is_alive()

    def stage(self, obj: Any, deferred: Iterable[torch.Tensor]) -> Any:
        """``obj`` (a state dict) with every tensor replaced by a host buffer. Tensors in ``deferred``
        (unchanged until :meth:`wait` returns) are copied on a background thread, the others now.
        Reuses the buffers of the previous call: its snapshot must no longer be needed."""
        self.wait()
        late = {t.data_ptr() for t in deferred}  # state_dict() detaches: same storage, new tensor objects
        jobs: list[tuple[torch.Tensor, torch.Tensor]] = []
        staged = self._walk(obj, (), late, jobs)
        if jobs:
            self._thread = threading.Thread(target=self._copy, args=(jobs,), name=self.name, daemon=True)
            self._thread.start()
        return staged

    def wait(self) -> None:
        """Block until the background copy is done; raise its error (once). Thread-safe."""
        thread = self._thread
        if thread is None and self._error is None:  # the optimizer step's pre-hook: nothing staged (every step)
            return
        if thread is not None:
            thread.join()
        with self._lock:
            if self._thread is thread:
                self._thread = None
            exc, self._error = self._error, None
        if exc is not None:
            raise RuntimeError(f"hvdkit: copying the checkpoint snapshot to host memory failed: {exc}") from exc

    def _copy(self, jobs: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        try:
            with torch.no_grad():
                for dst, src in jobs:
                    dst.copy_(src)
        except BaseException as exc:  # handed to the training thread by wait()
            self._error = exc

    def _buffer(self, path: tuple[Any, ...], t: torch.Tensor) -> torch.Tensor:
        """The host buffer for ``path``, reused while shape, dtype and memory format still match. It keeps
        ``t``'s memory format (channels_last too): the copy stays a straight one, and the writer makes the
        row-major copy the file needs off the training thread."""
        buf = self._buffers.get(path)
        if buf is None or buf.shape != t.shape or buf.dtype != t.dtype or (
                row_major_alias(t) is not None and not same_format(buf, t)):
            buf = torch.empty_like(t, device="cpu")
            self._buffers[path] = buf
        return buf

    def _walk(self, obj: Any, path: tuple[Any, ...], late: set[int],
              jobs: list[tuple[torch.Tensor, torch.Tensor]]) -> Any:
        if isinstance(obj, torch.Tensor):
            src = obj.detach()
            if src.layout != torch.strided:  # sparse and other layouts: a plain copy, now
                return src.to("cpu", copy=True)
            dst = self._buffer(path, src)
            if src.data_ptr() in late:
                jobs.append((dst, src))
            else:
                dst.copy_(src)
            return dst
        if isinstance(obj, dict):
            items = {k: self._walk(v, (*path, k), late, jobs) for k, v in obj.items()}
            return OrderedDict(items) if isinstance(obj, OrderedDict) else items
        if isinstance(obj, list):
            return [self._walk(v, (*path, i), late, jobs) for i, v in enumerate(obj)]
        if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
            return tuple(self._walk(v, (*path, i), late, jobs) for i, v in enumerate(obj))
        return copy.deepcopy(obj)
