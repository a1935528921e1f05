"""The Horovod build compiles what both extensions share once (``hvdkit/tools/build/patches/0012-build-common-
sources-and-gloo-once.patch``): upstream compiled the common sources into each extension and built Gloo twice,
a third of a cold build's compile time (docs/benchmarks.md, "Setup"). Read from the log of the build installed
here, which ``hvdkit build-horovod`` keeps under its cache; both extensions working is what every other
Horovod test shows."""

import re
from collections import Counter

import pytest
from helpers import requires_horovod

from hvdkit.tools.build import horovod_wheel as hw

pytestmark = [requires_horovod, pytest.mark.horovod]


def _build_log() -> str:
    inputs = hw.collect_inputs()
    log = hw.cache_root() / "logs" / f"horovod-{inputs.key}.log"
    assert log.exists(), f"no build log for the installed build's key {inputs.key}: {log}"
    return log.read_text(errors="replace")


def _compiled_objects() -> Counter:
    # CMake's progress lines: "[ 62%] Building CXX object horovod/torch/CMakeFiles/pytorch.dir/__/common/x.cc.o"
    found = re.findall(r"Building CXX object \S*CMakeFiles/([\w.]+)\.dir/(\S+)\.o", _build_log())
    assert found, "the build log holds no compile lines"
    return Counter(found)


def test_each_common_source_and_gloo_is_compiled_once():
    objects = _compiled_objects()
    targets = Counter(target for target, _ in objects)
    assert targets["pytorch"] == 5 and targets["tensorflow"] == 1, targets  # their own sources only
    assert targets["horovod_common_objects"] >= 30 and targets["compatible17_gloo"] >= 30, targets
    assert "gloo" not in targets, targets  # PyTorch links TensorFlow's C++17 Gloo
    horovod_sources = Counter(source for target, source in objects if "gloo" not in target)
    assert max(horovod_sources.values()) == 1, horovod_sources.most_common(3)


def test_the_extensions_are_compiled_without_debug_information():
    # patch 0013: -O3 kept, -g only with HOROVOD_BUILD_DEBUG_INFO=1 (a build with its own cache key)
    compiles = [line for line in _build_log().splitlines() if " -c " in line and "mpi_ops_v2.cc" in line]
    assert compiles, "no compile command of horovod/torch/mpi_ops_v2.cc in the build log"
    for line in compiles:
        flags = line.split()
        assert "-O3" in flags and "-g" not in flags, line[:400]
