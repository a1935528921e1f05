"""``horovod.ray.RayExecutor`` for scripts written against it: the same calls, on hvdkit's Ray backend.

    from hvdkit.integrations.ray import RayExecutor          # was: from horovod.ray import RayExecutor
    executor = RayExecutor(RayExecutor.create_settings(timeout_s=30), num_workers=2, use_gpu=False)
    executor.start()
    results = executor.run(train, kwargs={"epochs": 3})    # one value per rank, rank order
    executor.shutdown()

Static (non-elastic) execution only. ``executable_cls`` keeps Horovod's meaning; ``callbacks`` (Horovod's
rank-0 log queue) are accepted and not called. A rank that raises stops the executor's actors (the other
ranks could be waiting for it in a collective, and would block every later call): ``run`` raises that
rank's exception at once, a call after a failed ``run_remote`` raises a RuntimeError naming the rank, and
``start()`` starts a new job.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import ray

from hvdkit.integrations.ray.backend import check_resources, rendezvous


class _Worker:
    """One Ray actor: one Horovod rank once its variables are set."""

    def __init__(self, extra_env: Mapping[str, str]) -> None:
        os.environ.update(extra_env)
        self.executable: Any = None

    def node_id(self) -> str:
        return ray.get_runtime_context().get_node_id()

    def setup(self, env: Mapping[str, str], cls: type | None, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
        os.environ.update(env)
        self.executable = cls(*args, **kwargs) if cls is not None else None

    def execute(self, fn: Callable[[Any], Any]) -> Any:
        return fn(self.executable)

    def run(self, fn: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        return fn(*args, **kwargs)


class RayExecutor:
    """Horovod's ``RayExecutor`` (static): ``num_workers`` actors (or ``num_hosts * num_workers_per_host``)."""

    @classmethod
    def create_settings(cls, timeout_s: int = 30, ssh_identity_file: str | None = None, ssh_str: str | None = None,
                        placement_group_timeout_s: int = 100, nics: Any = None) -> dict[str, Any]:
        """Horovod's settings; hvdkit uses none of the ssh ones (Ray starts the processes)."""
        return {"timeout_s": timeout_s, "placement_group_timeout_s": placement_group_timeout_s, "nics": nics}

    def __init__(self, settings: Any = None, num_workers: int | None = None, num_hosts: int | None = None,
                 num_workers_per_host: int = 1, cpus_per_worker: int = 1, use_gpu: bool = False,
                 gpus_per_worker: int | None = None, **unsupported: Any) -> None:
        if unsupported.get("min_workers") is not None or unsupported.get("max_workers") is not None:
            raise ValueError("hvdkit.integrations.ray.RayExecutor runs static jobs: min_workers/max_workers "
                             "(Horovod's elastic executor) are not supported; use "
                             "hvdkit.integrations.ray.HorovodTrainer with FailureConfig instead")
        if (num_workers is None) == (num_hosts is None):
            raise ValueError(f"RayExecutor: give num_workers or num_hosts (with num_workers_per_host), not both or "
                             f"neither; got num_workers={num_workers!r}, num_hosts={num_hosts!r}")
        self.num_workers = num_workers if num_workers is not None else (num_hosts or 0) * num_workers_per_host
        self.resources = {"CPU": cpus_per_worker, "GPU": (gpus_per_worker or 1) if use_gpu else 0}
        self.settings = settings
        self.workers: list[Any] = []
        self._server: Any = None
        self._pending: list[tuple[int, Any]] = []  # (rank, ObjectRef) of calls whose outcome is not known yet
        self._broken: str | None = None  # why the executor must be started again

    def start(self, executable_cls: type | None = None, executable_args: Sequence[Any] | None = None,
              executable_kwargs: Mapping[str, Any] | None = None, extra_env_vars: Mapping[str, str] | None = None
              ) -> None:
        """Start the actors, wire them into one Horovod job, create ``executable_cls`` in each."""
        self._pending, self._broken = [], None
        check_resources(self.num_workers, self.resources,
                        what=f"RayExecutor(num_workers={self.num_workers}, resources per worker {self.resources})")
        actor = ray.remote(num_cpus=self.resources["CPU"], num_gpus=self.resources["GPU"])(_Worker)
        self.workers = [actor.remote(dict(extra_env_vars or {})) for _ in range(self.num_workers)]
        self._server, envs = rendezvous(ray.get([w.node_id.remote() for w in self.workers]))
        ray.get([w.setup.remote(env, executable_cls, list(executable_args or ()), dict(executable_kwargs or {}))
                 for w, env in zip(self.workers, envs)])
        order = sorted(range(len(envs)), key=lambda i: int(envs[i]["HOROVOD_RANK"]))
        self.workers = [self.workers[i] for i in order]  # rank order, for run()'s values

    def _started(self) -> list[Any]:
        if self._broken is not None:
            raise RuntimeError(self._broken)
        if not self.workers:
            raise RuntimeError("RayExecutor: call start() first")
        self._check_pending()
        return self.workers

    def _failed(self, rank: int, exc: BaseException) -> None:
        """A rank raised (or its actor died): the others may wait in a collective for it, and an actor runs
        one call at a time, so every later call would queue behind them forever. Stop the actors."""
        cause = getattr(exc, "cause", None) or exc  # Ray wraps the rank's exception
        first = str(cause).strip().splitlines()[:1]
        self._broken = (f"RayExecutor: rank {rank} raised {type(cause).__name__}"
                        f"{': ' + first[0] if first else ''} in an earlier call, so its Horovod job was shut down "
                        "(the other ranks could be waiting for it in a collective); call start() again")
        self.shutdown()

    def _check_pending(self) -> None:
        """Raise if a rank of an earlier :meth:`run_remote`, whose values the caller may never fetch, raised."""
        if not self._pending:
            return
        ready, _ = ray.wait([ref for _, ref in self._pending], num_returns=len(self._pending), timeout=0,
                            fetch_local=False)
        done = set(ready)
        for rank, ref in self._pending:
            if ref in done:
                try:
                    ray.get(ref)
                except Exception as exc:
                    self._failed(rank, exc)
                    raise RuntimeError(str(self._broken)) from exc
        self._pending = [(rank, ref) for rank, ref in self._pending if ref not in done]

    def _gather(self, refs: list[Any]) -> list[Any]:
        """The values of one call on every rank, in rank order; the first rank to raise ends the call (and
        the executor, see :meth:`_failed`) at once, not after the ranks that wait for it."""
        values: dict[Any, Any] = {}
        rank_of = {ref: rank for rank, ref in enumerate(refs)}
        remaining = list(refs)
        while remaining:
            ready, remaining = ray.wait(remaining, num_returns=1)
            for ref in ready:
                try:
                    values[ref] = ray.get(ref)
                except Exception as exc:
                    self._failed(rank_of[ref], exc)
                    exc.add_note(str(self._broken))
                    raise
        self._pending = [(rank, ref) for rank, ref in self._pending if ref not in values]
        return [values[ref] for ref in refs]

    def execute(self, fn: Callable[[Any], Any], callbacks: Any = None) -> list[Any]:
        """``fn(executable)`` on every worker; the values in rank order."""
        return self._gather(self._submit(lambda w: w.execute.remote(fn)))

    def _submit(self, call: Callable[[Any], Any]) -> list[Any]:
        refs = [call(w) for w in self._started()]
        self._pending += list(enumerate(refs))
        return refs

    def run_remote(self, fn: Callable[..., Any], args: Sequence[Any] | None = None,
                   kwargs: Mapping[str, Any] | None = None) -> list[Any]:
        """``fn(*args, **kwargs)`` on every worker; its ObjectRefs in rank order. If a rank raises, the next
        call on this executor says so and the executor must be started again."""
        return self._submit(lambda w: w.run.remote(fn, list(args or ()), dict(kwargs or {})))

    def run(self, fn: Callable[..., Any], args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
            callbacks: Any = None) -> list[Any]:
        """``fn(*args, **kwargs)`` on every worker; the values in rank order. The first rank's exception is
        raised as soon as it happens, and the executor must then be started again."""
        return self._gather(self.run_remote(fn, args, kwargs))

    def execute_single(self, fn: Callable[[Any], Any]) -> Any:
        """``fn(executable)`` on rank 0."""
        return ray.get(self._started()[0].execute.remote(fn))

    def shutdown(self) -> None:
        """Stop the actors and the rendezvous server."""
        for w in self.workers:
            ray.kill(w)
        self.workers, self._pending = [], []
        if self._server is not None:
            self._server.stop()
            self._server = None
