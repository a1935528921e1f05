"""Reading a thread's stack for the hang report: the Horovod collective it waits in (with the tensor's name,
dtype and shape), the innermost line of the user's own code, and every thread's stack."""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
import sysconfig
import threading
import traceback
from types import FrameType
from typing import Any

_HVDKIT = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_LIBRARY = tuple({os.path.realpath(sysconfig.get_paths()[k]) + os.sep for k in ("stdlib", "platstdlib",
                                                                                 "purelib", "platlib")})


@functools.cache
def _horovod_dir() -> str:
    """Where the ``horovod`` package lies (found, not imported)."""
    spec = importlib.util.find_spec("horovod")
    origin = spec.origin if spec is not None else None
    return os.path.dirname(os.path.realpath(origin)) + os.sep if origin else f"{os.sep}horovod{os.sep}"


def _is_horovod(filename: str) -> bool:
    return os.path.realpath(filename).startswith(_horovod_dir())


def _is_hvdkit(filename: str) -> bool:
    return os.path.realpath(filename).startswith(_HVDKIT)


def _is_library(filename: str) -> bool:
    """Python's, an installed package's or hvdkit's: not the user's own code."""
    path = os.path.realpath(filename)
    return path.startswith(_LIBRARY) or path.startswith(_HVDKIT) or filename.startswith("<")


def is_users(frame: FrameType) -> bool:
    """Whether ``frame`` runs the user's own code (not Python's, an installed package's or hvdkit's)."""
    return not _is_library(frame.f_code.co_filename)


def frames_of(frame: FrameType | None) -> list[FrameType]:
    """Outermost first."""
    out = []
    while frame is not None:
        out.append(frame)
        frame = frame.f_back
    return out[::-1]


def _describe(value: Any) -> str:
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is None or dtype is None:
        return ""
    dims = ", ".join(str(d) for d in shape)
    return f" {str(dtype).replace('torch.', '').replace('<dtype: ', '').rstrip('>')}[{dims}]".replace("'", "")


def collective_of(frame: FrameType | None) -> str | None:
    """The Horovod call ``frame``'s thread waits in, with the tensor name, shape and dtype its frames hold;
    None when the thread is not blocked inside Horovod. The innermost Python frame must be Horovod's; the
    call is the outermost Horovod frame reached from there through library frames only (torch's autograd
    sits between ``allreduce`` and its ``synchronize``), so an elastic wrapper around the whole loop is not
    taken for a collective."""
    frames = [f for f in frames_of(frame) if not f.f_code.co_filename.startswith("<")]  # generated op wrappers
    if not frames or not _is_horovod(frames[-1].f_code.co_filename):
        return None
    chain = []
    for f in reversed(frames):
        filename = f.f_code.co_filename
        if not _is_horovod(filename) and not (_is_library(filename) and not _is_hvdkit(filename)):
            break
        chain.append(f)
    entry = [f for f in chain if _is_horovod(f.f_code.co_filename)][-1]
    text = f"{entry.f_globals.get('__name__', 'horovod')}.{entry.f_code.co_name}"
    for f in chain:  # innermost first: the name of the very tensor being reduced
        name = f.f_locals.get("name")
        if isinstance(name, str) and name:
            text += f" {name!r}"
            break
        pending = _pending_gradients(f.f_locals.get("self"))
        if pending:
            return f"{text} (gradients of {pending})"
    for f in chain:
        described = _describe(f.f_locals.get("tensor"))
        if described:
            return text + described
    return text


def _pending_gradients(optimizer: Any) -> str:
    """The parameters whose gradient averages a Horovod DistributedOptimizer still waits for."""
    handles, names = getattr(optimizer, "_handles", None), getattr(optimizer, "_parameter_names", None)
    if not isinstance(handles, dict) or not isinstance(names, dict) or not handles:
        return ""
    pending = [repr(names.get(p, "?")) for p in list(handles)]
    return ", ".join(pending[:3]) + (f" and {len(pending) - 3} more" if len(pending) > 3 else "")


def user_line(frame: FrameType | None) -> str:
    """``file:line in function`` of the innermost frame of the user's own code (not Python's, a library's
    or hvdkit's); the innermost frame when every frame is a library's."""
    frames = frames_of(frame)
    mine = [f for f in frames if is_users(f)] or frames[-1:]
    if not mine:
        return "unknown"
    f = mine[-1]
    return f"{f.f_code.co_filename}:{f.f_lineno} in {f.f_code.co_name}"


def other_threads(skip: set[int], limit: int = 2) -> str:
    """``thread NAME at file:line in function`` for the threads (but ``skip``) whose stack holds the user's own
    code, innermost frame: where a data loader thread (Keras's ``PyDataset`` workers) is stuck while the
    training thread waits for it inside a library."""
    names = {t.ident: t.name for t in threading.enumerate()}
    found = []
    for ident, frame in sys._current_frames().items():
        mine = [f for f in frames_of(frame) if is_users(f)] if ident not in skip else []
        if mine:
            f = mine[-1]
            found.append(f"thread {names.get(ident, ident)} at {f.f_code.co_filename}:{f.f_lineno} in "
                         f"{f.f_code.co_name}")
    return "; ".join(found[:limit]) + (f" and {len(found) - limit} more" if len(found) > limit else "")


def all_stacks() -> str:
    """Every thread's Python stack, with source lines and thread names (``traceback`` rather than
    ``faulthandler``: the same frames, but with the code of each line, which is what one reads first)."""
    names = {t.ident: t.name for t in threading.enumerate()}
    parts = []
    for ident, frame in sys._current_frames().items():
        if ident == threading.get_ident():
            continue  # the watchdog itself
        parts.append(f"Thread {names.get(ident, ident)} ({ident}):\n" + "".join(traceback.format_stack(frame)))
    return "\n".join(parts)
