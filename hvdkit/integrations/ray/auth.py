"""What to do when this driver and the Ray cluster disagree on token authentication.

Ray (2.5x) turns token authentication on by itself: ``ray start`` does when it finds a token (the file
``~/.ray/auth_token``, which any earlier local ``ray.init()`` writes, or ``RAY_AUTH_TOKEN`` /
``RAY_AUTH_TOKEN_PATH``) and ``RAY_AUTH_MODE`` is unset. A driver connecting to that cluster without
``RAY_AUTH_MODE=token`` is refused (``InvalidAuthToken``), and one with it is refused by a cluster started
without. Ray's own error names neither side's setting.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

MODE_VAR = "RAY_AUTH_MODE"


def token_sources(env: Mapping[str, str] | None = None) -> list[str]:
    """Where a Ray process started with ``env`` (and this HOME) would find a token."""
    env = os.environ if env is None else env
    found = [f"${v}" for v in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH") if env.get(v)]
    home = env.get("HOME") or str(Path.home())
    if (Path(home) / ".ray" / "auth_token").is_file():
        found.append(str(Path(home) / ".ray" / "auth_token"))
    return found


def advice(env: Mapping[str, str] | None = None) -> str:
    """What this driver's authentication settings are, and how to make them match the cluster's."""
    env = os.environ if env is None else env
    mode = env.get(MODE_VAR)
    sources = token_sources(env)
    here = (f"this driver has {MODE_VAR}={mode}" if mode else f"this driver has no {MODE_VAR} (a driver that "
            "connects then sends no token)") + (f" and a token in {', '.join(sources)}" if sources else ", no token")
    return (f"If the Ray cluster and this driver disagree on token authentication: {here}. A cluster started by "
            "`ray start` with RAY_AUTH_MODE unset uses token authentication whenever that node had a token "
            "(~/.ray/auth_token is written by any earlier local ray.init()). Either export RAY_AUTH_MODE=token "
            "here, with the cluster's token in RAY_AUTH_TOKEN or ~/.ray/auth_token, or start the cluster with "
            "RAY_AUTH_MODE=disabled (or without the stale ~/.ray/auth_token). "
            "https://docs.ray.io/en/latest/ray-security/token-auth.html")
