"""The network suite's scoring of rows against ``hvdkit plan`` (calibration rows apart from held-out ones, the
fp16 diagnosis outside both), and its fp16 worker paths under real Horovod (2 processes on this machine)."""

import pytest
from helpers import requires_horovod

from benchmarks.suites import network
from hvdkit.tools import plan

MB100 = 25_000_000


def _row(name, nodes, seconds):
    key = network.ALGORITHMS[name][2]
    return network.score({"algorithm": name, "plan_algorithm": key, "nodes": nodes, "link_gbit": 1.0,
                          "latency_ms": 0.0, "payload_bytes": 4 * MB100, "seconds": seconds,
                          "bound_seconds": plan.bound_seconds(key, MB100, nodes, 1.0, 0.0)})


def test_rows_are_scored_per_algorithm_and_the_diagnosis_stays_out_of_plan():
    rows = [_row(network.TREE, 8, 10 * 0.8 / 0.9),     # calibration: Open MPI's 10 transfers at 0.9
            _row(network.TREE, 4, 6 * 0.8 / 0.9 * 1.1),  # held out: 10 % slower than the model says
            _row(network.RING, 8, 1.6), _row(network.RING, 4, 1.3),
            _row(network.FP16, 8, 0.1)]                 # far off anything plan would say: must not count
    assert [r["held_out"] for r in rows] == [False, True, False, True, None]
    assert rows[-1]["plan_seconds"] is None
    cal = network.calibration(rows)
    assert cal["efficiency"]["tree"] == pytest.approx(0.9)
    assert set(cal["efficiency"]) == {"tree", "ring"}
    err = network.plan_error(rows)
    assert set(err) == {"calibration", "calibration ring", "calibration tree", "held_out", "held_out ring",
                        "held_out tree"}
    assert err["held_out tree"]["configurations"] == 1
    expected = plan.predict_seconds("tree", MB100, 4, 1.0, 0.0) / rows[1]["seconds"] - 1
    assert err["held_out tree"]["worst"] == pytest.approx(expected)



def test_fp16_targets_judge_hvdkits_compressor_and_report_horovods_as_a_diagnosis():
    def rounds(name, seconds):
        return {**_row(name, 4, seconds[0]), "rounds": seconds}

    rows = [rounds(network.RING, [1.7, 1.7, 1.7]), rounds(network.FP16, [1.4, 1.4, 1.4]),
            rounds(network.FP16_REUSE, [1.0, 1.0, 1.0])]
    fp16 = {t["target"]: t for t in network.targets(rows) if "compression" in t["target"]}
    ours = [t for name, t in fp16.items() if "hvdkit's compression='fp16'" in name]
    horovods = [t for name, t in fp16.items() if "Horovod's Compression.fp16" in name]
    assert len(ours) == len(horovods) == 1 and len(fp16) == 2
    assert ours[0]["goal"] == 1.5 and ours[0]["measured"] == pytest.approx(1.7)  # what users get is judged
    assert horovods[0]["goal"] is None and horovods[0]["measured"] == pytest.approx(1.7 / 1.4)

@requires_horovod
@pytest.mark.horovod
@pytest.mark.timeout(240)
@pytest.mark.parametrize("compression", ["fp16", "fp16-reuse"])
def test_fp16_worker_paths_sum_correctly_and_time_their_phases(compression):
    from benchmarks.jobs import run_worker

    # the worker itself exits non-zero if any rank's sum is wrong
    r = run_worker("horovodrun", 2, "benchmarks.workers.netcoll",
                   ["--algo", "horovod", "--compression", compression, "--params", "100000", "--rounds", "2"],
                   timeout=220)
    (payload,) = r["payloads"]
    assert r["size"] == 2 and payload["payload_bytes"] == 400_000 and len(payload["seconds"]) == 2
    assert set(payload["phases"]) == {"cast_down", "allreduce", "cast_back"}
    for phase in payload["phases"].values():
        assert len(phase) == 2 and all(0 < t < s for t, s in zip(phase, payload["seconds"]))
