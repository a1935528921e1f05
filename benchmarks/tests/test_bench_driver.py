"""``benchmarks/run`` finds its suites by file name, refuses bad arguments before running anything, and runs a
suite through either entry point (``run`` or ``main(argv)``)."""

import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
import types
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / "benchmarks" / "run"


def _driver():
    loader = importlib.machinery.SourceFileLoader("benchmarks_run", str(RUN))
    spec = importlib.util.spec_from_loader("benchmarks_run", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_suites_are_found_by_file_name():
    found = _driver().discover()
    assert {"allreduce", "keras", "precision", "scaling", "throughput"} <= set(found)
    assert found == sorted(p.stem for p in (REPO / "benchmarks" / "suites").glob("*.py") if p.stem[0] != "_")


def test_bad_suites_and_rounds_are_refused_before_anything_runs(tmp_path):
    def run(*argv):
        # no launchers on PATH: were a check missing, the suite would fail at once instead of running
        return subprocess.run([sys.executable, str(RUN), *argv], capture_output=True, text=True, timeout=60,
                              cwd=tmp_path, env={**os.environ, "PATH": str(tmp_path)})

    proc = run("nccl", "allreduce", "--out", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert "SUITE must be among allreduce, " in proc.stderr and "or all, got nccl" in proc.stderr
    proc = run("allreduce", "--rounds", "1", "--out", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert "--rounds must be at least 2 (a spread needs two rounds), got 1" in proc.stderr
    proc = run("allreduce")
    assert proc.returncode == 2 and "the following arguments are required: --out" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_a_suite_with_main_gets_its_own_folder_and_its_results_are_kept(tmp_path, monkeypatch):
    seen = []

    def main(argv):
        seen.append(argv)
        out = Path(argv[argv.index("--out") + 1])
        (out / "results.json").write_text(json.dumps({"targets": [], "saved_mb_per_s": 12.5}))
        return 0

    monkeypatch.setitem(sys.modules, "benchmarks.suites.demo", types.SimpleNamespace(main=main))
    got = _driver().run_suite("demo", True, 3, tmp_path, print)
    assert seen == [["--out", str(tmp_path / "demo"), "--rounds", "3", "--quick"]]
    assert got == {"targets": [], "saved_mb_per_s": 12.5}
