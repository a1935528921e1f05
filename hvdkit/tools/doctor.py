"""``hvdkit doctor``: what this environment has, what Horovod was built with, and how to fix problems."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

from hvdkit.runtime.env_vars import env_problems
from hvdkit.runtime.environments import detect as detect_launcher
from hvdkit.runtime.frameworks import TESTED, keras_backend, tested_range, untested
from hvdkit.runtime.tuning import (
    CPU_RUNTIME_DEFAULTS,
    HOROVODRUN_BTL,
    available_cores,
    local_size_from_env,
    mpi_btl_default,
    runtime_defaults,
    threads_per_rank,
)
from hvdkit.tools.build.horovod_wheel import first_line
from hvdkit.tools.build.horovod_wheel import installed_version as _version
from hvdkit.tools.build.pythons import is_supported, supported_names


@dataclass
class Report:
    """What ``hvdkit doctor`` found: facts, and problems with their fixes."""
    facts: dict[str, Any] = field(default_factory=dict)
    problems: list[tuple[str, str]] = field(default_factory=list)  # (problem, fix)
    fatal: bool = False

    def problem(self, what: str, fix: str, fatal: bool = False) -> None:
        """Record a problem and its fix; ``fatal`` when hvdkit cannot run."""
        self.problems.append((what, fix))
        self.fatal = self.fatal or fatal


def _horovod_build(report: Report) -> None:
    """What Horovod was built with, asked of its own API in a subprocess."""
    code = (
        "import importlib, json\n"
        "r = {'frameworks': {}, 'controllers': {}, 'tensor_operations': {}, 'errors': {}}\n"
        "lib = None\n"
        "for fw, mod in [('tensorflow', 'horovod.tensorflow'), ('torch', 'horovod.torch')]:\n"
        "    try:\n"
        "        m = importlib.import_module(mod)\n"
        # Horovod's module imports without its extension (it prints a warning and offers no ops).
        "        if getattr(m, '_MPI_LIB_AVAILABLE', True) is False: raise ImportError(mod + ': extension not built')\n"
        "        r['frameworks'][fw] = True; lib = lib or m\n"
        "    except Exception as e:\n"
        "        r['frameworks'][fw] = False; r['errors'][fw] = str(e)[:300]\n"
        "if lib is not None:\n"
        "    r['controllers'] = {'mpi': bool(lib.mpi_built()), 'gloo': bool(lib.gloo_built())}\n"
        "    r['tensor_operations'] = {'nccl': bool(lib.nccl_built()), 'mpi': bool(lib.mpi_built()),\n"
        "        'gloo': bool(lib.gloo_built()), 'ddl': bool(lib.ddl_built()), 'ccl': bool(lib.ccl_built())}\n"
        "print(json.dumps(r))\n"
    )
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    except subprocess.TimeoutExpired:
        report.problem("inspecting Horovod's build timed out", "run `horovodrun --check-build` to see why", True)
        return
    if out.returncode != 0:
        report.problem(f"Horovod's libraries do not load: {out.stderr.strip().splitlines()[-1:]}",
                       "rebuild it: hvdkit build-horovod --force", True)
        return
    build = json.loads(out.stdout.strip().splitlines()[-1])
    report.facts["horovod_build"] = build
    installed = {"torch": report.facts.get("torch"), "tensorflow": report.facts.get("tensorflow")}
    for fw, ok in build["frameworks"].items():
        if not ok and installed.get(fw):
            report.problem(f"Horovod was built without {fw} support ({build.get('errors', {}).get(fw, '')})",
                           "install the framework first, then: hvdkit build-horovod --force")
    if not (build["controllers"].get("mpi") or build["controllers"].get("gloo")):
        report.problem("Horovod has neither an MPI nor a Gloo controller", "hvdkit build-horovod --force", True)


def _spark(report: Report) -> None:
    """The hvdkit[spark] extra: horovod.spark imports pyarrow and pandas, and pyspark starts a JVM."""
    versions = {d: _version(d) for d in ("pyspark", "pyarrow", "pandas")}
    if versions["pyspark"] is None:
        report.facts["spark"] = None
        return
    report.facts["spark"] = {**versions, "java": shutil.which("java")}
    missing = [d for d, v in versions.items() if v is None]
    if missing:
        report.problem(f"pyspark is installed but not {', '.join(missing)}: `import horovod.spark` fails",
                       "pip install 'hvdkit[spark]'")
    if shutil.which("java") is None and "JAVA_HOME" not in os.environ:
        report.problem("pyspark is installed but there is no Java (no java on PATH, no JAVA_HOME): Spark cannot start",
                       "apt-get install default-jre-headless (Spark 4 needs Java 17 or newer)")


#: What hvdkit.keras does on each Keras backend.
KERAS_BACKENDS = {"tensorflow": "supported by hvdkit.keras", "torch": "supported by hvdkit.keras",
                  "jax": "not supported by hvdkit.keras: keras.distribution is JAX's native path"}


def _keras_backend(r: Report) -> None:
    """The Keras backend hvdkit.keras will run on (:func:`hvdkit.runtime.frameworks.keras_backend`), where
    that comes from, and whether hvdkit supports it."""
    backend, source = keras_backend()
    support = KERAS_BACKENDS.get(backend, "not supported by hvdkit.keras")
    r.facts["keras_backend"] = f"{backend} ({support}; from {source})"
    if backend not in ("tensorflow", "torch"):
        r.problem(f"Keras's backend is {backend} (from {source}): {support}",
                  "set KERAS_BACKEND=torch or KERAS_BACKEND=tensorflow to use hvdkit.keras")
    elif r.facts[backend] is None:
        r.problem(f"Keras's backend is {backend} (from {source}), but {backend} is not installed",
                  f"install {backend}, or set KERAS_BACKEND to the installed one")


def collect() -> Report:
    """Inspect this environment."""
    r = Report()
    f = r.facts
    f["python"] = platform.python_version()
    f["hvdkit"] = _version("hvdkit")
    f["torch"] = _version("torch")
    f["tensorflow"] = _version("tensorflow-cpu") or _version("tensorflow")
    f["keras"] = _version("keras")
    f["horovod"] = _version("horovod")
    if f["keras"] is not None:
        _keras_backend(r)
    f["ray"] = _version("ray")  # hvdkit[ray]: hvdkit.integrations.ray trains on a Ray cluster
    f["tested"] = {name: tested_range(name) for name in TESTED}
    for name in TESTED:
        message = untested(name, f[name])
        if message:
            r.problem(message, f"install a tested {name} ({tested_range(name)}), or report what breaks")
    mpirun = shutil.which("mpirun")
    f["mpi"] = (first_line([mpirun, "--version"]) or "unknown") if mpirun else None
    cores = available_cores()
    local = local_size_from_env()
    f["cpu_count"] = cores
    try:
        f["threads_per_rank"] = {str(n): threads_per_rank(n) for n in sorted({1, 2, local})}
    except ValueError:  # a bad HVDKIT_THREADS: env_problems() lists it with its fix
        f["threads_per_rank"] = None
    f["runtime_defaults"] = {k: v for k, (v, _why) in runtime_defaults(cpu=False).items()}  # every job
    f["cpu_runtime_defaults"] = {k: v for k, (v, _why) in CPU_RUNTIME_DEFAULTS.items()}  # added when no GPU
    # the Open MPI BTL list a horovodrun job's ranks get here (btl/ofi only where a fabric device is)
    f["horovodrun_btl"] = mpi_btl_default({"OMPI_MCA_btl": HOROVODRUN_BTL}).get("OMPI_MCA_btl", HOROVODRUN_BTL)
    launcher = detect_launcher(cores=cores)
    f["launcher"] = {"kind": launcher.kind, "detail": launcher.detail, "uses": launcher.uses}
    if launcher.problem:
        r.problem(launcher.problem, "see docs/clusters.md (which launcher sets what)", True)  # init() refuses it

    _spark(r)
    for what, fix in env_problems():
        r.problem(what, fix, True)  # init() refuses to start with them

    f["supported_pythons"] = supported_names()
    if not is_supported():
        r.problem(f"Python {f['python']} is not supported; hvdkit supports Python {supported_names()}",
                  "create the environment with one of them (./run.sh picks one; HVDKIT_PYTHON chooses)")
    if f["torch"] is None and f["tensorflow"] is None:
        r.problem("neither PyTorch nor TensorFlow is installed", "pip install 'hvdkit[torch]' or 'hvdkit[tensorflow]'",
                  True)
    if mpirun is None:
        r.problem("no MPI launcher (mpirun) found: only the Gloo controller can be used",
                  "apt-get install openmpi-bin libopenmpi-dev, then hvdkit build-horovod --force")
    if f["horovod"] is None:
        r.problem("Horovod is not installed", "hvdkit build-horovod (builds the patched 0.28.1 wheel and installs it)",
                  True)
    else:
        if "+hvdkit." not in f["horovod"]:
            r.problem(f"horovod {f['horovod']} is not hvdkit's patched build",
                      "hvdkit build-horovod --force (replaces it with the patched wheel)")
        _horovod_build(r)
    if shutil.which("horovodrun") is None and f["horovod"] is not None:
        r.problem("horovodrun is not on PATH", "activate the environment Horovod is installed in")
    return r


def render(r: Report) -> str:
    """The report as text."""
    f = r.facts
    lines = ["hvdkit doctor", ""]
    for key in ("python", "hvdkit", "torch", "tensorflow", "keras", "keras_backend", "horovod", "ray", "mpi",
                "cpu_count"):
        tested = f" (tested: {f['tested'][key]})" if key in f.get("tested", {}) else ""
        lines.append(f"  {key:<18} {f.get(key) or 'not installed'}{tested}")
        if key == "python":
            lines.append(f"  {'supported pythons':<18} {f.get('supported_pythons')}")
    tpr = (", ".join(f"{n} rank(s)/host -> {t}" for n, t in f["threads_per_rank"].items())
           if f["threads_per_rank"] is not None else "unknown: HVDKIT_THREADS is not valid (see Problems)")
    lines.append(f"  {'threads per rank':<18} {tpr}")
    spark = f.get("spark")
    lines.append(f"  {'spark':<18} " + (f"pyspark {spark['pyspark']}, pyarrow {spark['pyarrow'] or 'missing'}, pandas "
                                         f"{spark['pandas'] or 'missing'}, java {spark['java'] or 'missing'}"
                                         if spark else "not installed (pip install 'hvdkit[spark]')"))
    if f.get("launcher"):
        lines += [f"  {'launcher':<18} {f['launcher']['detail']}", f"  {'will use':<18} {f['launcher']['uses']}"]
    b = f.get("horovod_build")
    if b:
        def yes(d: dict[str, Any]) -> str:
            return ", ".join(f"{k} {'[X]' if v else '[ ]'}" for k, v in d.items())
        lines += ["", "  Horovod build", f"    frameworks         {yes(b['frameworks'])}",
                  f"    controllers        {yes(b['controllers'])}",
                  f"    tensor operations  {yes(b['tensor_operations'])}"]
    lines.append("")
    if r.problems:
        lines.append("Problems:")
        for what, fix in r.problems:
            lines += [f"  - {what}", f"      fix: {fix}"]
    else:
        lines.append("No problems found.")
    return "\n".join(lines)


def main(as_json: bool = False, allreduce: bool = False) -> int:
    """Print the report (``--json`` for machines); exit 1 when hvdkit cannot run. ``allreduce``: add
    :mod:`hvdkit.tools.allreduce_check`'s measurement (when the report found nothing fatal); exit 1 too
    when it fails or warns."""
    r = collect()
    measured: dict[str, Any] | None = None
    if allreduce and not r.fatal:
        from hvdkit.tools.allreduce_check import check

        try:
            measured = check()
        except RuntimeError as exc:
            r.problem(f"the allreduce check could not run: {exc}", "fix the problems above, then run it again", True)
    ok = not r.fatal and (measured is None or measured["ok"])
    if as_json:
        doc: dict[str, Any] = {"facts": r.facts, "problems": [{"problem": p, "fix": x} for p, x in r.problems],
                               "ok": ok}
        if measured is not None:
            doc["allreduce"] = measured
        print(json.dumps(doc, indent=2))
    else:
        print(render(r))
        if measured is not None:
            from hvdkit.tools.allreduce_check import render as render_allreduce

            print("\n" + render_allreduce(measured))
    return 0 if ok else 1
