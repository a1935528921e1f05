"""Horovod on Ray Train V2: a backend that wires Ray's workers into one Gloo job (``horovodrun``'s Gloo
launcher with Ray's actors in place of ssh: ranks planned node by node, Horovod's rendezvous server in the
controller, a new plan and server on every restart), and a trainer that checks its ``ScalingConfig``
against the cluster first.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import ray
from ray.exceptions import AuthenticationError
from ray.train.backend import Backend, BackendConfig
from ray.train.v2.api.config import ScalingConfig
from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer

from hvdkit.integrations.ray import auth
from hvdkit.runtime.environments.ray import WORKER_VAR as RAY_RANK_VAR  # hvdkit doctor names the Ray context
from hvdkit.runtime.gloo import Slot, gloo_env, host_plan


def plan(node_ids: list[str]) -> list[Slot]:
    """Each worker's slot (in worker order): ranks node by node, as Horovod's launchers number them."""
    nodes = list(dict.fromkeys(node_ids))
    slots = iter(host_plan(nodes, [node_ids.count(n) for n in nodes]))
    by_node: dict[str, list[Slot]] = {}
    for slot in slots:
        by_node.setdefault(slot.hostname, []).append(slot)
    return [by_node[n].pop(0) for n in node_ids]


def _node_id() -> str:
    return ray.get_runtime_context().get_node_id()


def _set_env(env: Mapping[str, str]) -> None:
    os.environ.update(env)


def rendezvous(node_ids: list[str], verbose: int = 0) -> tuple[Any, list[dict[str, str]]]:
    """Start Horovod's rendezvous server for these workers; return it and each worker's variables."""
    from horovod.runner.http.http_server import RendezvousServer

    slots = plan(node_ids)
    server = RendezvousServer(verbose=verbose)
    port = server.start()
    server.init(slots)
    common = {"HOROVOD_GLOO_RENDEZVOUS_ADDR": ray.util.get_node_ip_address(),
              "HOROVOD_GLOO_RENDEZVOUS_PORT": str(port)}
    return server, [{**gloo_env(s), **common, RAY_RANK_VAR: f"{s.rank}/{s.size}"} for s in slots]


@dataclass
class HorovodConfig(BackendConfig):
    """Ray Train backend config: Horovod's Gloo controller over the trainer's workers."""

    verbose: int = 0

    @property
    def backend_cls(self) -> type[Backend]:
        """The backend Ray Train instantiates."""
        return _HorovodBackend


class _HorovodBackend(Backend):
    share_cuda_visible_devices = True  # Horovod picks a GPU by local rank among the node's visible ones
    server: Any = None

    def on_start(self, worker_group: Any, backend_config: BackendConfig) -> None:
        self.on_shutdown(worker_group, backend_config)  # a restart: the old job's server is of no use
        self.server, envs = rendezvous(worker_group.execute(_node_id), getattr(backend_config, "verbose", 0))
        ray.get([worker_group.execute_single_async(i, _set_env, env) for i, env in enumerate(envs)])

    def on_shutdown(self, worker_group: Any, backend_config: BackendConfig) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None


def check_resources(num_workers: int, per_worker: Mapping[str, float], *, what: str) -> None:
    """Refuse a request the live cluster cannot place, before anything starts (Ray would wait forever)."""
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
        raise ValueError(f"{what}: num_workers must be at least 1 (one Horovod rank per Ray worker), got "
                         f"{num_workers!r}")
    try:
        if not ray.is_initialized():
            ray.init(address=os.environ.get("RAY_ADDRESS"))
        nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive")]
    except (ConnectionError, AuthenticationError) as exc:  # Ray's message names neither side's setting
        raise ConnectionError(f"{what}: cannot reach the Ray cluster ({type(exc).__name__}: "
                              f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''}). {auth.advice()}"
                              ) from exc
    need = {k: v for k, v in per_worker.items() if v}
    fits = sum(min((math.floor(node.get(k, 0) / v + 1e-9) for k, v in need.items()), default=num_workers)
               for node in nodes)
    if fits >= num_workers:
        return
    total = {k: sum(node.get(k, 0) for node in nodes) for k in sorted({"CPU", "GPU", *need})}
    gpu = (" (use_gpu=True, but the cluster has no GPU: set use_gpu=False or add GPU nodes)"
           if need.get("GPU") and not total.get("GPU") else "")
    raise ValueError(f"{what}: num_workers={num_workers} workers of {need} each do not fit this Ray cluster"
                     f"{gpu}: {len(nodes)} nodes with {total} in all place at most {fits}. Ask for fewer workers "
                     "or fewer resources per worker, or add nodes")


class HorovodTrainer(DataParallelTrainer):
    """Ray Train's ``DataParallelTrainer`` with Horovod's Gloo controller on its workers (Train V2).

    ``train_loop_per_worker`` calls ``hk.init()`` as under ``horovodrun``; report with
    :class:`hvdkit.integrations.ray.RayCheckpoint`. :meth:`fit` first checks ``scaling_config`` against the cluster.
    """

    def __init__(self, train_loop_per_worker: Any, *, horovod_config: HorovodConfig | None = None,
                 scaling_config: ScalingConfig | None = None, **kwargs: Any) -> None:
        scaling_config = scaling_config if scaling_config is not None else ScalingConfig()
        if not isinstance(scaling_config, ScalingConfig):
            raise TypeError(f"scaling_config must be a ray.train.ScalingConfig (Train V2), got "
                            f"{type(scaling_config).__module__}.{type(scaling_config).__name__}")
        n = scaling_config.num_workers
        self._min_workers = n if isinstance(n, int) else n[0]
        if self._min_workers < 1:  # Ray would run the function once in this process, without Horovod
            raise ValueError(f"ScalingConfig(num_workers={scaling_config.num_workers!r}): hvdkit's HorovodTrainer "
                             "needs num_workers >= 1 (one Horovod rank per Ray worker)")
        super().__init__(train_loop_per_worker, backend_config=horovod_config or HorovodConfig(),
                         scaling_config=scaling_config, **kwargs)

    def fit(self) -> Any:
        """Check the scaling request against the live cluster, then train (``DataParallelTrainer.fit``)."""
        sc = self.scaling_config
        check_resources(self._min_workers, sc._resources_per_worker_not_none,
                        what=f"ScalingConfig(num_workers={sc.num_workers!r}, use_gpu={sc.use_gpu})")
        return super().fit()
