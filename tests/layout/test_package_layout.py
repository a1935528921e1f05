"""The package's layout is its architecture: the training core, and optional rooms (tools, integrations,
Horovod compatibility) that import the core and are never imported by it; no import circles anywhere."""

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "hvdkit"
CORE_ROOMS = ("core", "callbacks", "runtime", "torch", "keras", "tensorflow")
OPTIONAL_ROOMS = ("tools", "integrations", "compat")
# Old import paths kept for one release (each warns); nothing in the package imports them.
DEPRECATED_PATHS = ("ray", "spark")


def _modules() -> dict[str, Path]:
    return {".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__"): p
            for p in PACKAGE.rglob("*.py")}


def _imports(path: Path, known: set[str]) -> set[str]:
    """hvdkit modules ``path`` imports anywhere in its body (function-level and TYPE_CHECKING imports too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # ``from pkg import sub`` imports the submodule; ``from pkg import name``, the package's own name
            names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module
                     for a in node.names]
        else:
            continue
        found |= {n for n in names if n in known}
    return found


def _room(module: str) -> str:
    return module.split(".")[1] if "." in module else ""


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {m: _imports(p, set(mods)) - {m} for m, p in mods.items()}


def test_no_import_circles():
    graph = _graph()
    index, low, stack, on_stack, circles = {}, {}, [], set(), []

    def strongconnect(v):  # Tarjan: every strongly connected component of more than one module is a circle
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    assert circles == [], f"import circles in hvdkit/: {circles}"


def test_top_level_holds_only_the_entry_points_and_rooms():
    loose = sorted(p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py", "cli.py"))
    assert loose == [], f"modules loose at hvdkit/'s top level: {loose}"
    rooms = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert rooms == sorted([*CORE_ROOMS, *OPTIONAL_ROOMS, *DEPRECATED_PATHS])


def test_the_training_core_never_imports_an_optional_room():
    graph = _graph()
    wrong = sorted(f"{m} -> {t}" for m, targets in graph.items() for t in targets
                   if _room(m) in CORE_ROOMS and _room(t) in (*OPTIONAL_ROOMS, *DEPRECATED_PATHS)
                   # an adapter package serves Horovod's names from the compat room, which imports the adapter back
                   and not (m in ("hvdkit.torch", "hvdkit.tensorflow", "hvdkit.keras", "hvdkit.keras.callbacks")
                            and t.startswith("hvdkit.compat.horovod")))
    assert wrong == [], f"the training core imports an optional room: {wrong}"


def test_nothing_imports_the_deprecated_paths():
    graph = _graph()
    wrong = sorted(f"{m} -> {t}" for m, targets in graph.items() for t in targets
                   if _room(t) in DEPRECATED_PATHS and _room(m) not in DEPRECATED_PATHS)
    assert wrong == []


def test_moved_integrations_keep_their_old_path_for_one_release_with_a_warning():
    code = textwrap.dedent("""
        import warnings
        warnings.simplefilter("always")
        with warnings.catch_warnings(record=True) as caught:
            import hvdkit.spark, hvdkit.integrations.spark
        print(hvdkit.spark.run is hvdkit.integrations.spark.run)
        print([str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)])
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr
    same, messages = out.stdout.splitlines()
    assert same == "True"
    assert "hvdkit.spark is deprecated: use hvdkit.integrations.spark" in messages
