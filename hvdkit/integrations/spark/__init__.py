"""Run an hvdkit training function on Apache Spark: ``horovod.spark.run`` with its inputs checked first.

    import hvdkit.integrations.spark

    def train(epochs):
        import hvdkit.torch as hk      # inside the function: it runs in each rank's process
        hk.init()
        ...
        return metrics

    if __name__ == "__main__":          # required with MPI (see check_main_guard)
        spark = SparkSession.builder.master("local[2]").getOrCreate()
        results = hvdkit.integrations.spark.run(train, args=(3,), num_proc=2)   # one result per rank, rank order

:func:`run` is ``horovod.spark.run`` after checks that would otherwise fail late or obscurely
(``num_proc``, an active ``SparkContext``, the main guard with MPI). Needs ``pip install 'hvdkit[spark]'``.
"""

from __future__ import annotations

import ast
import io
import re
import sys
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

# The functions whose module-level call starts a Spark job through Horovod's launcher.
RUN_FUNCTIONS = frozenset({"horovod.spark.run", "horovod.spark.run_elastic", "hvdkit.integrations.spark.run",
                           "hvdkit.spark.run"})


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _is_main_guard(node: ast.stmt) -> bool:
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    sides = [node.test.left, *node.test.comparators]
    return ({s.id for s in sides if isinstance(s, ast.Name)} == {"__name__"}
            and {s.value for s in sides if isinstance(s, ast.Constant)} == {"__main__"})


#: ``functools.partial(f, ...)`` calls ``f`` when it is called
_PARTIALS = frozenset({"functools.partial", "partial"})


def unguarded_run_calls(source: str) -> list[int]:
    """Lines where importing ``source`` would start ``horovod.spark.run`` (or ``run_elastic``, or
    :func:`run`, under any alias): module-level calls outside the main guard, to the run or to a
    module-level callable that reaches it: a function (``def main(): ... run(...)`` then a bare
    ``main()``), a lambda, another name for either, a ``functools.partial`` of either, or a class's
    method or constructor (``Driver().start()``)."""
    tree = ast.parse(source)
    aliases: dict[str, str] = {}  # local name -> what it was imported as, or the callable it was assigned
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    classes = {c.name for c in tree.body if isinstance(c, ast.ClassDef)}

    def resolve(func: ast.expr, owner: str | None = None, me: str | None = None) -> str | None:
        """What calling ``func`` calls, by its full name (``self.go`` in a method of ``owner``: ``owner.go``)."""
        if isinstance(func, ast.Call):  # partial(f, ...)(): f
            if resolve(func.func, owner, me) in _PARTIALS and func.args:
                return resolve(func.args[0], owner, me)
            return None
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call):  # Driver().start
            made = resolve(func.value.func, owner, me)
            return f"{made}.{func.attr}" if made in classes else None
        name = _dotted(func)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        base = owner if owner is not None and head == me else aliases.get(head, head)
        return base + (f".{rest}" if rest else "")

    def called(node: ast.AST, owner: str | None = None, me: str | None = None) -> set[str]:
        return {name for sub in ast.walk(node) if isinstance(sub, ast.Call) and (name := resolve(sub.func, owner, me))}

    functions: dict[str, set[str]] = {}  # module-level callable -> what calling it calls
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions[node.name] = called(node)
        elif isinstance(node, ast.ClassDef):
            functions[node.name] = {f"{node.name}.__init__", f"{node.name}.__new__"}
            for f in node.body:
                if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    first = f.args.posonlyargs + f.args.args
                    functions[f"{node.name}.{f.name}"] = called(f, node.name, first[0].arg if first else None)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
            if isinstance(value, ast.Lambda):
                functions[target] = called(value.body)
            elif isinstance(value, ast.Call) and resolve(value.func) in _PARTIALS and value.args:
                if (partial_of := resolve(value.args[0])) is not None:
                    aliases[target] = partial_of
            elif isinstance(value, ast.Call) and resolve(value.func) in classes:
                aliases[target] = str(resolve(value.func))  # an instance: its methods are the class's
            elif (other := resolve(value)) is not None:
                aliases[target] = other
    starters = set(RUN_FUNCTIONS)
    while True:  # callables that reach the run through other module-level callables
        more = {name for name, calls in functions.items() if calls & starters} - starters
        if not more:
            break
        starters |= more
    lines: list[int] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            return
        if isinstance(node, ast.If) and _is_main_guard(node):
            for statement in node.orelse:
                visit(statement)
            return
        if isinstance(node, ast.Call) and resolve(node.func) in starters:
            lines.append(node.lineno)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return sorted(lines)


def check_main_guard(main_module: Any = None) -> None:
    """Refuse a driver script that calls ``horovod.spark.run`` at module level: with MPI, Horovod's
    ``spawn`` process imports ``__main__`` again and would start the job twice. Only ``.py`` scripts
    are checked (notebooks and ``python -c`` are not imported again)."""
    main_module = main_module if main_module is not None else sys.modules.get("__main__")
    path = getattr(main_module, "__file__", None)
    if not path or Path(path).suffix != ".py" or not Path(path).is_file():
        return
    try:
        lines = unguarded_run_calls(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return  # a script Python ran but this cannot read: say nothing rather than guess
    if lines:
        where = ", ".join(f"{path}:{n}" for n in lines)
        raise RuntimeError(
            f"the Spark job is started at module level ({where}): with MPI, Horovod starts mpirun through a "
            "'spawn' process that imports this script again, which would start Spark and the job a second time. "
            "Put the driver code under `if __name__ == \"__main__\":`, or pass use_gloo=True")


def _uses_mpi(use_mpi: bool | None, use_gloo: bool | None) -> bool:
    if use_gloo:
        return False
    if use_mpi:
        return True
    from horovod.common.util import mpi_built  # Horovod's own default: MPI when it was built with MPI

    return bool(mpi_built())


def run(fn: Callable[..., Any], args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None,
        num_proc: int | None = None, *, use_mpi: bool | None = None, use_gloo: bool | None = None,
        **horovod_kwargs: Any) -> list[Any]:
    """``horovod.spark.run``: ``fn``'s return value on every rank, in rank order; ``horovod_kwargs`` go to
    Horovod unchanged. Raises before any Spark job starts when an input is wrong."""
    if not callable(fn):
        raise TypeError(f"fn must be a function to run on every rank, got {fn!r}")
    if num_proc is not None and (isinstance(num_proc, bool) or not isinstance(num_proc, int) or num_proc < 1):
        raise ValueError(f"num_proc must be a positive int (one Spark task per rank) or None for Spark's default "
                         f"parallelism, got {num_proc!r}")
    if use_mpi and use_gloo:
        raise ValueError("use_mpi=True and use_gloo=True: choose one controller (or neither, for Horovod's default)")
    try:
        import pyspark
    except ImportError as exc:
        raise ImportError(f"hvdkit.integrations.spark needs pyspark ({exc}); install it with: "
                          "pip install 'hvdkit[spark]'") \
            from exc
    sc = pyspark.SparkContext._active_spark_context
    if sc is None:
        raise RuntimeError("no active SparkContext in this process: create the session first "
                           "(SparkSession.builder.master('local[2]').getOrCreate(), or your cluster's)")
    if num_proc is not None and str(sc.master).startswith("local") and num_proc > sc.defaultParallelism:
        # Every rank needs its task running at once: Spark would queue the rest, and the job would wait
        # for start_timeout (600 s). On a cluster executors can still be coming, so only local mode is checked.
        raise ValueError(f"num_proc={num_proc} is more than the {sc.defaultParallelism} task(s) this Spark "
                         f"application runs at once (master {sc.master}): every rank needs its own running task")
    if _uses_mpi(use_mpi, use_gloo):
        check_main_guard()
    import horovod.spark

    # Horovod's exception names only the failing process; the traceback is in the ranks' stderr (with Gloo,
    # in the executors' logs unless a stream is given): forward it and keep its tail for the exception.
    stderr = _Tail(horovod_kwargs.pop("stderr", None) or sys.stderr)
    try:
        return horovod.spark.run(fn, args=tuple(args), kwargs=dict(kwargs or {}), num_proc=num_proc,
                                 use_mpi=use_mpi, use_gloo=use_gloo, stderr=stderr, **horovod_kwargs)
    except Exception as exc:
        error = stderr.first_error()
        if error is None:
            raise
        raise RuntimeError(f"{exc}\nThe first error in the ranks' stderr:\n{error}") from exc


class _Tail(io.TextIOBase):
    """A text stream that writes through to ``target`` and keeps its last ``lines`` lines."""

    def __init__(self, target: TextIO, lines: int = 200) -> None:
        super().__init__()
        self.target = target
        self.lines: deque[str] = deque(maxlen=lines)
        self._partial = ""
        self._lock = threading.Lock()  # every rank's stream is forwarded by its own thread

    def writable(self) -> bool:
        return True

    def write(self, text: Any) -> int:
        text = text.decode(errors="replace") if isinstance(text, bytes) else str(text)
        with self._lock:
            self.target.write(text)
            *done, self._partial = (self._partial + text).split("\n")
            self.lines.extend(done)
        return len(text)

    def flush(self) -> None:
        self.target.flush()

    def close(self) -> None:
        self.flush()  # Horovod closes the streams it was given; the target is not ours to close

    def first_error(self, most: int = 40) -> str | None:
        """The first rank's Python traceback that is a cause, not Horovod's shutdown after another rank
        failed (its last ``most`` lines); else the first traceback; None when there is none."""
        with self._lock:
            lines = [*self.lines, self._partial]
        blocks: list[list[str]] = []  # each traceback, its lines kept apart by rank tag
        open_block: dict[str | None, list[str]] = {}
        for line in lines:
            tag = m.group(1) if (m := _RANK_TAG.match(line)) else None
            current = open_block.get(tag)
            chained = current is not None and any(c in prev for prev in current[-3:] for c in _CHAINED)
            if "Traceback (most recent call last)" in line and not chained:
                open_block[tag] = [line]
                blocks.append(open_block[tag])
            elif current is not None:
                current.append(line)
        if not blocks:
            return None
        causes = [b for b in blocks if not any(mark in line for line in b for mark in _AFTERMATH)]
        block = (causes or blocks)[0]
        return "\n".join(block[-most:]).rstrip()


#: What a rank prints when it fails only because another rank did (Horovod shut down under it).
_AFTERMATH = ("Horovod has been shut down", "HorovodInternalError")
#: Lines that join the next traceback to the one before (one exception chain).
_CHAINED = ("During handling of the above exception", "The above exception was the direct cause")
_RANK_TAG = re.compile(r"^\[(\d+)\]<std(?:out|err)>:")


__all__ = ["check_main_guard", "run", "unguarded_run_calls"]
