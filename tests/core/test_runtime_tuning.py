"""hvdkit's runtime defaults: which settings a CPU and a GPU job get, and that the user's own always win."""

import pytest
from helpers import horovodrun, requires_horovod, tagged_json

from hvdkit.runtime.tuning import (
    CPU_RUNTIME_DEFAULTS,
    RUNTIME_DEFAULTS,
    apply_runtime_defaults,
    has_ofi_fabric,
    mpi_btl_default,
    runtime_defaults,
)


def test_cpu_jobs_get_a_small_fusion_threshold_gpu_jobs_keep_horovods():
    env: dict[str, str] = {}
    applied = apply_runtime_defaults(env, cpu=True)
    assert env["HOROVOD_FUSION_THRESHOLD"] == str(1 << 20) == applied["HOROVOD_FUSION_THRESHOLD"]
    assert env["HOROVOD_CYCLE_TIME"] == "0.1" and env["OMPI_MCA_mpi_yield_when_idle"] == "1"
    gpu: dict[str, str] = {}
    apply_runtime_defaults(gpu, cpu=False)
    assert "HOROVOD_FUSION_THRESHOLD" not in gpu and set(gpu) == set(RUNTIME_DEFAULTS)
    assert set(runtime_defaults(cpu=True)) == set(RUNTIME_DEFAULTS) | set(CPU_RUNTIME_DEFAULTS)
    elastic = {"HOROVOD_ELASTIC": "1"}  # a worker of horovodrun --min-np/--max-np: the same (patch 0006)
    apply_runtime_defaults(elastic, cpu=True)
    assert elastic["HOROVOD_FUSION_THRESHOLD"] == str(1 << 20) and elastic["HOROVOD_CYCLE_TIME"] == "0.1"


def test_exported_settings_win_and_no_tuning_turns_all_off():
    env = {"HOROVOD_FUSION_THRESHOLD": "0", "HOROVOD_CYCLE_TIME": "5"}
    applied = apply_runtime_defaults(env, cpu=True)
    assert env["HOROVOD_FUSION_THRESHOLD"] == "0" and env["HOROVOD_CYCLE_TIME"] == "5"
    assert "HOROVOD_FUSION_THRESHOLD" not in applied and "HOROVOD_CYCLE_TIME" not in applied
    off = {"HVDKIT_NO_TUNING": "1"}
    assert apply_runtime_defaults(off, cpu=True) == {} and off == {"HVDKIT_NO_TUNING": "1"}


def test_btl_ofi_is_left_out_of_horovodruns_list_only_without_a_fabric():
    assert mpi_btl_default({"OMPI_MCA_btl": "^openib"}, fabric=False) == {"OMPI_MCA_btl": "^openib,ofi"}
    assert mpi_btl_default({"OMPI_MCA_btl": "^openib"}, fabric=True) == {}  # EFA, verbs: btl/ofi may carry it
    assert mpi_btl_default({"OMPI_MCA_btl": "self,vader,tcp"}, fabric=False) == {}  # the user's own list
    assert mpi_btl_default({}, fabric=False) == {}  # not under horovodrun (Open MPI picks its own PML)
    assert apply_runtime_defaults({"OMPI_MCA_btl": "^openib", "HVDKIT_NO_TUNING": "1"}) == {}


@requires_horovod
@pytest.mark.horovod
@pytest.mark.timeout(200)
@pytest.mark.skipif(has_ofi_fabric(), reason="this host has an OFI fabric device: btl/ofi stays on")
def test_under_horovodrun_mpi_finalize_no_longer_sleeps_in_btl_ofi():
    # btl/ofi's close is a fixed sleep(1): a shutdown far below it means it was not loaded; with
    # HVDKIT_NO_TUNING=1 (horovodrun's own list) the same shutdown takes the second.
    tuned = tagged_json(horovodrun("mpi_shutdown.py").stdout, "SHUTDOWN")
    untuned = tagged_json(horovodrun("mpi_shutdown.py", env={"HVDKIT_NO_TUNING": "1"}).stdout, "SHUTDOWN")
    assert sorted(r["rank"] for r in tuned) == sorted(r["rank"] for r in untuned) == [0, 1]
    assert {r["btl"] for r in tuned} == {"^openib,ofi"} and {r["btl"] for r in untuned} == {"^openib"}
    assert all(r["seconds"] >= 1.0 for r in untuned), untuned
    assert all(r["seconds"] < 0.9 for r in tuned), tuned
