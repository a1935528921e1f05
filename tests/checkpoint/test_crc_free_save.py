"""hvdkit.torch.crc_free_save: checkpoints written without torch.save's per-record CRC-32, for that file only."""

import io
import os
import threading
import zipfile
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from hvdkit.torch import crc_free_save  # noqa: E402


def state():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 16), torch.nn.BatchNorm1d(16))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(8, 32)).sum().backward()
    opt.step()
    return {"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 3, "meta": {"names": ["a", "b"]}}


def assert_equal(a, b):
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            assert_equal(a[k], b[k])
    elif isinstance(a, list | tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_equal(x, y)
    else:
        assert a == b


def crcs(data: bytes) -> dict[str, int]:
    """Each record's CRC-32 as the zip's headers state it (the data records: tensors' bytes)."""
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return {i.filename: i.CRC for i in z.infolist() if "/data/" in i.filename}


def test_the_fast_path_is_active_on_the_pinned_torch():
    # if a torch upgrade changes the private names, saves fall back to torch.save: this says so in CI
    assert crc_free_save.crc32_off(), crc_free_save.fast_path_error()


def test_a_state_dict_saved_without_crc_loads_back_equal_with_weights_only():
    obj = state()
    buf = io.BytesIO()
    crc_free_save.save_without_crc32(obj, buf)
    assert_equal(torch.load(io.BytesIO(buf.getvalue()), map_location="cpu", weights_only=True), obj)


def test_the_records_carry_no_crc_while_torch_save_still_writes_them():
    obj = state()
    fast, plain = io.BytesIO(), io.BytesIO()
    crc_free_save.save_without_crc32(obj, fast)
    torch.save(obj, plain)
    fast_crcs, plain_crcs = crcs(fast.getvalue()), crcs(plain.getvalue())
    assert fast_crcs.keys() == plain_crcs.keys() and fast_crcs
    assert set(fast_crcs.values()) == {0}
    assert all(c != 0 for c in plain_crcs.values())


def test_the_process_wide_crc_setting_is_neither_read_nor_changed():
    before = torch.serialization.get_crc32_options()
    try:
        torch.serialization.set_crc32_options(True)
        buf = io.BytesIO()
        crc_free_save.save_without_crc32(state(), buf)
        assert torch.serialization.get_crc32_options() is True
        assert set(crcs(buf.getvalue()).values()) == {0}
        # a torch.save on another thread while hvdkit writes keeps its CRC-32
        out: dict[str, bytes] = {}

        def user_save():
            b = io.BytesIO()
            torch.save(state(), b)
            out["user"] = b.getvalue()

        t = threading.Thread(target=user_save)
        t.start()
        crc_free_save.save_without_crc32(state(), io.BytesIO())
        t.join(timeout=60)
        assert all(c != 0 for c in crcs(out["user"]).values())
    finally:
        torch.serialization.set_crc32_options(before)


def test_a_torch_whose_private_names_changed_falls_back_to_torch_save_and_warns(monkeypatch):
    crc_free_save._fast_path_error.cache_clear()
    crc_free_save._checked.cache_clear()
    monkeypatch.setattr(crc_free_save, "_SAVE_PARAMETERS", ["obj", "something_else"])
    try:
        assert not crc_free_save.crc32_off()
        assert "torch.serialization._save takes" in crc_free_save.fast_path_error()
        buf = io.BytesIO()
        with pytest.warns(RuntimeWarning, match="written by plain torch.save, with its CRC-32"):
            crc_free_save.save_without_crc32(state(), buf)
        assert all(c != 0 for c in crcs(buf.getvalue()).values())  # plain torch.save: CRCs written
        assert_equal(torch.load(io.BytesIO(buf.getvalue()), weights_only=True), state())
    finally:
        monkeypatch.undo()
        crc_free_save._fast_path_error.cache_clear()
        crc_free_save._checked.cache_clear()
    assert crc_free_save.crc32_off()


FAILING_SAVE = """
import gc, sys, torch
from hvdkit.torch.crc_free_save import save_without_crc32

class Full:  # a disk that fills after 1 MB, then a file closed by the failed save's cleanup
    def __init__(self):
        self.n, self.closed = 0, False
    def write(self, b):
        if self.closed:
            raise ValueError("write to closed file")
        self.n += memoryview(b).nbytes
        if self.n > 1 << 20:
            raise OSError(28, "No space left on device")
        return memoryview(b).nbytes
    def flush(self):
        pass

f = Full()
try:
    save_without_crc32({"w": torch.zeros(1 << 20)}, f)
except OSError as exc:
    print("raised", exc.errno)
f.closed = True
exc = None
gc.collect()
print("alive")
"""


@pytest.mark.timeout(120)
def test_a_save_that_fails_midway_raises_its_error_and_the_process_goes_on(tmp_path):
    # torch's zip writer finalises itself in its destructor; writing there to the closed file must not
    # abort the process (a C++ destructor that throws ends it): the error is reported, training goes on
    import subprocess
    import sys

    script = tmp_path / "failing_save.py"
    script.write_text(FAILING_SAVE)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=100,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["raised", "28", "alive"], proc.stdout + proc.stderr[-2000:]
