"""Build, cache and install a patched Horovod wheel for the frameworks in this environment.

Horovod 0.28.1's sdist does not build against PyTorch >= 2.1 or TensorFlow >= 2.16, so hvdkit downloads
it (sha256 checked), applies ``hvdkit/tools/build/patches`` (each says why), builds a wheel with a local
version label and caches it under a key of everything that changes the binary (docs/install.md).
pip never falls back to the unpatched sdist.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path

from hvdkit.compat.horovod import HOROVOD_VERSION
from hvdkit.tools.build.archive import safe_extract

SDIST_SHA256 = "92a43f5a94c43907a56805bad15f19700c62ffc83b7ca483f9e104e229f67ef0"
PATCH_DIR = Path(__file__).with_name("patches")
# The full build; collect_inputs() drops what the environment lacks, and the user's HOROVOD_WITH_* win.
BASE_FLAGS = {
    "HOROVOD_WITH_PYTORCH": "1",
    "HOROVOD_WITH_TENSORFLOW": "1",
    "HOROVOD_WITH_MPI": "1",
    "HOROVOD_WITH_GLOO": "1",
    "HOROVOD_WITHOUT_MXNET": "1",
}
_PARTS = {"PYTORCH", "TENSORFLOW", "MPI", "GLOO", "MXNET"}
# Patch 0013: debug information (-g) only when this is 1.
BUILD_FLAG_NAMES = ("HOROVOD_BUILD_DEBUG_INFO",)
GPU_FLAG_NAMES = ("HOROVOD_GPU_OPERATIONS", "HOROVOD_GPU_ALLREDUCE", "HOROVOD_GPU", "HOROVOD_NCCL_HOME",
                  "HOROVOD_NCCL_LINK", "HOROVOD_CUDA_HOME", "HOROVOD_BUILD_CUDA_CC_LIST")


class BuildError(RuntimeError):
    """A Horovod build could not be done; the message names cause and fix."""


def cache_root() -> Path:
    """Where wheels, sdists and build logs live: ``$HVDKIT_CACHE_DIR``, else ``$HVDKIT_HOME`` (where
    ``./run.sh`` keeps its venvs, so a build in ``./run.sh shell`` finds the wheel it made), else
    ``~/.cache/hvdkit``."""
    env = os.environ.get("HVDKIT_CACHE_DIR") or os.environ.get("HVDKIT_HOME")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "hvdkit"


def installed_version(dist: str) -> str | None:
    """The installed distribution ``dist``'s version, or None."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _dist_version(*names: str) -> str | None:
    return next((f"{name}=={v}" for name in names if (v := installed_version(name))), None)


def first_line(cmd: list[str]) -> str | None:
    """The first line a command prints (stdout, else stderr), or None when it is missing or silent."""
    exe = shutil.which(cmd[0])
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, *cmd[1:]], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0].strip() if text else None


@dataclass(frozen=True)
class BuildInputs:
    """Everything that changes the Horovod binary; its hash is the cache key."""

    horovod: str = HOROVOD_VERSION
    sdist_sha256: str = SDIST_SHA256
    patches: dict[str, str] = field(default_factory=dict)
    python: str = ""
    platform: str = ""
    torch: str | None = None
    tensorflow: str | None = None
    mpi: str | None = None
    cuda: str | None = None
    flags: dict[str, str] = field(default_factory=dict)

    @property
    def variant(self) -> str:
        """``cuda`` when GPU operations are built in, else ``cpu``."""
        return "cuda" if self.flags.get("HOROVOD_GPU_OPERATIONS") or self.flags.get("HOROVOD_GPU_ALLREDUCE") else "cpu"

    @property
    def key(self) -> str:
        """The cache key: a hash of every input."""
        blob = json.dumps(asdict(self), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    @property
    def local_label(self) -> str:
        """The wheel's local version label, ``hvdkit.<variant>.<key>``."""
        return f"hvdkit.{self.variant}.{self.key}"


def collect_inputs(environ: dict[str, str] | None = None) -> BuildInputs:
    """Read the build inputs from this interpreter's environment."""
    env = dict(os.environ if environ is None else environ)
    patches = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(PATCH_DIR.glob("*.patch"))}
    torch, tensorflow = _dist_version("torch"), _dist_version("tensorflow-cpu", "tensorflow", "tensorflow-gpu",
                                                            "tf-nightly")
    mpi = first_line(["mpirun", "--version"])
    present = {"PYTORCH": torch is not None, "TENSORFLOW": tensorflow is not None,
               "MPI": mpi is not None and shutil.which("mpicxx") is not None, "GLOO": True, "MXNET": False}
    flags = {}
    for part in sorted(_PARTS):
        if env.get(f"HOROVOD_WITH_{part}") == "1" or env.get(f"HOROVOD_WITHOUT_{part}") == "1":
            on = env.get(f"HOROVOD_WITH_{part}") == "1"
        else:
            on = present[part]
        flags[f"HOROVOD_WITH_{part}" if on else f"HOROVOD_WITHOUT_{part}"] = "1"
    flags.update({k: env[k] for k in GPU_FLAG_NAMES + BUILD_FLAG_NAMES if env.get(k)})
    cuda = first_line(["nvcc", "--version"]) if flags.keys() & set(GPU_FLAG_NAMES) else None
    if cuda is not None:
        cuda = first_line(["sh", "-c", "nvcc --version | tail -n 2 | head -n 1"]) or cuda
    return BuildInputs(
        patches=patches,
        python=f"{sys.implementation.name}-{sys.version_info.major}.{sys.version_info.minor}",
        platform=f"{sysconfig.get_platform()}-{platform.machine()}",
        torch=torch,
        tensorflow=tensorflow,
        mpi=mpi,
        cuda=cuda,
        flags=flags,
    )


def cached_wheel(inputs: BuildInputs, root: Path | None = None) -> Path | None:
    """The cached wheel built from ``inputs``, or None."""
    folder = (root or cache_root()) / "horovod" / inputs.key
    wheels = sorted(folder.glob("horovod-*.whl")) if folder.is_dir() else []
    return wheels[0] if wheels else None


def preflight(inputs: BuildInputs) -> None:
    """Fail early, with the fix, on what would make the build fail late."""
    problems: list[str] = []
    if shutil.which("cmake") is None:
        problems.append("cmake not found: apt-get install cmake (or pip install 'cmake>=3.13')")
    if shutil.which("c++") is None and shutil.which("g++") is None:
        problems.append("no C++ compiler: apt-get install g++")
    if inputs.flags.get("HOROVOD_WITH_MPI") == "1" and (shutil.which("mpicxx") is None or inputs.mpi is None):
        problems.append("MPI compiler wrapper or mpirun not found: apt-get install openmpi-bin libopenmpi-dev")
    if inputs.flags.get("HOROVOD_WITH_PYTORCH") == "1" and inputs.torch is None:
        problems.append("PyTorch is not installed in this environment: pip install torch==2.13.0")
    if inputs.flags.get("HOROVOD_WITH_TENSORFLOW") == "1" and inputs.tensorflow is None:
        problems.append("TensorFlow is not installed in this environment: pip install tensorflow-cpu==2.21.0")
    if "HOROVOD_WITH_PYTORCH" not in inputs.flags and "HOROVOD_WITH_TENSORFLOW" not in inputs.flags:
        problems.append("neither PyTorch nor TensorFlow is installed: pip install torch==2.13.0 (and/or "
                        "tensorflow-cpu==2.21.0), then build again")
    if inputs.variant == "cuda" and inputs.cuda is None:
        problems.append("HOROVOD_GPU_OPERATIONS is set but nvcc was not found: install the CUDA toolkit or unset it")
    if problems:
        raise BuildError("cannot build Horovod:\n  - " + "\n  - ".join(problems))


# Known failure signatures in the build log -> the fix to print.
_DIAGNOSES = [
    (r"mpi\.h: No such file", "MPI headers are missing: apt-get install libopenmpi-dev"),
    (r"Could NOT find MPI", "MPI was not found by CMake: apt-get install openmpi-bin libopenmpi-dev"),
    (r"string_view|requires.*C\+\+17", "C++17 needed: the CMAKE_CXX_STANDARD patch did not apply"),
    (r"highwayhash/arch_specific\.h", "XLA ops still built: the drop-xla-mpi-ops patch did not apply"),
    (r"nccl\.h: No such file", "NCCL headers missing: install libnccl-dev or set HOROVOD_NCCL_HOME"),
    (r"Compatibility with CMake < 3.5 has been removed",
     "CMake >= 4 with old third-party CMake files: export CMAKE_POLICY_VERSION_MINIMUM=3.5"),
    (r"Could NOT find CUDAToolkit|FOUND_LIB_cudart",
     "this torch is a CUDA build (PyPI's default), so Horovod compiles its torch extension against the CUDA "
     "toolkit even without GPU operations: set CUDA_HOME and HOROVOD_CUDA_HOME to the toolkit's root "
     "(e.g. /usr/local/cuda-13.0), or install torch's CPU build"),
    (r"No space left on device", "the disk is full: free space under the cache directory or TMPDIR"),
    (r"(Killed|internal compiler error: Killed)", "the compiler ran out of memory: build with MAKEFLAGS=-j1"),
    (r"No matching distribution found for ([\w\-\[\]<>=.,]+)",
     "a build requirement could not be downloaded (offline?): pip install it into this environment first"),
    (r"ModuleNotFoundError: No module named '(\w+)'", "a Python build dependency is missing from the environment"),
]


def diagnose(log_text: str) -> str:
    """The likely fix for the first known failure signature in a build log."""
    for pattern, fix in _DIAGNOSES:
        if re.search(pattern, log_text):
            return fix
    return "see the build log for the first error"


def _download_sdist(root: Path, log) -> Path:
    folder = root / "sdist"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"horovod-{HOROVOD_VERSION}.tar.gz"
    if not target.exists() or hashlib.sha256(target.read_bytes()).hexdigest() != SDIST_SHA256:
        with tempfile.TemporaryDirectory(dir=folder) as tmp:
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                   f"horovod=={HOROVOD_VERSION}", "-d", tmp]
            log.write(f"$ {' '.join(cmd)}\n")
            log.flush()
            proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, check=False)
            got = Path(tmp) / target.name
            if proc.returncode != 0 or not got.exists():
                raise BuildError(f"could not download the horovod=={HOROVOD_VERSION} sdist from the package index")
            os.replace(got, target)
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    if digest != SDIST_SHA256:
        raise BuildError(f"horovod sdist checksum mismatch: got {digest}, expected {SDIST_SHA256}")
    return target


def build_wheel(inputs: BuildInputs, root: Path | None = None, jobs: int | None = None) -> Path:
    """Build the patched wheel into the cache and return its path."""
    root = root or cache_root()
    preflight(inputs)
    logs = root / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log_path = logs / f"horovod-{inputs.key}.log"
    dest = root / "horovod" / inputs.key
    with open(log_path, "w") as log, tempfile.TemporaryDirectory(prefix="hvdkit-horovod-build-") as tmp:
        log.write(json.dumps(asdict(inputs), indent=2, sort_keys=True) + "\n")
        try:
            sdist = _download_sdist(root, log)
            safe_extract(sdist, Path(tmp))
            src = Path(tmp) / f"horovod-{HOROVOD_VERSION}"
            for patch in sorted(PATCH_DIR.glob("*.patch")):
                log.write(f"$ git apply {patch.name}\n")
                log.flush()
                cmd = (["git", "apply", "--verbose", str(patch)] if shutil.which("git")
                       else ["patch", "-p1", "--forward", "-i", str(patch)])
                proc = subprocess.run(cmd, cwd=src,
                                      stdout=log, stderr=subprocess.STDOUT, check=False)
                if proc.returncode != 0:
                    raise BuildError(f"patch {patch.name} does not apply to horovod {HOROVOD_VERSION}")
            env = dict(os.environ)
            env.update(inputs.flags)
            env["HOROVOD_LOCAL_VERSION"] = inputs.local_label
            env.setdefault("MAKEFLAGS", f"-j{jobs or os.cpu_count() or 1}")
            # CMake >= 4 refuses the bundled third_party/gloo's cmake_minimum_required(< 3.5);
            # older CMake ignores this variable.
            env.setdefault("CMAKE_POLICY_VERSION_MINIMUM", "3.5")
            out = Path(tmp) / "dist"
            cmd = [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-v", "-w", str(out), "."]
            log.write(f"$ {' '.join(cmd)}\n")
            log.flush()
            proc = subprocess.run(cmd, cwd=src, env=env, stdout=log, stderr=subprocess.STDOUT, check=False)
            wheels = sorted(out.glob("horovod-*.whl"))
            if proc.returncode != 0 or not wheels:
                raise BuildError("the Horovod build failed")
            dest.mkdir(parents=True, exist_ok=True)
            staged = dest / (wheels[0].name + ".part")
            shutil.copy2(wheels[0], staged)
            os.replace(staged, dest / wheels[0].name)
            (dest / "inputs.json").write_text(json.dumps(asdict(inputs), indent=2, sort_keys=True))
        except BuildError as exc:
            log.flush()
            cause = diagnose(log_path.read_text(errors="replace"))
            raise BuildError(f"{exc}\n  likely fix: {cause}\n  full build log: {log_path}") from None
    wheel = cached_wheel(inputs, root)
    assert wheel is not None
    return wheel


def ensure_installed(force_rebuild: bool = False, echo=None) -> Path:
    """Install the cached wheel for this environment, building it first if needed."""
    echo = echo or functools.partial(print, flush=True)
    inputs = collect_inputs()
    wheel = None if force_rebuild else cached_wheel(inputs)
    wanted = f"{HOROVOD_VERSION}+{inputs.local_label}"
    if wheel is not None and installed_version("horovod") == wanted:
        echo(f"horovod {wanted} already installed (cached wheel {wheel})")
        return wheel
    if wheel is None:
        echo(f"building horovod {wanted} (key {inputs.key}); log: {cache_root() / 'logs'}/horovod-{inputs.key}.log")
        wheel = build_wheel(inputs)
        echo(f"built {wheel}")
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--force-reinstall", str(wheel)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise BuildError(f"installing {wheel} failed:\n{proc.stdout}\n{proc.stderr}")
    echo(f"installed horovod {wanted} from {wheel}")
    return wheel
