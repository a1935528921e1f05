"""No cluster launcher: a single process, or ``horovodrun``/``mpirun`` on this machine."""

from __future__ import annotations

from collections.abc import Mapping


def horovodrun_describe(env: Mapping[str, str]) -> str:
    """One line about a rank that ``horovodrun`` (Gloo) started."""
    where = env.get("HOROVOD_GLOO_RENDEZVOUS_ADDR")
    elastic = ", elastic" if env.get("HOROVOD_ELASTIC") == "1" else ""
    return (f"Horovod launcher (Gloo{elastic}): rank {env.get('HOROVOD_RANK')} of {env.get('HOROVOD_SIZE')} "
            f"on {env.get('HOROVOD_HOSTNAME')}, rendezvous {where}:{env.get('HOROVOD_GLOO_RENDEZVOUS_PORT')}")


def describe(cores: int) -> str:
    """One line about a process no launcher started."""
    return f"no launcher: one process on this machine ({cores} core(s))"
