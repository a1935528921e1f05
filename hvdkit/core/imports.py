"""Import guards that turn a missing framework into an error naming the fix."""

from __future__ import annotations

import importlib


def require(module: str, *, extra: str, horovod: bool = False) -> None:
    """Import ``module`` or raise ImportError naming the pip extra (or the Horovod build) to install."""
    try:
        importlib.import_module(module)
    except ImportError as exc:
        if horovod:
            fix = ("Horovod is not installed (or was built without this framework): run "
                   "`hvdkit build-horovod` in this environment, which builds and installs the patched "
                   "horovod 0.28.1 wheel; `hvdkit doctor` shows what was built")
        else:
            fix = f"install it with: pip install 'hvdkit[{extra}]'"
        raise ImportError(f"hvdkit needs {module!r} here ({exc}); {fix}") from exc
