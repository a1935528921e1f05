"""hvdkit's runtime defaults: which settings a CPU and a GPU job get, and that the user's own always win."""

from hvdkit.runtime.tuning import CPU_RUNTIME_DEFAULTS, RUNTIME_DEFAULTS, apply_runtime_defaults, runtime_defaults


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
