"""Per-rank runtime defaults that let Horovod scale on a CPU machine (docs/benchmarks.md, "Tuning
knobs"): without them MPI's busy polling and Horovod's background thread take the compute threads'
cores. Every value is a default: anything the user exported wins.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

# name -> (value, why)
RUNTIME_DEFAULTS: dict[str, tuple[str, str]] = {
    "OMPI_MCA_mpi_yield_when_idle": ("1", "stop Open MPI busy-polling a core that compute threads need"),
    "HOROVOD_CYCLE_TIME": ("0.1", "ms between Horovod's background-thread cycles: start allreduces sooner"),
    # A collective some ranks never join would wait forever; ten minutes leaves real imbalances alone
    # (a slow data loader, a large checkpoint) and still ends a job that cannot go on.
    "HOROVOD_STALL_CHECK_TIME_SECONDS": ("60", "warn about a collective some ranks wait in for this long"),
    "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": ("600", "end the job (naming tensors and missing ranks) after this long"),
}

# name -> (value, why), only when training runs on the CPU: fusion copies cost the compute core there
# (docs/benchmarks.md, "Scaling 1 -> 2 processes"); on GPUs the copies are device-side.
CPU_RUNTIME_DEFAULTS: dict[str, tuple[str, str]] = {
    "HOROVOD_FUSION_THRESHOLD": (str(1 << 20), "bytes: fuse only small tensors; larger ones are reduced in place, "
                                               "no copies through the fusion buffer"),
}


def runtime_defaults(cpu: bool = True) -> dict[str, tuple[str, str]]:
    """The tuned runtime settings (name -> (value, why)) for a CPU or a GPU job."""
    return {**RUNTIME_DEFAULTS, **(CPU_RUNTIME_DEFAULTS if cpu else {})}


def available_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def threads_per_rank(local_size: int, environ: MutableMapping[str, str] | None = None) -> int:
    """Intra-op threads for one rank: ``HVDKIT_THREADS`` if set, else cores / ranks on this host."""
    env = os.environ if environ is None else environ
    explicit = env.get("HVDKIT_THREADS")
    if explicit:
        try:
            value = int(explicit)
        except ValueError:
            value = 0
        if value < 1:
            raise ValueError(f"HVDKIT_THREADS must be an integer >= 1, got {explicit!r}")
        return value
    return max(1, available_cores() // max(1, local_size))


_USER_THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def check_threads(threads: int | None) -> int | None:
    """``threads`` if it is None or an integer >= 1, else a ValueError naming it."""
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be an integer >= 1 or None, got {threads!r}")
    return threads


def check_comm(comm: object) -> None:
    """Refuse a number as Horovod's ``comm`` (None, a list of ranks, or an MPI communicator): it is
    likely meant as ``threads=``."""
    if isinstance(comm, (bool, int, float, str)):
        raise TypeError(f"comm must be None, a list of ranks or an MPI communicator (Horovod's init(comm=...)), "
                        f"got {comm!r}; the number of intra-op threads is init(threads=...)")


def resolve_threads(threads: int | None, local_size: int,
                    environ: MutableMapping[str, str] | None = None) -> int | None:
    """Intra-op threads for this rank, or None to leave the framework's: ``threads``, else
    ``HVDKIT_THREADS``, else None if ``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` are set, else cores / ranks."""
    env = os.environ if environ is None else environ
    if check_threads(threads) is not None:
        return threads
    if "HVDKIT_THREADS" not in env and any(v in env for v in _USER_THREAD_VARS):
        return None
    return threads_per_rank(local_size, env)


# horovodrun starts Open MPI with `-mca pml ob1 -mca btl ^openib`, which keeps btl/ofi, and Open MPI 4.1's
# btl/ofi sleeps 1 s when it closes (btl_ofi_component.c), in every MPI_Finalize, whether or not it found a
# fabric. Without one (no device under these classes) it carries nothing, so it is left out.
HOROVODRUN_BTL = "^openib"
OFI_DEVICE_CLASSES = ("/sys/class/infiniband", "/sys/class/cxi")  # verbs, EFA, Omni-Path; Slingshot


def has_ofi_fabric(classes: tuple[str, ...] = OFI_DEVICE_CLASSES) -> bool:
    """Whether this host has a device an OFI provider other than plain TCP/UDP could use."""
    for folder in classes:
        try:
            if os.listdir(folder):
                return True
        except OSError:
            continue
    return False


def mpi_btl_default(env: MutableMapping[str, str], fabric: bool | None = None) -> dict[str, str]:
    """``OMPI_MCA_btl`` without btl/ofi when horovodrun's own list is in force and there is no fabric."""
    if env.get("OMPI_MCA_btl") != HOROVODRUN_BTL or (has_ofi_fabric() if fabric is None else fabric):
        return {}
    return {"OMPI_MCA_btl": HOROVODRUN_BTL + ",ofi"}


def apply_runtime_defaults(environ: MutableMapping[str, str] | None = None, *, cpu: bool = True) -> dict[str, str]:
    """Before ``hvd.init()``, set the defaults not set yet (``cpu`` adds :data:`CPU_RUNTIME_DEFAULTS`) and
    :func:`mpi_btl_default`; return what was set. ``HVDKIT_NO_TUNING=1`` turns this off."""
    env = os.environ if environ is None else environ
    if env.get("HVDKIT_NO_TUNING") == "1":
        return {}
    applied = {}
    for name, (value, _why) in runtime_defaults(cpu).items():
        if name not in env:
            env[name] = value
            applied[name] = value
    btl = mpi_btl_default(env)
    env.update(btl)
    applied.update(btl)
    return applied


def timeline_env(timeline: str | os.PathLike[str] | None, environ: MutableMapping[str, str] | None = None) -> None:
    """Before ``hvd.init()``, set ``HOROVOD_TIMELINE`` if ``timeline`` is a path: a Chrome trace of every
    collective (open it in https://ui.perfetto.dev)."""
    if timeline is None:
        return
    if not isinstance(timeline, (str, os.PathLike)) or not str(timeline):
        raise ValueError(f"timeline must be a file path (str or PathLike), got {timeline!r}")
    path = os.path.abspath(os.fspath(timeline))
    folder = os.path.dirname(path)
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        raise ValueError(f"timeline must be a path in an existing, writable folder, got {os.fspath(timeline)!r}")
    env = os.environ if environ is None else environ
    env["HOROVOD_TIMELINE"] = path


def local_size_from_env(environ: MutableMapping[str, str] | None = None) -> int:
    """Ranks on this host as the launcher says (before Horovod is initialised)."""
    env = os.environ if environ is None else environ
    for name in ("HOROVOD_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "PMI_LOCAL_SIZE"):
        if env.get(name, "").isdigit():
            return int(env[name])
    return 1
