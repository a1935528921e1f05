"""The GPU benchmark (``benchmarks/run gpu``): its built-in ResNet-50 is torchvision's network, a loop that
fails is a table cell instead of a crash, and the CPU smoke run trains every loop in both memory formats."""

import json
import os
import subprocess
import sys

import pytest
from helpers import REPO, requires_horovod

torch = pytest.importorskip("torch")

from benchmarks.workers import resnet_loops, resnet_model  # noqa: E402


def test_builtin_resnet50_is_torchvisions_network_and_says_it_is_built_in(monkeypatch):
    monkeypatch.setitem(sys.modules, "torchvision", None)  # as where torchvision is missing or fails to import
    model, what = resnet_model.build("resnet50", 1000)
    assert what.startswith("resnet50 (built in; torchvision not usable: ModuleNotFoundError")
    # torchvision 0.26's resnet50(): 25,557,032 parameters, 53,120 BatchNorm running-stat values
    assert sum(p.numel() for p in model.parameters()) == 25_557_032
    assert sum(b.numel() for n, b in model.named_buffers() if "running" in n) == 53_120
    model.eval()
    with torch.no_grad():
        assert model(torch.zeros(1, 3, 64, 64)).shape == (1, 1000)
    tiny, what = resnet_model.build("tiny", 10, source="builtin")
    assert what == "tiny (built in)" and tiny(torch.zeros(2, 3, 32, 32)).shape == (2, 10)
    with pytest.raises(ValueError, match="model must be one of resnet50, tiny, got 'vgg'"):
        resnet_model.build("vgg", 10)


def test_a_failing_loop_is_a_cell_of_the_table_not_a_crash():
    result = {"loops": {"plain": "plain PyTorch", "distribute": "hk.distribute(model, opt)"},
              "formats": {"nchw": {"plain": {"median_images_per_s": 2316.4},
                                   "distribute": {"median_images_per_s": 2315.0, "ratio_median": 0.9994}},
                          "channels_last": {"plain": {"median_images_per_s": 4309.0},
                                            "distribute": {"fails": resnet_loops._failure(
                                                ValueError("Tensor is required to be contiguous.\nmore"))}}}}
    header, rows = resnet_loops.table(result)
    assert header == ["loop", "nchw", "channels_last"]
    assert rows == [["plain PyTorch", "2,316.4", "4,309.0"],
                    ["hk.distribute(model, opt)", "2,315.0 (0.999)",
                     "fails: ValueError: Tensor is required to be contiguous."]]


def test_worker_refuses_a_gpu_it_does_not_have_and_a_run_without_the_baseline(tmp_path, capsys):
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit):
            resnet_loops.parse(["--results", "r.json", "--device", "cuda"])
        assert "cuda was asked for, but torch sees no GPU" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        resnet_loops.parse(["--results", "r.json", "--loops", "ddp", "trainer"])
    assert "must include plain (the ratios' baseline), got ddp trainer" in capsys.readouterr().err
    args = resnet_loops.parse(["--results", "r.json", "--device", "cpu", "--quick", "--steps", "3"])
    assert (args.model, args.batch, args.steps, args.precision) == ("tiny", 4, 3, "32")


@requires_horovod
@pytest.mark.horovod
@pytest.mark.timeout(240)
def test_cpu_quick_run_trains_every_loop_in_both_formats(tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "run"), "gpu", "--quick", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=220, cwd=REPO,
                          env={**os.environ, "HVDKIT_BENCH_DEVICE": "cpu"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    r = json.loads((tmp_path / "results.json").read_text())["suites"]["gpu"]["result"]
    assert (r["model"], r["device"], r["precision"], r["rounds"]) == ("tiny (built in)", "cpu", "32", 2)
    assert set(r["formats"]) == {"nchw", "channels_last"}
    for fmt, loops in r["formats"].items():
        assert list(loops) == ["plain", "distribute", "trainer", "ddp"]
        for kind, row in loops.items():
            # NCHW trains through every loop; in channels_last hvdkit's loops may still fail, and say why
            if "fails" in row:
                assert fmt == "channels_last" and kind in ("distribute", "trainer"), (fmt, kind, row)
                continue
            assert len(row["images_per_s"]) == 2 and all(v > 0 for v in row["images_per_s"]), (fmt, kind)
            if kind != "plain":
                assert len(row["ratio_vs_plain"]) == 2 and row["ratio_median"] > 0
    report = (tmp_path / "report.md").read_text()
    assert "tiny (built in) on cpu, precision 32" in report and "| DistributedDataParallel |" in report
    for loops in r["formats"].values():
        for row in loops.values():
            if "fails" in row:
                assert f"fails: {row['fails']}" in report
    targets = [t["target"] for t in json.loads((tmp_path / "results.json").read_text())["suites"]["gpu"]["targets"]]
    assert "hk.Trainer(...) / plain PyTorch, images/s, nchw, tiny (built in), cpu" in targets
