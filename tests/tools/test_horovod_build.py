"""The Horovod build's cache key, patches, pre-flight checks and failure diagnoses."""

import dataclasses
import shutil
import subprocess

import pytest

from hvdkit.tools.build import horovod_wheel as hw
from hvdkit.tools.build.archive import safe_extract


def inputs(**kw):
    base = hw.BuildInputs(patches={"a.patch": "1"}, python="cpython-3.11", platform="linux-x86_64",
                          torch="torch==2.13.0+cpu", tensorflow="tensorflow-cpu==2.21.0",
                          mpi="mpirun (Open MPI) 4.1.4", flags=dict(hw.BASE_FLAGS))
    return dataclasses.replace(base, **kw)


@pytest.mark.parametrize("change", [
    {"torch": "torch==2.14.1"}, {"tensorflow": "tensorflow-cpu==2.20.0"}, {"python": "cpython-3.12"},
    {"mpi": "mpirun (Open MPI) 5.0.0"}, {"patches": {"a.patch": "2"}}, {"horovod": "0.28.0"},
    {"flags": {**hw.BASE_FLAGS, "HOROVOD_GPU_OPERATIONS": "NCCL"}},
])
def test_every_binary_input_changes_the_key(change):
    assert inputs(**change).key != inputs().key


def test_key_is_stable_and_labels_variant():
    assert inputs().key == inputs().key
    assert inputs().local_label == f"hvdkit.cpu.{inputs().key}"
    gpu = inputs(flags={**hw.BASE_FLAGS, "HOROVOD_GPU_OPERATIONS": "NCCL"}, cuda="Cuda compilation tools, 12.4")
    assert gpu.local_label.startswith("hvdkit.cuda.")


def test_collect_inputs_hashes_the_shipped_patches():
    got = hw.collect_inputs({})
    assert set(got.patches) == {p.name for p in hw.PATCH_DIR.glob("*.patch")} and len(got.patches) == 14
    assert got.flags == hw.BASE_FLAGS
    with_gpu = hw.collect_inputs({"HOROVOD_GPU_OPERATIONS": "NCCL"})
    assert with_gpu.flags["HOROVOD_GPU_OPERATIONS"] == "NCCL" and with_gpu.key != got.key


def test_collect_inputs_names_the_installed_framework_distributions():
    from importlib import metadata

    assert hw.collect_inputs({}).torch == f"torch=={metadata.version('torch')}"
    assert hw.installed_version("no-such-distribution-hvdkit") is None


def test_cached_wheel_lookup(tmp_path):
    i = inputs()
    assert hw.cached_wheel(i, tmp_path) is None
    d = tmp_path / "horovod" / i.key
    d.mkdir(parents=True)
    (d / "horovod-0.28.1+x-cp311-cp311-linux_x86_64.whl").write_bytes(b"")
    assert hw.cached_wheel(i, tmp_path).name.startswith("horovod-0.28.1")
    assert hw.cached_wheel(inputs(torch="torch==9"), tmp_path) is None


def test_patches_apply_to_the_pinned_sdist(tmp_path):
    """The patch files apply cleanly to horovod 0.28.1 (sdist from the cache, or the index)."""
    sdist = hw.cache_root() / "sdist" / f"horovod-{hw.HOROVOD_VERSION}.tar.gz"
    if not sdist.exists():
        with open(tmp_path / "log", "w") as log:
            sdist = hw._download_sdist(tmp_path, log)
    safe_extract(sdist, tmp_path)  # the build's own extraction: tarfile's filter= needs Python >= 3.11.4
    src = tmp_path / f"horovod-{hw.HOROVOD_VERSION}"
    for patch in sorted(hw.PATCH_DIR.glob("*.patch")):
        subprocess.run(["git", "apply", str(patch)], cwd=src, check=True, timeout=60)
    assert "set(CMAKE_CXX_STANDARD 17)" in (src / "CMakeLists.txt").read_text()
    assert "xla_mpi_ops.cc" not in (src / "horovod/tensorflow/CMakeLists.txt").read_text()
    # TF 2.21 no longer exports this symbol; the CUDA image's slow check proves the library loads.
    assert "AsGpuStreamValue(" not in (src / "horovod/tensorflow/mpi_ops.cc").read_text()
    torch_cmake = (src / "horovod/torch/CMakeLists.txt").read_text()
    assert "set(CMAKE_CXX_STANDARD 14)" not in torch_cmake


def test_preflight_names_missing_pieces_and_their_fix(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(hw.BuildError) as exc:
        hw.preflight(inputs(torch=None, mpi=None))
    msg = str(exc.value)
    assert "apt-get install cmake" in msg
    assert "apt-get install openmpi-bin libopenmpi-dev" in msg
    assert "pip install torch==2.13.0" in msg


@pytest.mark.parametrize("log,fix", [
    ("fatal error: mpi.h: No such file or directory", "apt-get install libopenmpi-dev"),
    ("absl/strings/string_view.h:53: error: 'string_view' in namespace 'std'", "C++17"),
    ("xla/printer.h:20: fatal error: highwayhash/arch_specific.h", "drop-xla-mpi-ops"),
    ("c++: fatal error: Killed signal terminated program cc1plus", "MAKEFLAGS=-j1"),
    ("Could NOT find CUDAToolkit (missing: CUDAToolkit_INCLUDE_DIR CUDA_CUDART)", "HOROVOD_CUDA_HOME"),
    ("set to NOTFOUND.\n  FOUND_LIB_cudart\n      linked by target \"pytorch\"", "torch's CPU build"),
    ("something else entirely", "see the build log"),
])
def test_failure_diagnosis(log, fix):
    assert fix in hw.diagnose(log)


def test_failed_build_keeps_the_log_and_prints_its_path(tmp_path, monkeypatch):
    """A build that fails (here: a patch that does not apply) says why and where the log is."""
    sdist_src = hw.cache_root() / "sdist" / f"horovod-{hw.HOROVOD_VERSION}.tar.gz"
    if sdist_src.exists():
        (tmp_path / "sdist").mkdir()
        shutil.copy(sdist_src, tmp_path / "sdist")
    bad = tmp_path / "patches"
    bad.mkdir()
    (bad / "0001-bad.patch").write_text("--- a/nope.txt\n+++ b/nope.txt\n@@ -1 +1 @@\n-a\n+b\n")
    monkeypatch.setattr(hw, "PATCH_DIR", bad)
    monkeypatch.setattr(hw, "preflight", lambda i: None)
    with pytest.raises(hw.BuildError) as exc:
        hw.build_wheel(inputs(), root=tmp_path)
    msg = str(exc.value)
    assert "patch 0001-bad.patch does not apply" in msg
    log_path = tmp_path / "logs" / f"horovod-{inputs().key}.log"
    assert f"full build log: {log_path}" in msg and log_path.read_text()
    assert hw.cached_wheel(inputs(), tmp_path) is None


def test_build_follows_the_environment_and_user_overrides():
    base = hw.collect_inputs({})
    no_tf = hw.collect_inputs({"HOROVOD_WITHOUT_TENSORFLOW": "1"})
    assert "HOROVOD_WITHOUT_TENSORFLOW" in no_tf.flags and "HOROVOD_WITH_TENSORFLOW" not in no_tf.flags
    assert no_tf.key != base.key
    gloo_only = hw.collect_inputs({"HOROVOD_WITHOUT_MPI": "1"})
    assert "HOROVOD_WITHOUT_MPI" in gloo_only.flags
    debug_info = hw.collect_inputs({"HOROVOD_BUILD_DEBUG_INFO": "1"})  # patch 0013: a build of its own
    assert debug_info.flags["HOROVOD_BUILD_DEBUG_INFO"] == "1" and debug_info.key != base.key
    assert debug_info.variant == "cpu"


def test_preflight_needs_a_framework():
    i = inputs(torch=None, tensorflow=None, flags={"HOROVOD_WITHOUT_PYTORCH": "1", "HOROVOD_WITHOUT_TENSORFLOW": "1",
                                                   "HOROVOD_WITH_GLOO": "1", "HOROVOD_WITHOUT_MPI": "1"})
    with pytest.raises(hw.BuildError, match="neither PyTorch nor TensorFlow is installed"):
        hw.preflight(i)


def test_offline_build_requirement_is_diagnosed():
    assert "pip install it into this environment" in hw.diagnose(
        "ERROR: No matching distribution found for cffi>=1.4.0")


def test_the_cache_follows_hvdkit_home_as_run_sh_does(monkeypatch, tmp_path):
    # ./run.sh keeps its venvs in HVDKIT_HOME; a build in `./run.sh shell` must use (and find) that cache.
    for name in ("HVDKIT_CACHE_DIR", "HVDKIT_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert hw.cache_root() == tmp_path / ".cache" / "hvdkit"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hw.cache_root() == tmp_path / "xdg" / "hvdkit"
    monkeypatch.setenv("HVDKIT_HOME", str(tmp_path / "home"))
    assert hw.cache_root() == tmp_path / "home"
    monkeypatch.setenv("HVDKIT_CACHE_DIR", str(tmp_path / "cache"))
    assert hw.cache_root() == tmp_path / "cache"
