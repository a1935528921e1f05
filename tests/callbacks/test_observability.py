"""Logging people look at (#14 item 5): TensorBoard scalars from rank 0 for both frameworks through the
core callback, Horovod's timeline with one argument, and the Trainer's progress bar only in a terminal."""

import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios

import pytest
from helpers import REPO, horovodrun, requires_horovod
from tb_events import read_scalars

pytestmark = [requires_horovod, pytest.mark.horovod]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("framework", ["torch", "keras"])
def test_tensorboard_scalars_from_rank_0_and_a_horovod_timeline(tmp_path, framework):
    logs, timeline = tmp_path / "tb", tmp_path / "timeline.json"
    horovodrun("observability.py", framework, str(logs), str(timeline), timeout=200)
    assert len(list(logs.glob("events.out.tfevents.*"))) == 1  # rank 0 only
    s = read_scalars(logs)
    steps_per_epoch = 64 // 8  # 128 rows over 2 ranks, batch 8
    assert [step for step, _ in s["epoch/loss"]] == [1, 2]
    for tag in ("epoch/accuracy", "epoch/val_loss", "epoch/val_accuracy", "epoch/lr", "epoch/samples_per_s",
                "epoch/steps_per_s"):
        assert len(s[tag]) == 2, (tag, sorted(s))
    assert [step for step, _ in s["batch/loss"]] == list(range(2, 2 * steps_per_epoch + 1, 2))
    lrs = [v for _, v in s["batch/lr"]]
    assert lrs[0] < lrs[-1] == pytest.approx(0.1)  # the warm-up ramp, written as applied
    assert all(v > 0 for _, v in s["epoch/samples_per_s"])
    events = json.loads(timeline.read_text().rstrip().rstrip(",") + ("" if timeline.read_text().rstrip().endswith("]")
                                                                       else "]"))
    names = {e.get("name", "") for e in events if isinstance(e, dict)}
    assert any("ALLREDUCE" in n for n in names), sorted(names)[:20]


WORKER = """
import torch
from torch.utils.data import TensorDataset
import hvdkit.torch as hk
hk.init(threads=1)
model = torch.nn.Linear(4, 2)
trainer = hk.Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), torch.nn.CrossEntropyLoss())
trainer.fit(TensorDataset(torch.randn(32, 4), torch.randint(0, 2, (32,))), epochs=2, batch_size=8)
print("done", flush=True)
"""


@pytest.mark.timeout(120)
def test_the_trainer_shows_a_progress_bar_in_a_terminal_and_none_in_a_log():
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    # The run into a log starts first and goes on beside the terminal run (each mostly imports torch).
    plain = subprocess.Popen([sys.executable, "-c", WORKER], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env)
    try:
        tty_err, out, returncode = _in_a_terminal(env)
        plain_out, plain_err = plain.communicate(timeout=100)
    finally:
        plain.kill()
        plain.wait()
    assert plain.returncode == 0 and "done" in plain_out, plain_err[-2000:]
    assert "epoch 1/2" not in plain_err
    assert returncode == 0 and "done" in out
    assert "epoch 1/2" in tty_err and "epoch 2/2" in tty_err and "4/4" in tty_err, tty_err[-2000:]


def _in_a_terminal(env: dict) -> tuple[str, str, int]:
    """WORKER with its stderr on a 100-column pseudo-terminal: (what the terminal got, stdout, exit status)."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a 100-column terminal
    proc = subprocess.Popen([sys.executable, "-c", WORKER], stdout=subprocess.PIPE, stderr=follower, env=env, text=True)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the terminal closed: the process ended
            break
        if not chunk:
            break
        chunks.append(chunk)
    out, _ = proc.communicate(timeout=100)
    os.close(leader)
    return b"".join(chunks).decode(errors="replace"), out, proc.returncode
